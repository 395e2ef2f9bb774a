"""The ledger on a DuckLake (PostgreSQL catalog started by the tests, Parquet in a local folder)
gives what the file gives: the same schema, the same rows, the same `report --json`."""

from __future__ import annotations

from pathlib import Path

from collector.cli import main
from collector.otlp import read_file
from ledger import lake
from ledger.ingest import ingest
from ledger.schema import MIGRATIONS, schema_version
from ledger.store import open_ledger
from ledger.tables import WRITTEN, table
from tests.conftest import SAMPLES

from .team import report_json


def _samples() -> list[str]:
    return [str(p) for p in sorted(SAMPLES.glob("*.json"))]


_COLUMNS = (
    "SELECT table_name, column_name, data_type FROM information_schema.columns "
    "WHERE table_catalog = current_database() ORDER BY table_name, ordinal_position"
)


def test_the_lake_runs_every_migration_and_has_the_file_ledgers_columns(lake_target, tmp_path):
    target, data = lake_target
    con = open_ledger(target, data_path=str(data))
    file_con = open_ledger(tmp_path / "file.duckdb")
    try:
        assert lake.is_lake(con) and lake.is_lake(con.cursor()) and not lake.is_lake(file_con)
        assert schema_version(con) == MIGRATIONS[-1][0]
        assert con.execute(_COLUMNS).fetchall() == file_con.execute(_COLUMNS).fetchall()
        for name in WRITTEN:
            columns = con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
                [name],
            ).fetchall()
            assert tuple(c for (c,) in columns) == table(name).names, name
    finally:
        con.close()
        file_con.close()
    again = open_ledger(target)  # the catalog keeps the data path; nothing left to migrate
    try:
        assert schema_version(again) == MIGRATIONS[-1][0]
    finally:
        again.close()


def test_ingest_and_report_json_equal_on_a_file_and_on_a_lake(lake_target, tmp_path, capsys, monkeypatch):
    target, data = lake_target
    monkeypatch.setenv("TURNLEDGER_DATA_PATH", "")  # restored after: main() exports --data-path
    file_db = str(tmp_path / "file.duckdb")
    assert main(["ingest", *_samples(), "--db", file_db]) == 0
    assert main(["ingest", *_samples(), "--db", target, "--data-path", str(data)]) == 0
    on_file, on_lake = report_json(file_db, capsys), report_json(target, capsys)
    assert on_lake["runs"] > 0 and on_lake["total_usd"] > 0
    assert on_lake == on_file
    assert any(Path(data).rglob("*.parquet")), "the lake's rows are Parquet files under the data path"


def test_a_batch_delivered_twice_is_stored_and_charged_once_on_the_lake(lake_target, tmp_path):
    target, data = lake_target
    spans = read_file(SAMPLES / "five_turn_run.json")
    con = open_ledger(target, data_path=str(data))
    try:
        first = ingest(con, spans)
        again = ingest(con, spans)
        assert first.spans_written > 0 and again.spans_written == 0 and again.charges_written == 0
        counts = {n: con.execute(f"SELECT count(*) FROM {n}").fetchone()[0] for n in (*WRITTEN, "runs")}
        (total,) = con.execute("SELECT sum(usd_total) FROM runs").fetchone()
    finally:
        con.close()
    file_con = open_ledger(tmp_path / "once.duckdb")
    try:
        ingest(file_con, spans)
        assert counts == {n: file_con.execute(f"SELECT count(*) FROM {n}").fetchone()[0] for n in counts}
        assert total == file_con.execute("SELECT sum(usd_total) FROM runs").fetchone()[0]
    finally:
        file_con.close()


def test_one_collector_on_the_lake_ingests_what_the_cli_puts_in_a_file(lake_target, tmp_path, capsys, monkeypatch):
    """A real `turnledger serve` (CollectorServer) on the lake, every sample posted over OTLP/HTTP and the
    first ones posted twice (an exporter's retry): `report --json` equals the file's, to the cent."""
    from collector.receiver import CollectorServer, ServerConfig
    from tests.server.conftest import post_otlp

    target, data = lake_target
    monkeypatch.setenv("TURNLEDGER_DATA_PATH", str(data))
    samples = _samples()
    server = CollectorServer(ServerConfig(port=0, db=target)).start()
    try:
        for path in [*samples, *samples[:3]]:
            assert post_otlp(server.url, Path(path).read_bytes()).status == 200, path
    finally:
        server.stop()
    file_db = str(tmp_path / "file.duckdb")
    assert main(["ingest", *samples, "--db", file_db]) == 0
    assert report_json(target, capsys) == report_json(file_db, capsys)


def test_a_delivery_attempt_recorded_again_replaces_its_row_on_the_lake(lake_target):
    """alert_deliveries is keyed by (alert_id, target, attempt): INSERT OR REPLACE in the file, MERGE on the lake."""
    from datetime import UTC, datetime

    from ledger.budgets.delivery import DeliveryAttempt
    from ledger.budgets.rules import WebhookTarget
    from ledger.budgets.store import insert_attempts, list_deliveries

    target, data = lake_target
    hook = WebhookTarget("https://hooks.example.com/tl")
    at = datetime(2026, 12, 1, tzinfo=UTC)
    con = open_ledger(target, data_path=str(data))
    try:
        insert_attempts(con, [DeliveryAttempt("a1", hook, 1, at, "retrying", 503, 4.0, "busy")])
        insert_attempts(
            con,
            [
                DeliveryAttempt("a1", hook, 1, at, "failed", 500, 5.0, "gave up"),
                DeliveryAttempt("a1", hook, 2, at, "delivered", 200, 3.0, ""),
            ],
        )
        rows = [(d["attempt"], d["status"], d["http_status"]) for d in list_deliveries(con, ["a1"])]
    finally:
        con.close()
    assert rows == [(1, "failed", 500), (2, "delivered", 200)]


def test_an_unreachable_lake_is_one_line_naming_it_without_its_password(postgres, capsys):
    target = f"ducklake:postgres:dbname=absent host=127.0.0.1 port={postgres.port} user=nobody password=s3cret"
    assert main(["report", "--json", "--db", target]) == 2
    err = capsys.readouterr().err
    assert "turnledger: reading lake" in err and "turnledger report: cannot open lake" in err and "dbname=absent" in err
    assert "s3cret" not in err
