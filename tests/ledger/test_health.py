"""Operations health figures (``ledger.queries.health``) against hand-computed values.

The seed's worked data (004, "A good run" and "A bad run"): two runs of 0.5 and
0.6 ms; the bad one hits the step cap (ERROR, ``step_cap_exhausted``), calls
``get_shipping_status`` three times ("No shipment found": soft failures) and the
unknown ``lookup_parcel`` once (ERROR). The harness scenarios are the committed
traces of ``sample_traces/harness``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from collector.otlp import read_file
from ledger import conventions as c
from ledger import queries as q
from ledger.ingest import ingest
from ledger.queries.core import filtered, run_filtered
from ledger.report import REPORT_SCHEMA, build_report, format_report
from ledger.spans import SpanRecord
from ledger.store import open_ledger

HARNESS = Path(__file__).resolve().parents[2] / "sample_traces" / "harness"
T0 = 1_790_000_000_000_000_000
US = 1_000


def nearest_rank(values: list[float], level: float) -> float:
    """The textbook definition, written out: the ceil(level * n)-th smallest value."""
    ordered = sorted(values)
    return ordered[max(math.ceil(level * len(ordered)), 1) - 1]


class SeedRun:
    """One run of the seed's demo: children laid end to end inside a root of the given duration."""

    def __init__(self, key: str, tenant: str) -> None:
        self.trace_id = f"{key:0>32}"
        self.tenant, self.spans, self.clock, self.n = tenant, [], T0, 0

    def span(self, name: str, duration_us: int, attrs: dict[str, Any], status: str = "UNSET") -> None:
        self.n += 1
        start, end = self.clock, self.clock + duration_us * US
        self.clock = end
        self.spans.append(
            SpanRecord(
                trace_id=self.trace_id, span_id=f"{self.n:016x}", parent_span_id="f" * 16, name=name,
                start_ns=start, end_ns=end, status_code=status, attributes={c.TENANT: self.tenant, **attrs},
            )
        )  # fmt: skip

    def chat(self, tokens_in: int, finish: str, *, error: str | None = None, attempt: int = 1, call: str = "") -> None:
        attrs = {
            c.OPERATION_NAME: "chat", c.PROVIDER_NAME: "mock", c.REQUEST_MODEL: "mock-model",
            c.INPUT_TOKENS: tokens_in, c.OUTPUT_TOKENS: 40, c.FINISH_REASONS: [finish],
            c.ATTEMPT: attempt, c.CALL_ID: call or f"{self.trace_id[-4:]}-{self.n}",
        }  # fmt: skip
        if error:
            attrs[c.ERROR_TYPE] = error
        self.span("chat mock-model", 100, attrs, "ERROR" if error else "UNSET")

    def tool(self, name: str, result: str, *, soft: bool = False, error: bool = False) -> None:
        attrs: dict[str, Any] = {c.OPERATION_NAME: "execute_tool", c.TOOL_NAME: name, c.TOOL_CALL_RESULT: result}
        if soft:
            attrs[c.TOOL_SOFT_FAILURE] = True
        if error:
            attrs[c.ERROR_TYPE] = "tool_error"
        self.span(f"execute_tool {name}", 40, attrs, "ERROR" if error else "UNSET")

    def finish(self, duration_us: int, stop: str, error_type: str | None = None) -> list[SpanRecord]:
        attrs = {c.OPERATION_NAME: "invoke_agent", c.AGENT_NAME: "solaris-support", c.STOP_CAUSE: stop}
        if error_type:
            attrs[c.ERROR_TYPE] = error_type
        root = SpanRecord(
            trace_id=self.trace_id, span_id="f" * 16, parent_span_id="", name="invoke_agent solaris-support",
            start_ns=T0, end_ns=T0 + duration_us * US, status_code="ERROR" if error_type else "UNSET",
            attributes={c.TENANT: self.tenant, **attrs},
        )  # fmt: skip
        return [*self.spans, root]


def good_run() -> list[SpanRecord]:
    r = SeedRun("900d", "acme")
    r.chat(74, "tool_use")
    r.tool("find_order", '{"customer": "R. Okafor", "tracking": "ZYX987"}')
    r.chat(161, "tool_use")
    r.tool("get_shipping_status", "Out for delivery, arriving today by 8pm")
    r.chat(240, "end_turn")
    return r.finish(500, "completed")


