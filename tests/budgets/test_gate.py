"""Enforcement: the check the harness makes before each model call.

The last tests drive a reference agent loop that makes exactly the call the
harness must make (see ``_agent``): refused before its first call against a
spent tenant budget, and stopped mid-way when a concurrent run spends the rest,
with the stop on the root span and in the ledger.
"""

from __future__ import annotations

import json
import threading
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from collector.samples import Trace
from collector.server import CollectorServer, ServerConfig
from ledger import conventions as c
from ledger.budgets import (
    CHECK_PATH,
    BudgetError,
    BudgetGate,
    CallScope,
    Decision,
    Governor,
    HttpSource,
    LedgerSource,
    Rule,
    Scope,
    add_rule,
    check_request,
    current_trace_id,
    decide,
    list_alerts,
    new_rule_id,
)
from ledger.ingest import ingest
from ledger.spans import SpanEvent

from .conftest import ns, post_spans, spend_spans


def budget(con, name="acme-daily", scope="tenant=acme", window="day", limit="1.00", **kw) -> Rule:
    return add_rule(con, Rule(new_rule_id(), name, Scope.parse(scope), window, Decimal(limit), **kw))


ACME = CallScope(tenant="acme", agent="support-agent", model="claude-haiku-4-5", call_site="agent")


def test_no_rule_no_limit(ledger, clock):
    d = decide(ledger, ACME, clock())
    assert d.allowed and d.rule is None and d.detail == "no budget covers this call"


def test_a_spent_tenant_budget_refuses_and_names_the_rule(ledger, clock):
    rule = budget(ledger)
    budget(ledger, "globex-daily", "tenant=globex", limit="0.01")  # does not cover acme
    budget(ledger, "p95", "tenant=acme", "rolling_day", "0.01", metric="p95_run_cost")  # metric rules alert only
    ingest(ledger, spend_spans("0.40", at=clock()))
    d = decide(ledger, ACME, clock())
    assert d.allowed and d.level == "ok" and d.rule == rule and d.rules_checked == 1
    assert "at $0.40 of $1.00 (40%)" in d.detail
    ingest(ledger, spend_spans("0.60", at=clock()))
    d = decide(ledger, ACME, clock())
    assert not d.allowed and d.level == "exceeded" and d.rule.name == "acme-daily"
    assert d.spent == Decimal("1.00") and d.limit == Decimal("1.00")
    assert d.detail == "budget 'acme-daily' (tenant=acme, day:2026-09-21@UTC) is spent: $1.00 of $1.00"
    name, attrs = d.event()
    assert name == c.EVENT_BUDGET_STOP
    assert attrs["rule"] == "acme-daily" and attrs["rule_id"] == rule.id and attrs["spent_usd"] == 1.0
    assert decide(ledger, CallScope(tenant="initech"), clock()).allowed


def test_the_runs_own_count_replaces_its_ledger_charges(ledger, clock):
    budget(ledger)
    mine = spend_spans("0.30", at=clock(), key="mine")
    ingest(ledger, mine + spend_spans("0.50", at=clock()))
    scope = CallScope(tenant="acme", trace_id=mine[0].trace_id, run_spent_usd=Decimal("0.45"))
    assert decide(ledger, scope, clock()).spent == Decimal("0.95")  # 0.50 others + 0.45 live, not + 0.30 again
    no_trace = CallScope(tenant="acme", run_spent_usd=Decimal("0.45"))
    assert decide(ledger, no_trace, clock()).spent == Decimal("0.80")  # ledger only: never counted twice
    model_rule = budget(ledger, "haiku", "model=claude-haiku-4-5", limit="5")
    d = decide(
        ledger, CallScope(model="claude-haiku-4-5", trace_id=mine[0].trace_id, run_spent_usd=Decimal(9)), clock()
    )
    assert d.rule == model_rule and d.spent == Decimal("0.80")  # the live count is not split by model: ledger only


