"""The fleet budget gate in the loop: asked before every model call with the run's
live spend, a spent budget stops the run, and a gate that fails never does."""

from __future__ import annotations

from decimal import Decimal

from collector.demo.scripted_llm import PolicyView, Reply, ScriptedLLM
from collector.harness import (
    EVENT_BUDGET_CHECK_UNAVAILABLE,
    AgentConfig,
    InMemoryObserver,
    Tool,
    run_agent,
)
from collector.harness.fleet_gate import HttpSource
from ledger import conventions as c
from ledger.budgets import BudgetGate, CallScope, Decision, LedgerSource, Rule, Scope, add_rule
from ledger.store import open_ledger

CONFIG = AgentConfig(agent_name="support-agent", call_site="triage")
DEAD = "http://127.0.0.1:9"  # nothing listens on the discard port

LOOKUP = Tool(
    {
        "name": "lookup",
        "description": "Look a ticket up.",
        "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}},
    },
    lambda n: f"ticket {n}: open",
)


def three_calls(view: PolicyView) -> Reply:
    """Two tool turns, then the answer: three model calls when nothing stops it."""
    if view.call_index < 2:
        return Reply.use(("lookup", {"n": view.call_index}), output_tokens=2_000)  # $0.05 each on Opus
    return Reply.answer("Both tickets are open.", output_tokens=2_000)


class Recording:
    """A gate that answers from a script and remembers what it was asked."""

    def __init__(self, answer=None, error: Exception | None = None) -> None:
        self.scopes: list[CallScope] = []
        self.answer, self.error = answer, error

    def check(self, scope: CallScope) -> Decision:
        self.scopes.append(scope)
        if self.error is not None:
            raise self.error
        return self.answer(len(self.scopes)) if self.answer else Decision(True, None, "no budget covers this call")


def test_the_gate_is_asked_before_every_model_call_with_the_runs_live_spend():
    gate = Recording()
    llm = ScriptedLLM(three_calls, cache=False)
    result = run_agent(llm, "Check tickets 0 and 1.", [LOOKUP], config=CONFIG, tenant="acme", gate=gate)
    assert result.stop_cause == "completed" and llm.calls == 3 and len(gate.scopes) == 3
    first = gate.scopes[0]
    assert (first.tenant, first.agent, first.model, first.call_site) == ("acme", "support-agent", llm.model, "triage")
    assert first.trace_id is None  # no OpenTelemetry span is current without a telemetry observer
    costs = [s.cost_usd for s in result.steps]
    assert [s.run_spent_usd for s in gate.scopes] == [Decimal(0), costs[0], costs[0] + costs[1]]


def test_a_refusal_mid_run_stops_with_the_rule_named_and_the_event_on_the_run():
    rule = Rule("b_1", "acme-run-cap", Scope("tenant", "acme"), "run", Decimal("0.50"))

    def answer(n: int) -> Decision:
        if n < 3:
            return Decision(True, rule, "within budget", Decimal("0.1"), rule.limit)
        return Decision(False, rule, "budget 'acme-run-cap' is spent", Decimal("0.5"), rule.limit, "exceeded")

    obs = InMemoryObserver()
    llm = ScriptedLLM(three_calls, cache=False)
    result = run_agent(llm, "Check tickets.", [LOOKUP], config=CONFIG, tenant="acme", gate=Recording(answer),
                       observer=obs)  # fmt: skip
    assert result.stop_cause == "budget_exceeded" and llm.calls == 2
    assert result.detail == "budget 'acme-run-cap' is spent" and result.missing.endswith("stopped after 2 model calls.")
    (stop,) = obs.events_named(c.EVENT_BUDGET_STOP)
    assert stop.step == 2 and stop.attributes["rule"] == "acme-run-cap" and stop.attributes["scope"] == "fleet"
    assert (stop.attributes["spent_usd"], stop.attributes["limit_usd"]) == (0.5, 0.5)


def test_a_per_run_fleet_rule_on_the_embedded_ledger_uses_the_live_count():
    con = open_ledger(":memory:")
    add_rule(con, Rule("b_cap", "acme-run-cap", Scope("tenant", "acme"), "run", Decimal("0.09")))
    llm = ScriptedLLM(three_calls, cache=False)
    result = run_agent(llm, "Check tickets.", [LOOKUP], config=CONFIG, tenant="acme",
                       gate=BudgetGate(LedgerSource(con)))  # fmt: skip
    assert result.stop_cause == "budget_exceeded" and llm.calls == 2  # $0.05 + $0.05 >= $0.09: no third call
    assert "'acme-run-cap'" in result.detail and "is spent" in result.detail
    other = run_agent(ScriptedLLM(three_calls, cache=False), "Check tickets.", [LOOKUP], config=CONFIG,
                      tenant="globex", gate=BudgetGate(LedgerSource(con)))  # fmt: skip
    assert other.stop_cause == "completed"  # the rule covers acme only
    con.close()


def test_a_gate_that_raises_never_stops_the_run_and_says_so_once():
    obs = InMemoryObserver()
    gate = Recording(error=RuntimeError("budget store on fire"))
    llm = ScriptedLLM(three_calls, cache=False)
    result = run_agent(llm, "Check tickets.", [LOOKUP], config=CONFIG, tenant="acme", gate=gate, observer=obs)
    assert result.stop_cause == "completed" and llm.calls == 3 and len(gate.scopes) == 3
    (note,) = obs.events_named(EVENT_BUDGET_CHECK_UNAVAILABLE)  # once per run, not once per call
    assert note.attributes["allowed"] is True and note.step == 0
    assert "RuntimeError: budget store on fire" in note.attributes["detail"]
    assert "fail-open" in note.attributes["detail"]


def test_an_unreachable_budget_server_fails_open_by_default_and_closed_when_asked():
    obs = InMemoryObserver()
    llm = ScriptedLLM(three_calls, cache=False)
    result = run_agent(llm, "Check tickets.", [LOOKUP], config=CONFIG, tenant="acme", observer=obs,
                       gate=BudgetGate(HttpSource(DEAD, timeout=0.5)))  # fmt: skip
    assert result.stop_cause == "completed" and llm.calls == 3
    (note,) = obs.events_named(EVENT_BUDGET_CHECK_UNAVAILABLE)
    assert "unavailable" in note.attributes["detail"] and "fail-open" in note.attributes["detail"]

    llm = ScriptedLLM(three_calls, cache=False)
    closed = run_agent(llm, "Check tickets.", [LOOKUP], config=CONFIG, tenant="acme",
                       gate=BudgetGate(HttpSource(DEAD, timeout=0.5, fail_open=False)))  # fmt: skip
    assert closed.stop_cause == "budget_exceeded" and llm.calls == 0 and "fail-closed" in closed.detail