def bad_run() -> list[SpanRecord]:
    r = SeedRun("bad", "globex")
    for tokens_in, tool in ((74, "ship"), (150, "ship"), (226, "parcel"), (317, "ship")):
        r.chat(tokens_in, "tool_use")
        if tool == "ship":
            r.tool("get_shipping_status", "No shipment found for 12345.", soft=True)
        else:
            r.tool("lookup_parcel", "ERROR: no tool named 'lookup_parcel'.", error=True)
    return r.finish(600, "max_steps", "step_cap_exhausted")


@pytest.fixture
def seed(tmp_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    con = open_ledger(tmp_path / "seed.duckdb")
    ingest(con, [*good_run(), *bad_run()])
    yield con
    con.close()


def ledger_of(tmp_path: Path, *names: str) -> duckdb.DuckDBPyConnection:
    con = open_ledger(tmp_path / "harness.duckdb")
    for name in names:
        ingest(con, read_file(HARNESS / f"{name}.json"))
    return con


def by_tool(con: duckdb.DuckDBPyConnection, f: q.Filters = q.NO_FILTERS) -> dict[str, dict[str, Any]]:
    return {r["tool"]: r for r in q.records(con, q.tool_health(f))}


def latency(con: duckdb.DuckDBPyConnection, f: q.Filters = q.NO_FILTERS) -> dict[str, dict[str, Any]]:
    """``run`` (``run_latency``'s row) and ``calls`` (``model_call_latency``'s overall row)."""
    calls = q.records(con, q.model_call_latency(f))
    assert calls[0]["overall"] and not any(r["overall"] for r in calls[1:])
    return {"run": q.records(con, q.run_latency(f))[0], "calls": calls[0]}


def test_seed_runs_latency_p50_and_p99_of_the_root_span(seed: duckdb.DuckDBPyConnection) -> None:
    run, calls = latency(seed).values()
    assert (run["runs"], run["p50_ms"], run["p95_ms"], run["p99_ms"], run["max_ms"]) == (2, 0.5, 0.6, 0.6, 0.6)
    assert (calls["calls"], calls["p50_ms"], calls["p99_ms"], calls["streamed_calls"]) == (7, 0.1, 0.1, 0)


def test_seed_tool_frequency_and_failure_rate_per_tool(seed: duckdb.DuckDBPyConnection) -> None:
    tools = by_tool(seed)
    figures = {
        t: (r["calls"], r["hard_failures"], r["soft_failures"], r["failure_rate"], r["runs"], r["share_of_runs"])
        for t, r in tools.items()
    }
    assert figures == {
        "get_shipping_status": (4, 0, 3, 0.75, 2, 1.0),  # the bad run's three "No shipment found"
        "find_order": (1, 0, 0, 0.0, 1, 0.5),
        "lookup_parcel": (1, 1, 0, 1.0, 1, 0.5),
    }
    assert next(iter(tools)) == "get_shipping_status"  # most called first
    assert tools["get_shipping_status"]["p50_ms"] == tools["get_shipping_status"]["p95_ms"] == 0.04


def test_seed_error_rate_is_traces_with_an_error_span_split_by_error_type(seed: duckdb.DuckDBPyConnection) -> None:
    rows = q.records(seed, q.run_errors())
    assert [(r["error_type"], r["runs"], r["share_of_runs"]) for r in rows] == [
        (None, 1, 0.5),
        ("step_cap_exhausted", 1, 0.5),
    ]


def test_filters_narrow_every_health_figure(seed: duckdb.DuckDBPyConnection) -> None:
    acme = q.Filters(tenant="acme")
    assert latency(seed, acme)["run"]["p99_ms"] == 0.5
    assert by_tool(seed, acme)["get_shipping_status"]["failures"] == 0
    assert q.records(seed, q.run_errors(acme))[0]["runs"] == 0


def test_scripted_tool_failures_of_the_harness_scenarios(tmp_path: Path) -> None:
    con = ledger_of(tmp_path, "recovering_date_error", "looping_search", "shipping_soft_failure")
    tools = by_tool(con)
    # recovering: "next friday" is rejected (an is_error result: ERROR span), the corrected date works.
    pto = tools["get_pto_balance"]
    assert (pto["calls"], pto["hard_failures"], pto["soft_failures"], pto["failure_rate"]) == (2, 1, 0, 0.5)
    # looping: the same search five times; it works every time (the nudge is the guard's, not a failure).
    search = tools["search_kb"]
    assert (search["calls"], search["failures"], search["failure_rate"], search["runs"]) == (5, 0, 0.0, 1)
    # soft failure: six lookups that run fine and find nothing.
    ship = tools["get_shipping_status"]
    assert (ship["calls"], ship["hard_failures"], ship["soft_failures"], ship["failure_rate"]) == (6, 0, 6, 1.0)
    assert {t: r["share_of_runs"] for t, r in tools.items()} == {t: 1 / 3 for t in tools}
    # Every one errored: the loop and the step cap on the root, the recovered date error only on its tool span.
    errored = {r["error_type"]: r["runs"] for r in q.records(con, q.run_errors())}
    assert errored == {None: 3, "loop_detected": 1, "max_steps": 1, "span error": 1}
    con.close()


def test_harness_latencies_equal_the_nearest_rank_of_their_spans(tmp_path: Path) -> None:
    names = ("recovering_date_error", "looping_search", "retry_storm", "pto_happy_path")
    con = ledger_of(tmp_path, *names)
    spans = [s for name in names for s in read_file(HARNESS / f"{name}.json")]
    roots = [(s.end_ns - s.start_ns) / 1e6 for s in spans if not s.parent_span_id]
    ok_calls = [(s.end_ns - s.start_ns) / 1e6 for s in spans if s.name.startswith("chat") and s.status_code != "ERROR"]
    tools = [(s.end_ns - s.start_ns) / 1e6 for s in spans if s.name == "execute_tool search_kb"]
    figures = latency(con)
    for measure, count, values in (("run", "runs", roots), ("calls", "calls", ok_calls)):
        row = figures[measure]
        assert row[count] == len(values), measure
        for level in (50, 95, 99):
            assert row[f"p{level}_ms"] == pytest.approx(nearest_rank(values, level / 100), abs=1e-6), (measure, level)
    search = by_tool(con)["search_kb"]
    assert search["p50_ms"] == pytest.approx(nearest_rank(tools, 0.5), abs=1e-6)
    assert search["p95_ms"] == pytest.approx(nearest_rank(tools, 0.95), abs=1e-6)
    per_model = q.records(con, q.model_call_latency())
    assert [(r["provider"], r["model"], r["calls"]) for r in per_model] == [
        (None, None, len(ok_calls)),
        ("anthropic", "claude-sonnet-5", len(ok_calls)),
    ]
    con.close()


def test_retry_storm_errors_by_cause_with_the_retry_outcome(tmp_path: Path) -> None:
    con = ledger_of(tmp_path, "retry_storm")
    causes = [(r["cause"], r["error_type"], r["failed"], r["recovered"], r["not_recovered"]) for r in
              q.records(con, q.error_causes())]  # fmt: skip
    assert sorted(causes) == [("overloaded (529)", "529", 1, 1, 0), ("rate limited (429)", "429", 1, 1, 0)]
    overall, per_model = q.records(con, q.error_rates())
    assert overall["overall"] and (overall["attempts"], overall["failed"], overall["error_rate"]) == (4, 2, 0.5)
    assert (per_model["provider"], per_model["model"], per_model["error_rate"]) == ("anthropic", "claude-sonnet-5", 0.5)
    con.close()


def test_a_call_that_never_recovered_and_time_to_first_token(tmp_path: Path) -> None:
    r = SeedRun("e5", "acme")
    r.chat(10, "", error="500", call="c1")
    r.chat(10, "", error="APITimeoutError", attempt=2, call="c1")
    r.chat(10, "end_turn", call="c2")
    r.spans[-1].attributes[c.TIME_TO_FIRST_CHUNK] = 0.035  # seconds, as the convention has it
    con = open_ledger(tmp_path / "l.duckdb")
    ingest(con, r.finish(400, "error", "APITimeoutError"))
    causes = {row["cause"]: (row["failed"], row["recovered"], row["not_recovered"]) for row in
              q.records(con, q.error_causes())}  # fmt: skip
    assert causes == {"server error (5xx)": (1, 0, 1), "timeout / connection": (1, 0, 1)}
    overall, model = q.records(con, q.model_call_latency())
    for row in (overall, model):
        assert (row["calls"], row["streamed_calls"], row["p50_ttft_ms"], row["p99_ttft_ms"]) == (1, 1, 35.0, 35.0)
    assert build_report(con)["latency"]["time_to_first_token_ms"] == {"p50": 35.0, "p95": 35.0, "p99": 35.0}
    con.close()


def test_report_json_carries_latency_errors_and_tools(seed: duckdb.DuckDBPyConnection) -> None:
    r = build_report(seed)
    assert r["schema"] == REPORT_SCHEMA == "turnledger.report/2"
    assert r["latency"] == {
        "run_ms": {"p50": 0.5, "p95": 0.6, "p99": 0.6},
        "model_call_ms": {"p50": 0.1, "p95": 0.1, "p99": 0.1},
        "time_to_first_token_ms": {"p50": None, "p95": None, "p99": None},
    }
    assert r["errors"]["model_call_error_rate"] == 0.0 and r["errors"]["by_cause"] == []
    assert r["errors"]["run_error_rate"] == 0.5
    assert [t["tool"] for t in r["tools"]] == ["get_shipping_status", "find_order", "lookup_parcel"]
    assert {k: r["tools"][0][k] for k in ("calls", "failures", "failure_rate", "p50_ms", "p95_ms")} == {
        "calls": 4, "failures": 3, "failure_rate": 0.75, "p50_ms": 0.04, "p95_ms": 0.04,
    }  # fmt: skip
    text = format_report(r)
    assert "run                    p50 0 ms" not in text  # sub-millisecond figures keep their decimals
    assert "tool get_shipping_status" in text and "3 failed (75.0%)" in text


def _runs_per_tool_from_spans(con: duckdb.DuckDBPyConnection, f: q.Filters = q.NO_FILTERS) -> dict[str, int]:
    """The runs using each tool as distinct traces of its spans (what ``tool_health`` counted before ``runs.tools``)."""
    w, p = filtered(f)
    scoped = "AND trace_id IN (SELECT trace_id FROM fr)" if run_filtered(f) or f.model else ""
    sql = f"{w}SELECT tool, count(DISTINCT trace_id) FROM spans WHERE operation = 'execute_tool' {scoped} GROUP BY 1"
    return dict(con.execute(sql, p).fetchall())


def test_runs_list_the_tools_they_called_when_their_spans_arrive_in_several_batches(tmp_path: Path) -> None:
    con = open_ledger(tmp_path / "batches.duckdb")
    spans = bad_run()
    for batch in (spans[:3], spans[3:6], spans[6:]):  # the lookup_parcel call arrives alone, the root last
        ingest(con, batch)
    ingest(con, good_run())
    tools = dict(con.execute("SELECT trace_id, tools FROM runs").fetchall())
    assert tools == {f"{'bad':0>32}": ["get_shipping_status", "lookup_parcel"],
                     f"{'900d':0>32}": ["find_order", "get_shipping_status"]}  # fmt: skip
    assert {t: r["runs"] for t, r in by_tool(con).items()} == _runs_per_tool_from_spans(con)
    con.close()


def test_runs_using_a_tool_follow_the_filters_as_the_tool_spans_do(tmp_path: Path) -> None:
    good = good_run()
    for span in good:
        if span.name.startswith("chat"):
            span.attributes[c.REQUEST_MODEL] = "other-model"  # a model filter that narrows the runs
    con = open_ledger(tmp_path / "models.duckdb")
    ingest(con, [*good, *bad_run()])
    for f in (q.NO_FILTERS, q.Filters(tenant="acme"), q.Filters(model="other-model"), q.Filters(tenant="nobody")):
        shown = {t: r["runs"] for t, r in by_tool(con, f).items()}
        assert shown == _runs_per_tool_from_spans(con, f), f
    # A model filter narrows the tool spans to the runs that called the model: one run of one, not 2.0.
    status = by_tool(con, q.Filters(model="other-model"))["get_shipping_status"]
    assert (status["calls"], status["runs"], status["share_of_runs"]) == (1, 1, 1.0)
    con.close()


def test_migration_18_gives_the_runs_already_stored_their_tools(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    con = open_ledger(path)
    ingest(con, [*good_run(), *bad_run()])
    want = con.execute("SELECT trace_id, tools FROM runs ORDER BY 1").fetchall()
    con.execute("DELETE FROM schema_migrations WHERE version = 18")
    con.execute("ALTER TABLE runs DROP COLUMN tools")  # the file as a turnledger before migration 18 left it
    con.close()
    con = open_ledger(path)
    assert con.execute("SELECT trace_id, tools FROM runs ORDER BY 1").fetchall() == want
    con.close()
