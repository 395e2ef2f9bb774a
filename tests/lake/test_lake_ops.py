"""Operating a lake: `turnledger migrate` copies a file ledger exactly, `turnledger maintain` compacts
and expires without changing a figure, and exactly one collector of a lake maintains it."""

from __future__ import annotations

import shutil
from pathlib import Path

import psycopg

from collector.cli import main
from collector.otlp import decode_protobuf, read_file
from ledger.ingest import ingest
from ledger.lake import lock as lake_lock
from ledger.store import open_ledger
from tests.conftest import SAMPLES
from tests.dashboard.conftest import make_run_ledger
from tests.server.conftest import wait_until

from .team import report_json, simulate_bodies, start_collector


def _counts(db: str) -> dict[str, int]:
    con = open_ledger(db, read_only=True)
    try:
        names = [n for (n,) in con.execute("SELECT table_name FROM information_schema.tables ORDER BY 1").fetchall()]
        return {n: con.execute(f"SELECT count(*) FROM {n}").fetchone()[0] for n in names if n != "schema_migrations"}
    finally:
        con.close()


def test_migrate_copies_the_sample_ledger_into_a_lake_with_identical_reports(lake_target, tmp_path, capsys):
    target, data = lake_target
    source = str(make_run_ledger(tmp_path / "sample.duckdb"))
    assert main(["migrate", "--from", source, "--to", target, "--data-path", str(data)]) == 0
    assert "copied" in capsys.readouterr().out
    assert _counts(target) == _counts(source)
    assert report_json(target, capsys) == report_json(source, capsys)
    assert main(["migrate", "--from", source, "--to", target]) == 2  # never merged into a lake holding rows
    assert "already holds rows" in capsys.readouterr().err
    assert _counts(target) == _counts(source)


def _parquet_files(data: Path) -> int:
    return sum(1 for _ in data.rglob("*.parquet"))


def test_maintain_merges_small_files_and_expires_snapshots_without_changing_a_figure(lake_target, capsys):
    target, data = lake_target
    con = open_ledger(target, data_path=str(data))
    try:
        for file in sorted(SAMPLES.glob("*.json")):  # one commit each: small files
            ingest(con, read_file(file))
    finally:
        con.close()
    before, files = report_json(target, capsys), _parquet_files(data)
    assert main(["maintain", "--db", target, "--keep-days", "0", "--grace-hours", "0"]) == 0
    out = capsys.readouterr().out
    assert "merged the files of" in out and "expired" in out
    assert _parquet_files(data) < files
    assert report_json(target, capsys) == before


def _maintainers(dsn: str) -> list[str]:
    """The application names of the sessions holding the lake-wide maintain lock."""
    with psycopg.connect(dsn, autocommit=True) as pg:
        rows = pg.execute(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.granted AND (l.classid::bigint << 32 | l.objid::bigint) = %s",
            [lake_lock._ROLE_KEYS["maintain"]],
        ).fetchall()
    return [name for (name,) in rows]


def test_one_collector_of_a_lake_maintains_it_and_another_takes_over_when_it_dies(lake_target, catalog_dsn):
    target, data = lake_target
    a = start_collector(target, data, "--maintain-every", "0.2")
    b = start_collector(target, data, "--maintain-every", "0.2")
    try:
        wait_until(lambda: len(_maintainers(catalog_dsn)) == 1, timeout=120)
        (leader,) = _maintainers(catalog_dsn)
        pids = {f"turnledger-{c.proc.pid}": c for c in (a, b)}
        assert leader in pids
        pids[leader].kill()
        (survivor,) = set(pids) - {leader}
        wait_until(lambda: _maintainers(catalog_dsn) == [survivor], timeout=120)
    finally:
        for c in (a, b):
            if c.proc.poll() is None:
                c.stop()


def test_a_lake_backed_up_as_catalog_dump_then_data_copy_restores_to_the_state_dumped(
    postgres, lake_target, tmp_path, capsys
):
    """docs/deployment.md's backup: pg_dump the catalog, then copy the data path; restore both."""

    target, data = lake_target
    dbname = target.split("dbname=")[1].split()[0]
    con = open_ledger(target, data_path=str(data))
    try:
        for file in sorted(SAMPLES.glob("*.json")):
            ingest(con, read_file(file))
    finally:
        con.close()
    at_backup = report_json(target, capsys)
    dump = postgres.root / f"{dbname}.dump"
    postgres.dump(dbname, dump)
    shutil.copytree(data, tmp_path / "backup")
    con = open_ledger(target)
    try:  # written after the backup: the restore must not hold it
        ingest(con, decode_protobuf(simulate_bodies()[0].data))
    finally:
        con.close()
    assert report_json(target, capsys) != at_backup
    shutil.rmtree(data)  # the disaster: data and catalog lost
    restored = postgres.create_database(f"{dbname}_restored")
    postgres.restore(f"{dbname}_restored", dump)
    shutil.copytree(tmp_path / "backup", data)
    assert report_json(f"ducklake:postgres:{restored}", capsys) == at_backup
