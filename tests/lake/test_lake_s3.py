"""A lake whose Parquet files are on an S3-compatible endpoint (moto's server, started by the tests):
the CLI and two collectors ingest there, and the figures equal a file's."""

from __future__ import annotations

from collector.cli import main
from tests.lake.test_lake_ledger import _samples

from .team import collectors, post_in_parallel, report_json, sample_bodies


def test_a_lake_on_s3_holds_its_parquet_in_the_bucket_and_reports_what_a_file_reports(
    lake_target, s3_server, s3_bucket, tmp_path, capsys
):
    target, _ = lake_target
    data = f"s3://{s3_bucket}/ledger"
    assert main(["ingest", *_samples(), "--db", target, "--data-path", data]) == 0
    file_db = str(tmp_path / "file.duckdb")
    assert main(["ingest", *_samples(), "--db", file_db]) == 0
    assert report_json(target, capsys) == report_json(file_db, capsys)
    assert any(key.startswith("ledger/") and key.endswith(".parquet") for key in s3_server.objects(s3_bucket))
    assert main(["maintain", "--db", target, "--keep-days", "0", "--grace-hours", "0"]) == 0
    assert report_json(target, capsys) == report_json(file_db, capsys)


def test_two_collectors_on_an_s3_lake_store_each_sample_once(lake_target, s3_bucket, tmp_path, capsys):
    target, _ = lake_target
    bodies = sample_bodies()
    with collectors(target, f"s3://{s3_bucket}/team", 2) as (a, b):
        statuses = post_in_parallel({a: bodies, b: bodies[::-1]})  # every sample to both
    assert all(s == 200 for got in statuses.values() for s in got), statuses
    file_db = str(tmp_path / "file.duckdb")
    assert main(["ingest", *_samples(), "--db", file_db]) == 0
    assert report_json(target, capsys) == report_json(file_db, capsys)
