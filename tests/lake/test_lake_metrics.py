"""Metric points (migration 20) on a DuckLake, which has no primary key: a redelivered batch adds nothing,
as on a file (``lake.insert_new`` anti-joins on the file ledger's key)."""

from __future__ import annotations

from decimal import Decimal

from ledger.metrics import DELTA, MetricPoint, prepare_points
from ledger.store import open_ledger
from ledger.write import write

T0 = 1_790_000_000_000_000_000


def _points() -> list[MetricPoint]:
    return [
        MetricPoint("claude_code.cost.usage", T0 + i, 0.125 * (i + 1), DELTA, attributes={"session.id": "s1"})
        for i in range(3)
    ]


def test_metric_points_are_stored_once_on_a_lake_and_on_a_file(lake_target, tmp_path) -> None:  # type: ignore[no-untyped-def]
    target, data = lake_target
    for con in (open_ledger(target, data_path=str(data)), open_ledger(tmp_path / "file.duckdb")):
        try:
            for _ in range(2):  # the second: an exporter's retry
                write(con, [prepare_points(_points()).to_arrow()])
            rows = con.execute("SELECT session_id, value FROM metric_points ORDER BY time").fetchall()
        finally:
            con.close()
        assert rows == [("s1", Decimal("0.125")), ("s1", Decimal("0.25")), ("s1", Decimal("0.375"))]
