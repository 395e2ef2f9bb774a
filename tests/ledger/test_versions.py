"""Service version, deployment environment and variant: stored on runs, filterable, compared, backfilled.

They arrive as resource attributes (``service.version``, ``deployment.environment.name`` or the older
``deployment.environment``) or, for the free ``turnledger.variant`` label, on the root span too.
"""

from __future__ import annotations

import dataclasses

import duckdb

from collector.cli import main
from collector.demo.samples import MS, T0, Trace
from ledger import conventions as c
from ledger import queries as q
from ledger.ingest import ingest
from ledger.schema import migrate


def _run(key: str, start: int, resource: dict[str, str], root: dict[str, str] | None = None) -> list:  # type: ignore[type-arg]
    t = Trace(key, start=start, root_attrs=dict(root or {}))
    t.chat("claude-haiku-4-5", (1_000, 0, 0, 100), finish="end_turn")
    spans = t.finish("completed")
    return [dataclasses.replace(s, resource={c.SERVICE_NAME: "checkout", **resource}) for s in spans]


def _rollout(con: duckdb.DuckDBPyConnection) -> None:
    spans = []
    for i in range(3):  # 1.4 in staging (current semconv name), then 1.5 in production (the older name)
        spans += _run(
            f"old-{i}", T0 + i * 60_000 * MS, {c.SERVICE_VERSION: "1.4", c.DEPLOYMENT_ENVIRONMENT_NAME: "staging"}
        )
    for i in range(2):
        resource = {c.SERVICE_VERSION: "1.5", c.DEPLOYMENT_ENVIRONMENT: "production", c.VARIANT: "resource-label"}
        spans += _run(f"new-{i}", T0 + (10 + i) * 60_000 * MS, resource, {c.VARIANT: f"exp-{i % 2}"})
    ingest(con, spans)


def _runs(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, str | None]]:
    return con.execute("SELECT service_version, environment, variant FROM runs ORDER BY started_at").fetchall()


STORED = [("1.4", "staging", None)] * 3 + [("1.5", "production", "exp-0"), ("1.5", "production", "exp-1")]


def test_the_versions_are_stored_on_runs(ledger) -> None:  # type: ignore[no-untyped-def]
    _rollout(ledger)
    assert _runs(ledger) == STORED  # the root span's variant wins over the resource's


def test_they_filter_every_query_and_have_a_first_and_last_seen(ledger) -> None:  # type: ignore[no-untyped-def]
    _rollout(ledger)
    assert q.records(ledger, q.time_bounds(q.Filters(environment="production")))[0]["runs"] == 2
    assert q.records(ledger, q.time_bounds(q.Filters(service_version="1.4")))[0]["runs"] == 3
    assert q.records(ledger, q.time_bounds(q.Filters(variant="exp-1")))[0]["runs"] == 1
    spend = q.records(ledger, q.spend_over_time(q.Filters(service_version="1.5"), bucket="day"))
    assert sum(r["calls"] for r in spend) == 2  # charge queries follow the run filters
    assert [r["value"] for r in q.records(ledger, q.filter_values(dimension="environment"))] == [
        "production",
        "staging",
    ]
    seen = q.records(ledger, q.compare_versions(by="service_version"))
    assert [(r["version"], r["runs"]) for r in seen] == [("1.5", 2), ("1.4", 3)]  # newest first
    first, last = seen[1]["first_seen"], seen[1]["last_seen"]
    assert (last - first).total_seconds() == 120


def test_the_cli_filters_and_compares_by_them(ledger, db_path, capsys) -> None:  # type: ignore[no-untyped-def]
    _rollout(ledger)
    ledger.close()
    assert main(["compare", "--by", "service_version", "1.4", "1.5", "--json", "--db", str(db_path)]) == 0
    assert '"runs": {\n    "a": 3,\n    "b": 2\n  }' in capsys.readouterr().out
    assert (
        main(["compare", "--by", "variant", "exp-0", "exp-1", "--environment", "production", "--db", str(db_path)]) == 0
    )
    assert "A = exp-0 (1 runs) vs B = exp-1 (1 runs)" in capsys.readouterr().out


def test_migration_16_fills_them_in_from_the_stored_spans(ledger) -> None:  # type: ignore[no-untyped-def]
    _rollout(ledger)
    ledger.execute("DELETE FROM schema_migrations WHERE version = 16")  # the ledger as migration 12 left it
    for column in ("service_version", "environment", "variant"):
        ledger.execute(f"ALTER TABLE runs DROP COLUMN {column}")
    ledger.execute("ALTER TABLE budgets DROP COLUMN relative")
    migrate(ledger)
    assert _runs(ledger) == STORED
