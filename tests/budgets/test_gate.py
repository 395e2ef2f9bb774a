"""Enforcement: the check the harness makes before each model call.

The last tests run the real harness (``run_agent`` with a ``gate``, a
``ScriptedLLM``, ``OTelObserver`` exporting into the ledger) both through the
collector as ``turnledger serve`` builds it and on an embedded ledger: a run
against a spent tenant budget is refused before its first call, and a running
one is stopped mid-way when a concurrent run spends the rest, with the stop on
the root span and in the ledger.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import duckdb
import pytest
from opentelemetry.trace import StatusCode

from collector.cli.serve import build_server
from collector.demo.scripted_llm import PolicyView, Reply, ScriptedLLM
from collector.harness import AgentConfig, AgentResult, Runtime, Tool, run_agent
from collector.harness.fleet_gate import HttpSource, current_trace_id
from collector.harness.telemetry import InMemorySpanExporter, Telemetry, start_telemetry
from collector.receiver import CollectorServer, ServerConfig
from ledger import conventions as c
from ledger.budgets import (
    BudgetError,
    BudgetGate,
    CallScope,
    Decision,
    Governor,
    LedgerSource,
    Rule,
    Scope,
    add_rule,
    check_request,
    decide,
    list_alerts,
    new_rule_id,
)
from ledger.ingest import ingest
from ledger.store import open_ledger

from .conftest import NOON_ISH, ns, spend_spans


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


# --- through the collector's route -------------------------------------------------------------
def test_http_source_asks_the_collector_and_fails_open_or_closed(tmp_path, clock):
    governor = Governor(clock=clock)
    server = build_server(ServerConfig(port=0, db=tmp_path / "ledger.duckdb"), governor=governor, sweep_interval=0)
    try:
        budget(server.con)
        ingest(server.con, spend_spans("1.00", at=clock()))
        server.start()
        d = BudgetGate(HttpSource(server.url)).check(ACME)
        assert not d.allowed and not d.unavailable and d.rule.name == "acme-daily" and d.spent == Decimal(1)
        assert d.window["key"] == "day:2026-09-21@UTC"  # the server's (injected) clock decided
    finally:
        server.stop()
    down = "http://127.0.0.1:9"  # nothing listens on the discard port
    open_ = BudgetGate(HttpSource(down, timeout=0.5)).check(ACME)
    assert open_.allowed and open_.unavailable and "unavailable" in open_.detail and "fail-open" in open_.detail
    closed = BudgetGate(HttpSource(down, timeout=0.5, fail_open=False)).check(ACME)
    assert not closed.allowed and closed.unavailable and "fail-closed" in closed.detail


# --- the real harness: run_agent with a gate, ScriptedLLM, OpenTelemetry into the ledger ----------
AGENT = "support-agent"
CONFIG = AgentConfig(agent_name=AGENT, max_total_tokens=None, max_tokens_per_call=60_000)


def _spending(output_tokens: int, *, tool: str | None = None, turns: int = 1):
    """A scripted model that replies with ``output_tokens`` each call (priced at $25/MTok): a call
    of ``tool`` on each of the first ``turns - 1`` calls, then an answer."""

    def policy(view: PolicyView) -> Reply:
        if tool and view.call_index < turns - 1:
            return Reply.use((tool, {"step": view.call_index}), output_tokens=output_tokens)
        return Reply.answer("done", output_tokens=output_tokens)

    return ScriptedLLM(policy, cache=False)  # uncached input: every charge is plain arithmetic


@dataclass
class World:
    gate: BudgetGate
    telemetry: Telemetry
    memory: InMemorySpanExporter
    con: duckdb.DuckDBPyConnection  # a cursor on the ledger, for the assertions
    settle: Callable[[], None]  # until every exported span is in the ledger (and alerts went out)
    rule: Rule
    server: CollectorServer | None = None

    def run(self, llm: ScriptedLLM, seed: int, tools=()) -> AgentResult:
        return run_agent(
            llm,
            "Answer the customer.",
            tools,
            config=CONFIG,
            tenant="acme",
            observer=self.telemetry.observer,
            runtime=Runtime.seeded(seed, start_ns=ns(NOON_ISH)),  # spans on the clock's day
            gate=self.gate,
        )


@pytest.fixture(params=["server", "embedded"])
def world(request, tmp_path, clock) -> Iterator[World]:
    """``server``: `turnledger serve` as cmd_serve builds it, the official OTLP exporter into it and
    the gate through its ``/v1/budgets/check``. ``embedded``: the ledger file written in-process by
    ``start_telemetry(db=...)`` and the gate on the same file."""
    memory = InMemorySpanExporter()
    db = tmp_path / "ledger.duckdb"
    if request.param == "server":
        governor = Governor(clock=clock)
        server = build_server(ServerConfig(port=0, db=db), governor=governor, sweep_interval=0).start()
        con = server.con.cursor()
        telemetry = start_telemetry(endpoint=server.url, exporters=[memory], batch=False, capture="off")

        def settle() -> None:
            assert server.writer.drained(10) and governor.join(5)

        w = World(BudgetGate(HttpSource(server.url)), telemetry, memory, con, settle, budget(con), server)
    else:
        con = open_ledger(db)
        telemetry = start_telemetry(db=db, exporters=[memory], batch=False, capture="off")
        w = World(BudgetGate(LedgerSource(con, clock=clock)), telemetry, memory, con, lambda: None, budget(con))
    yield w
    telemetry.shutdown()
    con.close()
    if w.server is not None:
        w.server.stop()


def _root(memory: InMemorySpanExporter, result: AgentResult):
    (root,) = [
        s
        for s in memory.get_finished_spans()
        if s.name == f"invoke_agent {AGENT}" and s.attributes.get(c.CONVERSATION_ID) == result.run_id
    ]
    return root


def _run_row(con, trace_id: str) -> dict[str, Any]:
    cur = con.execute(
        "SELECT stop_cause, stop_detail, status_code, error_type, model_calls, usd_total FROM runs WHERE trace_id = ?",
        [trace_id],
    )
    return dict(zip([d[0] for d in cur.description], cur.fetchone(), strict=True))


def test_the_harness_refuses_a_run_against_a_spent_tenant_budget(world):
    spent = world.run(_spending(40_000), seed=1)  # $1.00 of output, plus its input
    assert spent.stop_cause == "completed" and spent.cost_usd > Decimal("1.00")
    world.settle()

    llm = _spending(100)
    result = world.run(llm, seed=2)
    assert result.stop_cause == "budget_exceeded" and llm.calls == 0 and result.steps == []
    assert result.detail.startswith("budget 'acme-daily' (tenant=acme, day:2026-09-21@UTC) is spent: $1.00")
    assert "refused before its first model call" in result.missing

    root = _root(world.memory, result)
    assert root.status.status_code is StatusCode.ERROR and root.attributes[c.ERROR_TYPE] == "budget_exceeded"
    assert root.attributes[c.STOP_CAUSE] == "budget_exceeded" and "'acme-daily'" in root.attributes[c.STOP_DETAIL]
    (stop,) = [e for e in root.events if e.name == c.EVENT_BUDGET_STOP]
    assert stop.attributes["rule"] == "acme-daily" and stop.attributes["rule_id"] == world.rule.id
    assert stop.attributes["scope"] == "fleet" and stop.attributes["spent_usd"] >= 1.0
    assert not [s for s in world.memory.get_finished_spans() if s.name.startswith("chat ")
                and s.context.trace_id == root.context.trace_id]  # fmt: skip

    world.settle()
    row = _run_row(world.con, format(root.context.trace_id, "032x"))
    assert (row["stop_cause"], row["status_code"], row["error_type"]) == ("budget_exceeded", "ERROR", "budget_exceeded")
    assert "'acme-daily'" in row["stop_detail"] and row["model_calls"] == 0 and not row["usd_total"]


def test_the_harness_stops_a_running_run_when_a_concurrent_one_spends_the_rest(world):
    b_may_start, b_done = threading.Event(), threading.Event()

    def handle_ticket(step: int) -> str:
        if step == 1:  # after A's second model call, B spends what is left of the day
            b_may_start.set()
            assert b_done.wait(15)
        return f"ticket step {step} handled"

    tool = Tool(
        {
            "name": "handle_ticket",
            "description": "Work on the ticket.",
            "input_schema": {"type": "object", "properties": {"step": {"type": "integer"}}},
        },
        handle_ticket,
    )
    llm_a = _spending(4_000, tool="handle_ticket", turns=5)  # ~$0.10 a call; five calls if unchecked
    results: dict[str, AgentResult] = {}

    def run_a() -> None:
        results["a"] = world.run(llm_a, seed=1, tools=[tool])

    def run_b() -> None:
        assert b_may_start.wait(15)
        try:
            results["b"] = world.run(_spending(34_000), seed=2)  # $0.85 of output
        finally:
            b_done.set()

    threads = [threading.Thread(target=run_a), threading.Thread(target=run_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    a, b = results["a"], results["b"]
    assert b.stop_cause == "completed"
    assert a.stop_cause == "budget_exceeded" and llm_a.calls == 2 and len(a.steps) == 2  # stopped before call 3
    assert a.detail.startswith("budget 'acme-daily' (tenant=acme, day:2026-09-21@UTC) is spent: ")
    assert a.missing.endswith("stopped after 2 model calls.")

    root = _root(world.memory, a)
    assert root.status.status_code is StatusCode.ERROR and root.attributes[c.ERROR_TYPE] == "budget_exceeded"
    assert root.attributes[c.STOP_CAUSE] == "budget_exceeded" and root.attributes[c.STOP_DETAIL] == a.detail
    (stop,) = [e for e in root.events if e.name == c.EVENT_BUDGET_STOP]
    assert stop.attributes["rule"] == "acme-daily" and stop.attributes["rule_id"] == world.rule.id
    # What the gate counted: B's ledger charges plus A's own live count (not A's exported charges again).
    assert Decimal(str(stop.attributes["spent_usd"])) == pytest.approx(b.cost_usd + a.cost_usd)

    world.settle()
    trace_a = format(root.context.trace_id, "032x")
    row = _run_row(world.con, trace_a)
    assert (row["stop_cause"], row["status_code"], row["error_type"]) == ("budget_exceeded", "ERROR", "budget_exceeded")
    assert row["stop_detail"] == a.detail and row["model_calls"] == 2 and row["usd_total"] == a.cost_usd
    stops = world.con.execute(
        "SELECT json_extract_string(attributes, '$.rule') FROM guard_events WHERE trace_id = ? AND name = ?",
        [trace_a, c.EVENT_BUDGET_STOP],
    ).fetchall()
    assert stops == [("acme-daily",)]
    if world.server is not None:  # the collector's governor alerted as the spend crossed the lines
        assert sorted(x["level"] for x in list_alerts(world.con, budget=world.rule.id)) == ["exceeded", "warn"]
