"""The span conventions the harness emits, and what the ledger makes of them."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from collector.cli import main
from collector.demo.scenarios import build
from collector.demo.scripted_llm import PolicyView, Reply, ScriptedLLM
from collector.demo.simulated_time import VirtualClock, timed_tool
from collector.harness import AgentConfig, InMemoryObserver, Runtime, run_agent
from collector.harness.telemetry import Capture, OTelObserver, span_records
from collector.harness.telemetry.capture import DEFAULT_MAX_CHARS
from ledger import conventions as c
from tests.telemetry.helpers import Traced, by_name


def test_root_chat_and_tool_spans_carry_the_conventions(traced: Callable[..., Traced]) -> None:
    t = traced()
    b = build("happy")
    config = AgentConfig(agent_name="hr-assistant", agent_version="2.3.0", prompt_version="hr-v14",
                         tool_schema_version="tools-7")  # fmt: skip
    recorder = InMemoryObserver()
    from collector.harness import FanOut

    # Simulated time: each tool takes 50-400 ms, so concurrency shows as overlapping spans.
    clock = VirtualClock(1_790_000_000_000_000_000)
    tools = [timed_tool(tool, clock) for tool in b.tools]
    run_agent(b.llm, b.task, tools, system=b.options["system"], config=config, tenant="initech",
              observer=FanOut([t.observer, recorder]), runtime=clock.runtime(1))  # fmt: skip
    spans = t.spans()
    [root] = by_name(spans, "invoke_agent")
    assert root.name == "invoke_agent hr-assistant" and root.parent is None
    assert {k: root.attributes[k] for k in (c.OPERATION_NAME, c.AGENT_NAME, c.AGENT_VERSION, c.PROMPT_VERSION,
                                            c.TOOL_SCHEMA_VERSION, c.TENANT, c.STOP_CAUSE)} == {
        c.OPERATION_NAME: "invoke_agent", c.AGENT_NAME: "hr-assistant", c.AGENT_VERSION: "2.3.0",
        c.PROMPT_VERSION: "hr-v14", c.TOOL_SCHEMA_VERSION: "tools-7", c.TENANT: "initech", c.STOP_CAUSE: "completed",
    }  # fmt: skip
    assert root.instrumentation_scope.name == "turnledger.harness"

    chats = by_name(spans, "chat")
    assert [s.name for s in chats] == ["chat claude-opus-5"] * 2
    for span, (attempt, outcome) in zip(chats, recorder.attempts, strict=True):
        a, u = span.attributes, outcome.usage
        assert span.kind is SpanKind.CLIENT and span.parent.span_id == root.context.span_id
        assert (a[c.CALL_ID], a[c.ATTEMPT], a[c.CALL_SITE], a[c.TENANT]) == (attempt.call_id, 1, "agent", "initech")
        # Current GenAI conventions: input INCLUDES cache reads and writes; the harness's Usage excludes them.
        assert a[c.INPUT_TOKENS] == u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens
        assert (a[c.CACHE_CREATION_INPUT_TOKENS], a[c.CACHE_READ_INPUT_TOKENS], a[c.OUTPUT_TOKENS]) == (
            u.cache_creation_input_tokens, u.cache_read_input_tokens, u.output_tokens)  # fmt: skip
        assert a[c.COST_USD] == pytest.approx(float(outcome.cost_usd)) and a[c.COST_USD] > 0
        assert json.loads(a[c.REQUEST_BODY]) == attempt.request  # the exact payload, nothing secret in it
        assert a[c.REQUEST_MAX_TOKENS] == attempt.request["max_tokens"]
        assert (span.start_time, span.end_time) == (attempt.started_ns, outcome.ended_ns)  # the harness's clock

    # Parallel tools: both children of the root, overlapping in time; one user message answers both.
    tools = by_name(spans, "execute_tool")
    assert sorted(s.attributes[c.TOOL_NAME] for s in tools) == ["get_pto_balance", "search_kb"]
    assert all(s.parent.span_id == root.context.span_id for s in tools)
    first, second = tools
    assert first.start_time < second.end_time and second.start_time < first.end_time
    assert all(chats[0].end_time <= s.start_time and s.end_time <= chats[1].start_time for s in tools)
    messages = json.loads(chats[1].attributes[c.REQUEST_BODY])["messages"]
    results = [b for b in messages[-1]["content"] if b["type"] == "tool_result"]
    assert messages[-1]["role"] == "user" and len(results) == 2
    assert root.start_time < chats[0].start_time and root.end_time > chats[-1].end_time


def test_three_tool_calls_in_one_turn_are_answered_in_one_user_message(traced: Callable[..., Traced]) -> None:
    def policy(view: PolicyView) -> Reply:
        if not view.tool_results():
            return Reply.use(*[("search_kb", {"query": q}) for q in ("pto", "sick leave", "expenses")])
        return Reply.answer("Three answers.")

    t = traced()
    b = build("happy")
    run_agent(ScriptedLLM(policy), b.task, b.tools, observer=t.observer, runtime=Runtime.seeded(2, sleep=t.sleeps))
    tools, chats = by_name(t.spans(), "execute_tool"), by_name(t.spans(), "chat")
    assert len(tools) == 3 and len({s.attributes[c.TOOL_CALL_ID] for s in tools}) == 3
    last = json.loads(chats[-1].attributes[c.REQUEST_BODY])["messages"][-1]
    assert last["role"] == "user"
    assert sorted(b["tool_use_id"] for b in last["content"]) == sorted(s.attributes[c.TOOL_CALL_ID] for s in tools)


def test_three_attempts_are_three_charge_rows(traced: Callable[..., Traced]) -> None:
    from collector.harness.llm import ProviderError

    t = traced()
    result = t.run("refusal", faults={0: [ProviderError(529), ProviderError(429, retry_after=2)]})
    assert [ch.attempt for ch in result.charges] == [1, 2, 3]
    t.close()
    with t.open() as con:
        charges = con.execute(
            "SELECT call_id, attempt, retry_cause, status_code, error_type, usd_input + usd_output "
            "FROM charges ORDER BY attempt"
        ).fetchall()
    assert len(charges) == 3 and len({row[0] for row in charges}) == 1  # one logical call
    assert [row[1:5] for row in charges] == [
        (1, "", "ERROR", "529"),
        (2, "529", "ERROR", "429"),
        (3, "429", "UNSET", None),
    ]
    assert charges[0][5] == charges[1][5] == 0 and charges[2][5] > 0


def test_soft_failure_result_is_truncated_with_its_length(traced: Callable[..., Traced]) -> None:
    from collector.harness import Tool, ToolResult

    big = "No match in: " + "x" * 20_000

    def lookup(order_id: str) -> ToolResult:
        return ToolResult(big, soft_failure=True)

    def policy(view: PolicyView) -> Reply:
        return Reply.answer("none") if view.tool_results() else Reply.use(("lookup", {"order_id": "A-1"}))

    schema = {"type": "object", "properties": {"order_id": {"type": "string"}}}
    t = traced()
    run_agent(ScriptedLLM(policy), "find A-1", [Tool({"name": "lookup", "description": "x", "input_schema": schema}, lookup)],
              observer=t.observer, runtime=Runtime.seeded(2, sleep=t.sleeps))  # fmt: skip
    [tool] = by_name(t.spans(), "execute_tool")
    result = tool.attributes[c.TOOL_CALL_RESULT]
    assert result.startswith("No match in: xxx") and result.endswith(f"[truncated, {len(big)} chars]")
    assert len(result) < DEFAULT_MAX_CHARS + 100
    assert tool.attributes[c.TOOL_RESULT_LENGTH] == len(big)
    assert tool.attributes[c.TOOL_SOFT_FAILURE] is True and tool.status.status_code is StatusCode.UNSET


def test_direct_records_equal_the_otlp_round_trip(traced: Callable[..., Traced]) -> None:
    t = traced()
    for name in ("happy", "looping", "budget_burner", "recovering", "handoff"):
        t.run(name)
    spans = t.spans()
    assert span_records(spans) == span_records(spans, via_otlp=True)


def test_capture_off_leaves_no_payload_and_context_says_so(
    traced: Callable[..., Traced], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TURNLEDGER_CAPTURE", "off")
    assert Capture().mode == "off"
    t = traced(None)  # the observer reads TURNLEDGER_CAPTURE
    t.run("happy")
    assert all(c.REQUEST_BODY not in s.attributes for s in t.spans())
    t.close()
    with t.open() as con:
        trace_id = con.execute("SELECT trace_id FROM runs").fetchone()[0]
        assert con.execute("SELECT count(*) FROM contexts").fetchone() == (0,)
        assert con.execute("SELECT count(*) FROM charges").fetchone() == (2,)
    capsys.readouterr()
    assert main(["context", trace_id, "--turn", "1", "--db", str(t.db)]) == 2
    err = capsys.readouterr().err
    assert "capture was off" in err and "TURNLEDGER_CAPTURE" in err


def test_capture_mode_validation_names_the_bad_value() -> None:
    with pytest.raises(ValueError, match="'loud'"):
        Capture("loud")


def test_request_body_reuses_the_shared_history_and_stays_exact() -> None:
    capture = Capture("redacted")
    observed = InMemoryObserver()
    b = build("budget_burner")
    run_agent(b.llm, b.task, b.tools, observer=observed, runtime=Runtime.seeded(1, sleep=lambda s: None), **b.options)
    for attempt in observed.started_attempts:  # one conversation: each payload extends the last
        assert json.loads(capture.request_body(attempt.request, key="run")) == attempt.request
    fresh = Capture("redacted")
    last = observed.started_attempts[-1].request
    assert fresh.request_body(last) == capture.request_body(last, key="run")


def test_the_observer_keeps_no_state_after_runs(traced: Callable[..., Traced]) -> None:
    t = traced()
    for name in ("happy", "looping", "max_tokens"):
        t.run(name)
    observer: OTelObserver = t.observer
    assert observer._runs == {} and observer._attempts == {}
    assert observer.capture._previous == {}


def test_a_sub_agent_inside_a_tool_nests_under_that_tool(traced: Callable[..., Traced]) -> None:
    from collector.harness import Tool

    t = traced()
    inner_built = build("looping")

    def delegate(question: str) -> str:
        inner = run_agent(inner_built.llm, question, inner_built.tools, observer=t.observer,
                          runtime=Runtime.seeded(9, sleep=t.sleeps), **inner_built.options)  # fmt: skip
        return inner.stop_cause

    def policy(view: PolicyView) -> Reply:
        if view.tool_results():
            return Reply.answer("The researcher got stuck.")
        return Reply.use(("delegate", {"question": "What's the PTO rollover rule?"}))

    schema = {"type": "object", "properties": {"question": {"type": "string"}}}
    tool = Tool({"name": "delegate", "description": "Ask a sub-agent.", "input_schema": schema}, delegate)
    run_agent(ScriptedLLM(policy), "Find out.", [tool], observer=t.observer, runtime=Runtime.seeded(8, sleep=t.sleeps))
    spans = t.spans()
    outer, inner = sorted(by_name(spans, "invoke_agent"), key=lambda s: s.parent is not None)
    [delegate_span] = [s for s in spans if s.name == "execute_tool delegate"]
    assert outer.parent is None and inner.parent.span_id == delegate_span.context.span_id
    assert inner.context.trace_id == outer.context.trace_id
    inner_chats = [s for s in by_name(spans, "chat") if s.parent.span_id == inner.context.span_id]
    assert len(inner_chats) == 5  # the sub-agent's own calls hang off its own root
    trips = [(s.name, s.parent.span_id) for s in spans for e in s.events if e.name == c.EVENT_LOOP_TRIP]
    assert [name for name, _ in trips] == ["execute_tool search_kb"] * 2
    assert all(parent == inner.context.span_id for _, parent in trips)
    assert inner.attributes[c.STOP_CAUSE] == "loop_detected" and outer.attributes[c.STOP_CAUSE] == "completed"
