"""accounted: every model call outside the loop is a labelled charge, streamed
calls included, so a run of known shape yields exactly its number of calls."""

from __future__ import annotations

import anthropic
import pytest

from collector.demo.scripted_llm import PolicyView, Reply, ScriptedLLM
from collector.harness import (
    InMemoryObserver,
    RetryPolicy,
    Runtime,
    Tool,
    accounted,
    run_agent,
    set_default_observer,
)
from collector.harness.llm import IncompleteStreamError, ProviderError
from tests.fakes.anthropic_server import FakeAnthropicServer, FakeReply

HAIKU = "claude-haiku-4-5"


def summarizer_tool(llm: ScriptedLLM) -> Tool:
    @accounted("summarizer")
    def summarize(text: str):
        return llm.complete("Summarize in one line.", [{"role": "user", "content": text}], [], 64)

    return Tool(
        {
            "name": "summarize",
            "description": "Summarize a text.",
            "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}},
        },
        lambda text: summarize(text).text,
    )


def test_coverage_a_run_of_known_shape_yields_exactly_its_calls() -> None:
    cheap = ScriptedLLM(lambda v: Reply.answer("one-line summary"), model=HAIKU)

    def policy(view: PolicyView) -> Reply:
        if not view.tool_results():  # two summaries in parallel, made inside the tool
            return Reply.use(("summarize", {"text": "policy A"}), ("summarize", {"text": "policy B"}))
        return Reply.answer("Both summarized.")

    obs = InMemoryObserver()
    result = run_agent(ScriptedLLM(policy), "Summarize A and B.", [summarizer_tool(cheap)], observer=obs)

    # 2 agent calls + 2 summarizer calls = 4 records, 4 charges; nothing unaccounted.
    assert len(obs.attempts) == 4 and len(result.charges) == 4
    labels = sorted(a.call_site for a, _ in obs.attempts)
    assert labels == ["agent", "agent", "summarizer", "summarizer"]
    assert sum(result.by_label().values()) == result.cost_usd
    summary_attempts = [a for a, _ in obs.attempts if a.call_site == "summarizer"]
    assert {a.run_id for a in summary_attempts} == {result.run_id} and {a.step for a in summary_attempts} == {0}


def test_context_manager_records_a_response() -> None:
    obs = InMemoryObserver()
    usage = {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 400}
    with accounted("router", observer=obs) as call:
        call.record({"model": HAIKU, "usage": usage, "stop_reason": "end_turn"})
    ((attempt, outcome),) = obs.attempts
    assert attempt.call_site == "router" and outcome.response_model == HAIKU
    assert (outcome.usage.input_tokens, outcome.usage.cache_read_input_tokens) == (100, 400)
    assert str(outcome.cost_usd) == "0.00024"  # (100*1 + 20*5 + 400*0.1) / 1e6 at Haiku prices


def test_a_failing_or_forgotten_call_is_still_recorded() -> None:
    obs = InMemoryObserver()
    with pytest.raises(ProviderError), accounted("router", observer=obs):
        raise ProviderError(529)
    with accounted("router", observer=obs):
        pass  # made a call and never recorded it
    assert [o.error_type for _, o in obs.attempts] == ["529", "unrecorded"]


def test_calls_outside_any_run_go_to_the_default_observer() -> None:
    obs = InMemoryObserver()
    set_default_observer(obs)
    try:
        llm = ScriptedLLM(lambda v: Reply.answer("route: hr"), model=HAIKU)
        accounted("router")(llm.complete)("Route.", [{"role": "user", "content": "x"}], [], 16)
    finally:
        set_default_observer(None)
    ((attempt, outcome),) = obs.attempts
    assert attempt.run_id is None and attempt.call_site == "router" and outcome.usage.output_tokens > 0


def test_retries_inside_accounted_are_separate_attempts(sleeps) -> None:
    obs = InMemoryObserver()
    llm = ScriptedLLM(lambda v: Reply.answer("ok"), faults={0: [ProviderError(429, retry_after=2)]})
    wrapped = accounted("summarizer", retry=RetryPolicy(), observer=obs, runtime=Runtime(sleep=sleeps))(llm.complete)
    wrapped("s", [{"role": "user", "content": "x"}], [], 16)
    assert [(a.attempt, a.retry_cause, o.error_type) for a, o in obs.attempts] == [(1, None, "429"), (2, "429", None)]
    assert len({a.call_id for a, _ in obs.attempts}) == 1
    assert len(sleeps) == 1 and 2 <= sleeps[0] <= 2.6


@pytest.fixture
def server():
    with FakeAnthropicServer() as s:
        yield s


@pytest.fixture
def sdk(server: FakeAnthropicServer):
    with anthropic.Anthropic(base_url=server.base_url, api_key="test-key", max_retries=0, open_telemetry=False) as c:
        yield c


def test_a_streamed_call_is_charged_its_final_usage(server: FakeAnthropicServer, sdk) -> None:
    server.enqueue(
        FakeReply.text(
            "A long streamed answer " * 20,
            usage={"input_tokens": 900, "cache_read_input_tokens": 5000, "output_tokens": 310},
        )
    )
    obs = InMemoryObserver()

    @accounted("writer", observer=obs)
    def write(**payload):
        return sdk.messages.stream(**payload)

    payload = {"model": "claude-sonnet-5", "max_tokens": 512, "messages": [{"role": "user", "content": "Write."}]}
    final = write(**payload)

    ((attempt, outcome),) = obs.attempts
    assert outcome.usage.output_tokens == 310  # from message_delta, never message_start's placeholder 1
    assert outcome.usage.cache_read_input_tokens == 5000 and outcome.usage.input_tokens == 900
    assert final.usage.output_tokens == 310 and final.content[0].text.startswith("A long streamed answer")
    assert attempt.request == payload and server.bodies == [{**payload, "stream": True}]


def test_a_stream_that_ends_before_its_usage_is_an_error(server: FakeAnthropicServer, sdk) -> None:
    server.truncate_streams = True
    server.enqueue(FakeReply.text("cut off"))
    obs = InMemoryObserver()
    with pytest.raises(IncompleteStreamError):
        accounted("writer", observer=obs)(sdk.messages.stream)(
            model="claude-sonnet-5", max_tokens=64, messages=[{"role": "user", "content": "x"}]
        )
    assert [o.error_type for _, o in obs.attempts] == ["connection"]
