"""A step-cap halt is the harness's step limit, not the loop detector: the runs rollup counts it apart."""

from __future__ import annotations

from collector.otlp import read_file
from ledger.ingest import ingest
from ledger.schema import MIGRATIONS, _alter_indexed
from ledger.store import open_ledger

from .conftest import SAMPLES

STEP_CAPPED = SAMPLES / "harness" / "shipping_soft_failure.json"  # stopped by max_steps: one step_cap halt


def test_a_step_cap_halt_is_not_a_loop_trip():
    con = open_ledger(":memory:")
    ingest(con, read_file(STEP_CAPPED))
    assert con.execute("SELECT stop_cause, loop_trips, step_cap_halts FROM runs").fetchall() == [("max_steps", 0, 1)]


def test_migration_12_moves_step_cap_halts_out_of_loop_trips(tmp_path):
    con = open_ledger(tmp_path / "old.duckdb")
    ingest(con, read_file(STEP_CAPPED))
    # The ledger as it was before migration 12: the halt counted as a loop trip, no switch on rules.
    _alter_indexed(con, "runs", ["ALTER TABLE runs DROP COLUMN step_cap_halts"])
    con.execute("UPDATE runs SET loop_trips = loop_trips + 1")
    con.execute("ALTER TABLE budgets DROP COLUMN enabled")
    con.execute("DELETE FROM schema_migrations WHERE version = 12")
    con.close()
    con = open_ledger(tmp_path / "old.duckdb")  # migrates
    assert con.execute("SELECT loop_trips, step_cap_halts FROM runs").fetchall() == [(0, 1)]
    assert any(version == 12 for version, _, _ in MIGRATIONS)
    con.close()
