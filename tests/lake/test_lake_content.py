"""The content store on a DuckLake (no keys, no indexes): every captured turn rebuilds as on a file."""

from __future__ import annotations

from collector.otlp import read_file
from ledger.content import load_turn, trace_attributes
from ledger.ingest import ingest
from ledger.store import open_ledger
from tests.conftest import SAMPLES


def test_captured_turns_rebuild_on_the_lake_as_on_a_file(lake_target, tmp_path):
    target, data = lake_target
    spans = [s for p in sorted(SAMPLES.glob("*.json")) for s in read_file(p)]
    lake_con, file_con = open_ledger(target, data_path=str(data)), open_ledger(tmp_path / "file.duckdb")
    try:
        for con in (lake_con, file_con):
            ingest(con, spans)
            ingest(con, spans)  # an exporter's retry stores no block or context twice
        calls = sorted(file_con.execute("SELECT trace_id, span_id FROM contexts").fetchall())
        assert calls and sorted(lake_con.execute("SELECT trace_id, span_id FROM contexts").fetchall()) == calls
        for name in ("content_blocks", "run_blocks", "contexts"):
            count = f"SELECT count(*) FROM {name}"
            assert lake_con.execute(count).fetchone() == file_con.execute(count).fetchone(), name
        for trace_id, span_id in calls:
            assert load_turn(lake_con, trace_id, span_id) == load_turn(file_con, trace_id, span_id)
        for trace_id in {t for t, _ in calls}:
            assert trace_attributes(lake_con, trace_id) == trace_attributes(file_con, trace_id)
    finally:
        lake_con.close()
        file_con.close()
