"""Migration 15: the Health page's per-span facts decided at ingest equal what the stored JSON says.

``ledger.health_columns`` decides them in Python as rows are built; its ``BACKFILL``
(what migration 15 runs over a ledger's existing rows) decides them in SQL. Both
must agree on every span of the committed harness scenarios and on hostile values.
"""

from __future__ import annotations

from pathlib import Path

from collector.otlp import read_file
from ledger import conventions as c
from ledger.health_columns import BACKFILL
from ledger.ingest import ingest
from ledger.spans import SpanRecord
from ledger.store import open_ledger

HARNESS = Path(__file__).resolve().parents[2] / "sample_traces" / "harness"
T0 = 1_790_000_000_000_000_000


def _odd_spans() -> list[SpanRecord]:
    """Tool names and flags in every shape a producer sends, and times to first token good and bad."""

    def span(i: int, name: str, attrs: dict) -> SpanRecord:  # type: ignore[type-arg]
        return SpanRecord(trace_id="e" * 32, span_id=f"{i:016x}", parent_span_id="f" * 16, name=name,
                          start_ns=T0 + i, end_ns=T0 + i + 1_000, attributes=attrs)  # fmt: skip

    tool = {c.OPERATION_NAME: "execute_tool"}
    chat = {c.OPERATION_NAME: "chat", c.PROVIDER_NAME: "mock", c.REQUEST_MODEL: "m", c.INPUT_TOKENS: 1}
    return [
        span(1, "execute_tool lookup", {**tool, c.TOOL_SOFT_FAILURE: True}),
        span(2, "run a tool", {**tool, c.TOOL_NAME: "by_attribute", c.TOOL_SOFT_FAILURE: "true"}),
        span(3, "nameless", {**tool, c.TOOL_SOFT_FAILURE: False}),
        span(4, "numbered", {**tool, c.TOOL_NAME: 7, c.TOOL_SOFT_FAILURE: "yes"}),
        span(5, "not a tool", {c.TOOL_SOFT_FAILURE: True}),
        span(6, "chat m", {**chat, c.TIME_TO_FIRST_CHUNK: 0.25, c.CALL_ID: "a"}),
        span(7, "chat m", {**chat, c.TIME_TO_FIRST_CHUNK: 3, c.CALL_ID: "b"}),
        span(8, "chat m", {**chat, c.TIME_TO_FIRST_CHUNK: "soon", c.CALL_ID: "c"}),
        span(9, "chat m", {**chat, c.TIME_TO_FIRST_CHUNK: True, c.CALL_ID: "d"}),
    ]


def _facts(con) -> list[tuple]:  # type: ignore[no-untyped-def,type-arg]
    return con.execute(
        """SELECT s.trace_id, s.span_id, s.tool, s.soft_failure, c.ttft_ms FROM spans s
           LEFT JOIN charges c USING (trace_id, span_id) ORDER BY ALL"""
    ).fetchall()


def test_the_backfill_decides_as_ingest_did_on_every_span():
    con = open_ledger(":memory:")
    for path in sorted(HARNESS.glob("*.json")):
        ingest(con, read_file(path))
    ingest(con, _odd_spans())
    at_ingest = _facts(con)
    assert {f[2] for f in at_ingest} >= {"lookup", "by_attribute", "nameless", "7", "get_shipping_status"}
    assert sum(1 for f in at_ingest if f[3]) >= 3 + 2  # the odd ones, and shipping_soft_failure's
    assert sorted(f[4] for f in at_ingest if f[4] is not None) == [250.0, 3000.0]
    con.execute("UPDATE spans SET tool = NULL, soft_failure = FALSE")
    con.execute("UPDATE charges SET ttft_ms = NULL")
    errors = con.execute("SELECT trace_id, error_spans FROM runs ORDER BY trace_id").fetchall()
    assert (
        sum(n for _, n in errors) == con.execute("SELECT count(*) FROM spans WHERE status_code = 'ERROR'").fetchone()[0]
    )
    con.execute("UPDATE runs SET error_spans = 0")
    for sql in BACKFILL:
        con.execute(sql)
    assert _facts(con) == at_ingest
    assert con.execute("SELECT trace_id, error_spans FROM runs ORDER BY trace_id").fetchall() == errors