def test_per_run_budgets_use_the_live_count(ledger, clock):
    budget(ledger, "run-cap", "tenant=acme", "run", "0.50")
    scope = CallScope(tenant="acme", trace_id="ab" * 16, run_spent_usd=Decimal("0.49"))
    assert decide(ledger, scope, clock()).allowed
    d = decide(ledger, CallScope(tenant="acme", trace_id="ab" * 16, run_spent_usd=Decimal("0.50")), clock())
    assert not d.allowed and d.rule.name == "run-cap" and d.window["key"] == "run:" + "ab" * 16


def test_current_trace_id_is_the_open_spans():
    from opentelemetry.sdk.trace import TracerProvider

    assert current_trace_id() is None
    with TracerProvider().get_tracer("test").start_as_current_span("invoke_agent x") as span:
        assert current_trace_id() == format(span.get_span_context().trace_id, "032x")


def test_decisions_round_trip_as_json(ledger, clock):
    budget(ledger)
    ingest(ledger, spend_spans("1.10", at=clock()))
    d = decide(ledger, ACME, clock())
    back = Decision.from_dict(json.loads(json.dumps(d.to_dict())))
    assert (back.allowed, back.rule.name, back.spent, back.limit, back.detail) == (
        False,
        "acme-daily",
        Decimal("1.1"),
        Decimal("1"),
        d.detail,
    )
    assert CallScope.from_dict(ACME.to_dict()) == ACME
    with pytest.raises(BudgetError, match="'budget'"):
        check_request(ledger, {"tenant": "acme", "budget": 1})
    with pytest.raises(BudgetError, match="not JSON"):
        check_request(ledger, b"{nope")


# --- through HTTP ------------------------------------------------------------------------------
def _serve_checks(con, clock) -> tuple[str, ThreadingHTTPServer]:
    """A stand-in for the collector's ``POST /v1/budgets/check`` route, backed by check_request."""
    local = threading.local()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            if not hasattr(local, "cur"):
                local.cur = con.cursor()
            body = self.rfile.read(int(self.headers["Content-Length"]))
            try:
                status, doc = 200, check_request(local.cur, body, clock)
            except BudgetError as exc:
                status, doc = 400, {"error": str(exc)}
            out = json.dumps(doc).encode()
            self.send_response(status if self.path == CHECK_PATH else 404)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}", server


def test_http_source_and_failing_open_or_closed(ledger, clock):
    budget(ledger)
    ingest(ledger, spend_spans("1.00", at=clock()))
    url, server = _serve_checks(ledger, clock)
    try:
        d = BudgetGate(HttpSource(url)).check(ACME)
    finally:
        server.shutdown()
        server.server_close()
    assert not d.allowed and d.rule.name == "acme-daily" and d.spent == Decimal(1)
    down = "http://127.0.0.1:9"  # nothing listens on the discard port
    open_ = BudgetGate(HttpSource(down, timeout=0.5)).check(ACME)
    assert open_.allowed and "unavailable" in open_.detail and "fail-open" in open_.detail
    closed = BudgetGate(HttpSource(down, timeout=0.5, fail_open=False)).check(ACME)
    assert not closed.allowed and "fail-closed" in closed.detail


# --- a reference agent loop: the one call the harness makes ------------------------------------
def _agent(gate: BudgetGate, collector_url: str, clock, key: str, turns: int, each: str, pause=None):
    """Before each model call: gate.check(...); refused -> stop with budget_exceeded, the rule in the detail.
    Spans go to the collector over OTLP/HTTP as they happen (each POST returns once committed)."""
    t = Trace(key, agent="support-agent", tenant="acme", start=ns(clock()))
    spent = Decimal(0)
    for step in range(turns):
        if pause is not None:
            pause(step)
        d = gate.check(
            CallScope(
                tenant="acme",
                agent="support-agent",
                model="claude-haiku-4-5",
                call_site="agent",
                trace_id=t.trace_id,
                run_spent_usd=spent,
            )
        )
        if not d.allowed:
            name, attrs = d.event()
            stop = SpanEvent(name, t.clock, attrs)
            spans = t.finish(
                "budget_exceeded", detail=d.detail, status="ERROR", error_type="budget_exceeded", events=(stop,)
            )
            assert post_spans(collector_url, spans[-1:]).status == 200
            return "budget_exceeded", step, d
        tokens = int(Decimal(each) * 1_000_000)
        t.chat("claude-haiku-4-5", (tokens, 0, 0, 0))
        spent += Decimal(each)
        assert post_spans(collector_url, t.spans[-1:]).status == 200
    assert post_spans(collector_url, t.finish("completed")[-1:]).status == 200
    return "completed", turns, None


