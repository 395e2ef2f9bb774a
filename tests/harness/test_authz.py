"""The allow-list gate runs before execution and fails closed."""

from __future__ import annotations

from collector.demo.scripted_llm import PolicyView, Reply, ScriptedLLM
from collector.harness import AllowList, InMemoryObserver, Tool, run_agent
from ledger import conventions as c


def test_allow_list_decisions() -> None:
    gate = AllowList(read_only={"search_docs"}, write={"issue_refund"})
    assert gate("search_docs", {}, "acme").allowed
    assert not gate("issue_refund", {"amount": 900}, "acme").allowed  # not confirmed
    assert not gate("issue_refund", {"confirmed": True}, None).allowed  # no tenant
    assert gate("issue_refund", {"confirmed": True}, "acme").allowed
    denied = gate("rm_rf", {}, "acme")
    assert not denied.allowed and "allow-list" in denied.reason  # unknown means denied


def test_a_denied_call_never_executes_and_the_model_is_told() -> None:
    refunds: list[float] = []

    def issue_refund(amount: float, confirmed: bool = False) -> str:
        refunds.append(amount)
        return "refunded"

    refund = Tool(
        {
            "name": "issue_refund",
            "description": "Refund an order.",
            "input_schema": {
                "type": "object",
                "properties": {"amount": {"type": "number"}, "confirmed": {"type": "boolean"}},
            },
        },
        issue_refund,
    )

    def policy(view: PolicyView) -> Reply:
        n = len(view.tool_results())
        if n == 0:
            return Reply.use(("issue_refund", {"amount": 900}))
        if n == 1:
            return Reply.use(("issue_refund", {"amount": 900, "confirmed": True}))
        return Reply.answer("Refunded.")

    obs = InMemoryObserver()
    gate = AllowList(read_only=(), write={"issue_refund"})
    result = run_agent(ScriptedLLM(policy), "Refund order A-1.", [refund], tenant="acme", authorize=gate, observer=obs)

    first, second = (s.tool_executions[0] for s in result.steps[:2])
    assert first.denied and first.is_error and first.content.startswith("Not permitted: issue_refund")
    assert "confirmed=true" in first.content
    assert not second.denied and second.content == "refunded"
    assert refunds == [900]  # only the confirmed call ran
    denials = obs.events_named(c.EVENT_AUTHORIZATION_DENIED)
    assert [e.attributes["tool"] for e in denials] == ["issue_refund"]


def test_the_default_gate_allows_exactly_the_given_tools() -> None:
    ran: list[str] = []
    echo = Tool(
        {"name": "echo", "description": "Echo.", "input_schema": {"type": "object", "properties": {}}},
        lambda: ran.append("echo") or "echo",
    )

    def policy(view: PolicyView) -> Reply:
        return Reply.use(("echo", {})) if not view.tool_results() else Reply.answer("ok")

    result = run_agent(ScriptedLLM(policy), "Echo.", [echo])
    assert ran == ["echo"] and result.stop_cause == "completed"
