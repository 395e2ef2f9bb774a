"""The loop itself: message plumbing, error handling, stop causes, tenant, goal."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from collector.demo.scenarios import HR_TOOLS, build
from collector.demo.scripted_llm import PolicyView, Reply, ScriptedLLM
from collector.harness import (
    STOP_CAUSES,
    AgentConfig,
    InMemoryObserver,
    Observer,
    Tool,
    ToolError,
    run_agent,
)
from ledger import conventions as c


def tool(name: str, fn: Any, **props: str) -> Tool:
    schema = {"type": "object", "properties": {k: {"type": v} for k, v in props.items()}, "required": list(props)}
    return Tool({"name": name, "description": name, "input_schema": schema}, fn)


def once_then_answer(*calls: tuple[str, dict[str, Any]], answer: str = "done"):
    def policy(view: PolicyView) -> Reply:
        return Reply.use(*calls) if not view.tool_results() else Reply.answer(answer)

    return policy


def tool_results(transcript: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        b
        for m in transcript
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]


def test_three_parallel_calls_come_back_in_one_user_message() -> None:
    barrier = threading.Barrier(3, timeout=5)  # passes only if all three run at once

    def lookup(city: str) -> str:
        barrier.wait()
        return f"{city}: 14C"

    llm = ScriptedLLM(once_then_answer(*[("get_weather", {"city": x}) for x in ("Paris", "Tokyo", "Lima")]))
    result = run_agent(llm, "Weather in Paris, Tokyo and Lima?", [tool("get_weather", lookup, city="string")])

    assert result.stop_cause == "completed"
    tool_uses = [
        b for m in result.transcript if m["role"] == "assistant" for b in m["content"] if b["type"] == "tool_use"
    ]
    result_messages = [m for m in result.transcript if m["role"] == "user" and isinstance(m["content"], list)]
    assert len(tool_uses) == 3
    assert len(result_messages) == 1  # not 3
    blocks = result_messages[0]["content"]
    assert [b["tool_use_id"] for b in blocks] == [u["id"] for u in tool_uses]  # every id, in order
    assert [b["content"] for b in blocks] == ["Paris: 14C", "Tokyo: 14C", "Lima: 14C"]
    assert not any(b.get("is_error") for b in blocks)


def test_the_happy_path_matches_the_seed_transcript() -> None:
    b = build("happy")
    result = run_agent(b.llm, b.task, b.tools, **b.options)
    assert (result.stop_cause, len(result.steps), result.tool_call_count) == ("completed", 2, 2)
    assert result.final_text.startswith("Alice has 12 PTO days left")
    # The assistant turn is appended whole: its text AND its tool_use blocks.
    assert [blk["type"] for blk in result.transcript[1]["content"]] == ["text", "tool_use", "tool_use"]


def test_an_unknown_tool_is_answered_with_the_real_ones() -> None:
    llm = ScriptedLLM(once_then_answer(("delete_everything", {})))
    result = run_agent(llm, "Clean up.", HR_TOOLS)
    (res,) = tool_results(result.transcript)
    assert res["is_error"] is True
    assert "Unknown tool 'delete_everything'" in res["content"]
    assert "get_pto_balance" in res["content"] and "search_kb" in res["content"]
    assert result.stop_cause == "completed"


def test_tool_failures_become_actionable_error_results() -> None:
    def strict(as_of: str) -> str:
        raise ToolError("as_of must be a date in YYYY-MM-DD format (e.g. 2026-10-02), got 'friday'.")

    def broken(x: str) -> str:
        return {}["missing"]

    def buggy(x: str) -> str:
        return len(x, 2)  # a TypeError inside the body is a bug, not bad arguments

    tools = [
        tool("strict", strict, as_of="string"),
        tool("broken", broken, x="string"),
        tool("buggy", buggy, x="string"),
    ]
    llm = ScriptedLLM(
        once_then_answer(
            ("strict", {"as_of": "friday"}),
            ("broken", {"x": "a"}),
            ("strict", {"date": "2026-10-02"}),
            ("buggy", {"x": "a"}),
        )
    )
    result = run_agent(llm, "go", tools)

    contents = [r["content"] for r in tool_results(result.transcript)]
    assert all(r["is_error"] for r in tool_results(result.transcript))
    assert contents[0].startswith("as_of must be a date in YYYY-MM-DD")  # verbatim
    assert contents[1] == "broken failed (KeyError): 'missing'"
    assert contents[2].startswith("Bad arguments for strict") and "required ['as_of']" in contents[2]
    assert contents[3].startswith("buggy failed (TypeError)")
    assert result.stop_cause == "completed"  # errors are results, not crashes


def test_the_model_recovers_from_an_actionable_error() -> None:
    b = build("recovering")
    result = run_agent(b.llm, b.task, b.tools, **b.options)
    first, second = (s.tool_executions[0] for s in result.steps[:2])
    assert first.is_error and "YYYY-MM-DD" in first.content
    assert not second.is_error and second.input["as_of"] == "2026-10-02"
    assert result.stop_cause == "completed" and "3 PTO days" in result.final_text


def test_handoff_ends_the_run_with_a_logged_reason() -> None:
    b = build("handoff")
    obs = InMemoryObserver()
    result = run_agent(b.llm, b.task, b.tools, observer=obs, **b.options)
    assert result.stop_cause == "handoff" and not result.ok
    assert result.final_text == "Refund requests over $500 need a finance approver."
    assert [e.attributes["reason"] for e in obs.events_named(c.EVENT_HANDOFF)] == [result.final_text]
    assert obs.tools == []


def test_a_refusal_is_its_own_stop_cause() -> None:
    b = build("refusal")
    result = run_agent(b.llm, b.task, b.tools, **b.options)
    assert result.stop_cause == "refusal" and result.final_text == "" and result.missing


def test_a_truncated_tool_call_is_never_executed() -> None:
    ran: list[str] = []
    search = tool("search_kb", lambda query: ran.append(query) or "hit", query="string")
    b = build("max_tokens")
    result = run_agent(b.llm, b.task, [search], **b.options)
    assert result.stop_cause == "max_tokens"
    assert ran == []
    assert "search_kb" in result.missing and "were not run" in result.missing


def test_goal_check_feedback_continues_the_loop() -> None:
    answers = iter(["Claim 1: keys rotate in Settings.", "Claim 1: keys rotate in Settings [src:it-002]."])
    llm = ScriptedLLM(lambda view: Reply.answer(next(answers)))

    def cited(text: str, steps) -> str | None:
        claims = [ln for ln in text.splitlines() if ln.startswith("Claim")]
        return None if all("[src:" in ln for ln in claims) else "Claim 1 has no citation. Cite it or remove it."

    obs = InMemoryObserver()
    result = run_agent(llm, "How do I rotate an API key?", [], goal_check=cited, observer=obs)
    assert result.stop_cause == "completed" and len(result.steps) == 2
    assert result.final_text.endswith("[src:it-002].")
    feedback = result.transcript[2]
    assert feedback == {
        "role": "user",
        "content": [{"type": "text", "text": "Claim 1 has no citation. Cite it or remove it."}],
    }
    assert all("citation" not in str(a.request["system"]) for a in obs.started_attempts)


def test_no_success_without_the_goal_passing() -> None:
    llm = ScriptedLLM(lambda view: Reply.answer("I think it is done."))
    result = run_agent(
        llm, "Fix it.", [], goal_check=lambda text, steps: "Tests still fail: test_a.", config=AgentConfig(max_steps=3)
    )
    assert result.stop_cause == "max_steps" and not result.ok


def test_tenant_is_injected_at_dispatch_and_never_offered_to_the_model() -> None:
    seen: list[tuple[str, str]] = []

    def get_order(order_id: str, tenant: str) -> str:
        seen.append((order_id, tenant))
        return "shipped"

    # The model tries to name another tenant; dispatch overrides it with the run's own.
    llm = ScriptedLLM(once_then_answer(("get_order", {"order_id": "A-1", "tenant": "globex"})))
    obs = InMemoryObserver()
    run_agent(llm, "Where is A-1?", [tool("get_order", get_order, order_id="string")], tenant="acme", observer=obs)
    assert seen == [("A-1", "acme")]
    for attempt in obs.started_attempts:
        for definition in attempt.request["tools"]:
            assert "tenant" not in definition["input_schema"].get("properties", {})


def test_a_tool_schema_with_a_tenant_is_rejected() -> None:
    with pytest.raises(ValueError, match="tenant"):
        tool("get_order", lambda order_id, tenant: "x", order_id="string", tenant="string")


def test_the_step_cap_ends_a_soft_failure_run() -> None:
    b = build("soft_failure")
    obs = InMemoryObserver()
    result = run_agent(b.llm, b.task, b.tools, observer=obs, **b.options)
    assert result.stop_cause == "max_steps" and len(result.steps) == 6
    trips = [(e.attributes["shape"], e.attributes["action"]) for e in obs.events_named(c.EVENT_LOOP_TRIP)]
    assert trips == [("step_cap", "halt")]
    executions = [e for s in result.steps for e in s.tool_executions]
    assert all(e.soft_failure and not e.is_error for e in executions)


def test_every_stop_cause_is_reachable_and_named() -> None:
    causes = set()
    for name in ("happy", "soft_failure", "budget_burner", "looping", "max_tokens", "refusal", "handoff"):
        b = build(name)
        result = run_agent(b.llm, b.task, b.tools, **b.options)
        assert result.stop_cause == b.expected_stop, name
        causes.add(result.stop_cause)
    from collector.harness.llm import ProviderError

    b = build("happy", faults={0: [ProviderError(401, "invalid x-api-key")]})
    causes.add(run_agent(b.llm, b.task, b.tools, **b.options).stop_cause)
    assert causes == set(STOP_CAUSES)


def test_a_failing_observer_never_breaks_the_run() -> None:
    class Exploding(Observer):
        def model_attempt_finished(self, attempt, outcome):
            raise RuntimeError("exporter down")

        def guard_event(self, event):
            raise RuntimeError("exporter down")

    b = build("looping")
    result = run_agent(b.llm, b.task, b.tools, observer=Exploding(), **b.options)
    assert result.stop_cause == "loop_detected"


def test_the_system_prompt_stays_byte_identical_across_the_run() -> None:
    b = build("budget_burner")
    obs = InMemoryObserver()
    run_agent(b.llm, b.task, b.tools, observer=obs, **b.options)
    assert len({repr(a.request["system"]) for a in obs.started_attempts}) == 1
    assert len({repr(a.request["tools"]) for a in obs.started_attempts}) == 1


def test_tool_hooks_run_on_the_worker_thread_in_pairs() -> None:
    threads: dict[str, list[int]] = {}

    class Threads(Observer):
        def tool_started(self, call):
            threads.setdefault(call.tool_use_id, []).append(threading.get_ident())

        def tool_executed(self, execution):
            threads[execution.tool_use_id].append(threading.get_ident())

    b = build("happy")
    run_agent(b.llm, b.task, b.tools, observer=Threads(), **b.options)
    assert len(threads) == 2 and all(len(set(t)) == 1 and len(t) == 2 for t in threads.values())


def test_the_observer_sees_one_run_with_matching_ids() -> None:
    b = build("happy")
    obs = InMemoryObserver()
    result = run_agent(b.llm, b.task, b.tools, observer=obs, tenant="acme", **b.options)
    assert [r.run_id for r in obs.runs] == [result.run_id] and obs.results == [result]
    assert {a.run_id for a, _ in obs.attempts} == {result.run_id}
    assert {a.tenant for a, _ in obs.attempts} == {"acme"}
    assert [a.step for a, _ in obs.attempts] == [0, 1]
    assert [o.usage for _, o in obs.attempts] == [s.usage for s in result.steps]