@pytest.mark.parametrize("via", ["ledger", "http"])
def test_harness_refuses_a_spent_tenant_and_stops_a_running_one(via, tmp_path, clock):
    governor = Governor(clock=clock)
    collector = CollectorServer(ServerConfig(port=0, db=tmp_path / "ledger.duckdb"), on_ingested=[governor.on_ingested])
    con = collector.con.cursor()
    rule = budget(con)
    collector.start()
    check_url, check_server = _serve_checks(collector.con, clock)
    gate = BudgetGate(LedgerSource(collector.con, clock=clock) if via == "ledger" else HttpSource(check_url))
    b_started, b_done = threading.Event(), threading.Event()
    results: dict[str, Any] = {}

    def run_a() -> None:
        def pause(step: int) -> None:
            if step == 2:  # after two calls ($0.20), a concurrent run spends the rest
                b_started.set()
                assert b_done.wait(10)

        results["a"] = _agent(gate, collector.url, clock, "run-a", 5, "0.10", pause)

    def run_b() -> None:
        assert b_started.wait(10)
        results["b"] = _agent(gate, collector.url, clock, "run-b", 1, "0.85")
        b_done.set()

    threads = [threading.Thread(target=run_a), threading.Thread(target=run_b)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert results["b"][0] == "completed"
        cause, step, decision = results["a"]
        assert (cause, step) == ("budget_exceeded", 2)  # stopped before its third call
        assert decision.rule.name == "acme-daily" and decision.spent == Decimal("1.05")  # 0.85 + its own 0.20

        # A run that starts now is refused before its first call.
        cause, step, decision = _agent(gate, collector.url, clock, "run-c", 3, "0.10")
        assert (cause, step) == ("budget_exceeded", 0)
        assert collector.writer.drained(10) and governor.join(5)
        runs = {
            r[0]: r[1:]
            for r in con.execute(
                "SELECT trace_id, stop_cause, stop_detail, status_code, error_type, model_calls, usd_total FROM runs"
            ).fetchall()
        }
        a, b, c_ = (Trace(k).trace_id for k in ("run-a", "run-b", "run-c"))
        assert runs[a][0] == "budget_exceeded" and "'acme-daily'" in runs[a][1]
        assert runs[a][2:5] == ("ERROR", "budget_exceeded", 2) and runs[a][5] == Decimal("0.20")
        assert runs[c_][0] == "budget_exceeded" and runs[c_][4] == 0  # refused: nothing spent
        assert runs[b][0] == "completed"
        stops = con.execute(
            "SELECT trace_id, json_extract_string(attributes, '$.rule'), json_extract_string(attributes, '$.rule_id') "
            "FROM guard_events WHERE name = ? ORDER BY trace_id",
            [c.EVENT_BUDGET_STOP],
        ).fetchall()
        assert sorted(stops) == sorted([(a, "acme-daily", rule.id), (c_, "acme-daily", rule.id)])
        root_attrs = json.loads(
            con.execute("SELECT attributes FROM spans WHERE trace_id = ? AND parent_span_id = ''", [a]).fetchone()[0]
        )
        assert root_attrs[c.STOP_CAUSE] == "budget_exceeded" and "acme-daily" in root_attrs[c.STOP_DETAIL]
        # The fleet budget alerted as the spend crossed it.
        assert sorted(x["level"] for x in list_alerts(con, budget=rule.id)) == ["exceeded", "warn"]
    finally:
        check_server.shutdown()
        check_server.server_close()
        governor.close()
        con.close()
        collector.stop()
