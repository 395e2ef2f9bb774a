"""ClaudeLLM through the real anthropic SDK against a local fake Messages API:
what we report equals what the server returned, and what we recorded as the
request equals the body the server received."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from collector.harness import AgentConfig, InMemoryObserver, Offloader, Runtime, Tool, run_agent
from collector.harness.llm import ClaudeLLM, Usage
from ledger import conventions as c
from tests.fakes.anthropic_server import FakeAnthropicServer, FakeError, FakeReply

# Seed 000 "walk one request through it": (uncached_in, cache_write, cache_read, output) per turn.
SEED_TURNS = [
    (20, 6_100, 0, 180),
    (0, 1_300, 6_100, 150),
    (0, 900, 7_400, 120),
    (0, 700, 8_300, 260),
    (40, 400, 9_000, 300),
]


def usage_dict(i: int, w: int, r: int, o: int) -> dict[str, int]:
    return {"input_tokens": i, "cache_creation_input_tokens": w, "cache_read_input_tokens": r, "output_tokens": o}


def usage_of(response: dict[str, Any]) -> Usage:
    return Usage.from_api(response["usage"])


@pytest.fixture
def server():
    with FakeAnthropicServer() as s:
        yield s


@pytest.fixture
def claude(server: FakeAnthropicServer):
    """Build ClaudeLLM clients against the fake server; all closed at teardown."""
    clients: list[ClaudeLLM] = []

    def make(**kw: Any) -> ClaudeLLM:
        clients.append(ClaudeLLM(base_url=server.base_url, api_key="test-key", timeout=10, **kw))
        return clients[-1]

    yield make
    for llm in clients:
        llm.close()


def tool(name: str, fn: Any, *props: str) -> Tool:
    return Tool(
        {
            "name": name,
            "description": name,
            "input_schema": {"type": "object", "properties": {p: {"type": "string"} for p in props}},
        },
        fn,
    )


def test_multi_turn_tool_run_with_prompt_caching(server: FakeAnthropicServer, claude, tmp_path: Path) -> None:
    dump = "\n".join(f"{i:3d}. [docs/api-keys.md#rotate] rotate from Settings > API keys" for i in range(346))
    tools = [tool("search_docs", lambda q: dump, "q"), tool("get_account", lambda: '{"plan": "pro"}')]

    def respond(body: dict[str, Any]) -> FakeReply:
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        usage = usage_dict(*SEED_TURNS[turn])
        if turn == 0:  # two independent look-ups in one turn
            return FakeReply.tools(
                ("toolu_01", "search_docs", {"q": "rotate api key"}), ("toolu_02", "get_account", {}), usage=usage
            )
        if turn in (1, 2):  # read slices of the offloaded dump
            pointer = next(b["content"] for b in body["messages"][2]["content"] if b["tool_use_id"] == "toolu_01")
            path = pointer.split(" -> ")[1].splitlines()[0]
            return FakeReply.tools(
                (f"toolu_1{turn}", "read_artifact", {"path": path, "offset": 40 * turn}), usage=usage
            )
        if turn == 3:  # an uncited claim: the goal check sends it back
            return FakeReply.text("Claim 1: rotate keys in Settings.", usage=usage)
        return FakeReply.text("Claim 1: rotate keys in Settings > API keys [src:docs/api-keys.md].", usage=usage)

    server.responder = respond
    obs = InMemoryObserver()
    result = run_agent(
        claude(),
        "How do I rotate an API key?",
        tools,
        observer=obs,
        tenant="acme",
        offloader=Offloader(tmp_path / "artifacts"),
        goal_check=lambda text, steps: None if "[src:" in text else "Claim 1 has no citation.",
    )

    assert result.stop_cause == "completed" and len(result.steps) == 5
    assert len(server.exchanges) == 5 and all(e.status == 200 for e in server.exchanges)
    # Usage: what the harness reports is exactly what the server returned, call by call.
    assert [s.usage for s in result.steps] == [usage_of(e.response) for e in server.exchanges]
    assert [o.usage for _, o in obs.attempts] == [s.usage for s in result.steps]
    # Request: what we recorded is exactly the body the server received (as JSON values).
    assert [a.request for a, _ in obs.attempts] == server.bodies
    assert all(b["cache_control"] == {"type": "ephemeral"} and b["system"][0]["cache_control"] for b in server.bodies)
    # The seed's figures: $0.0427/0.0149/0.0123/0.0150/0.0147, $0.0997, hit rate 0.765.
    assert [round(s.cost_usd, 4) for s in result.steps] == [
        Decimal(x) for x in ("0.0427", "0.0149", "0.0123", "0.0150", "0.0147")
    ]
    assert round(result.cost_usd, 4) == Decimal("0.0997")
    u = result.usage
    hit_rate = u.cache_read_input_tokens / (u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens)
    assert round(hit_rate, 3) == 0.765
    assert len(obs.events_named(c.EVENT_OFFLOAD)) == 1
    assert [len(s.tool_executions) for s in result.steps] == [2, 1, 1, 0, 0]


def test_a_streamed_run_reports_final_usage_and_the_exact_body(server: FakeAnthropicServer, claude) -> None:
    server.enqueue(
        FakeReply.tools(("toolu_1", "lookup", {"q": "pto"}), text="Looking it up."),
        FakeReply.text("You have 12 days left."),
    )
    obs = InMemoryObserver()
    result = run_agent(claude(stream=True), "PTO left?", [tool("lookup", lambda q: "12 days", "q")], observer=obs)

    assert result.stop_cause == "completed" and result.final_text == "You have 12 days left."
    assert all(body["stream"] is True for body in server.bodies)
    assert [a.request for a, _ in obs.attempts] == server.bodies
    returned = [usage_of(e.response) for e in server.exchanges]
    assert [s.usage for s in result.steps] == returned
    assert all(u.output_tokens > 1 for u in returned)  # not message_start's placeholder
    assert returned[1].cache_read_input_tokens > 0  # the server's cache model saw the shared prefix
    assert result.steps[0].tool_executions[0].input == {"q": "pto"}  # tool input rebuilt from JSON deltas


def test_429_with_retry_after_then_success(server: FakeAnthropicServer, claude) -> None:
    server.enqueue(FakeError.rate_limited(retry_after=7), FakeReply.text("Done.", usage=usage_dict(1_200, 0, 0, 90)))
    slept: list[float] = []
    obs = InMemoryObserver()
    result = run_agent(claude(), "Hi", [], observer=obs, runtime=Runtime(sleep=slept.append))

    assert result.stop_cause == "completed"
    assert len(slept) == 1 and 7 <= slept[0] <= 7 * 1.3
    # The SDK's own retries are off: one HTTP request per recorded attempt.
    assert len(server.exchanges) == 2 and [e.status for e in server.exchanges] == [429, 200]
    assert [(a.attempt, a.retry_cause, o.error_type) for a, o in obs.attempts] == [(1, None, "429"), (2, "429", None)]
    assert server.bodies[0] == server.bodies[1] == obs.attempts[0][0].request
    assert result.usage == usage_of(server.exchanges[1].response)
    assert [(ch.attempt, ch.usage.total_tokens) for ch in result.charges] == [(1, 0), (2, 1_290)]
    (retry,) = obs.events_named(c.EVENT_RETRY)
    assert retry.attributes["cause"] == "429" and retry.attributes["attempt"] == 2


def test_overloaded_and_server_errors_are_retried(server: FakeAnthropicServer, claude) -> None:
    server.enqueue(FakeError.overloaded(), FakeError.server_error(), FakeReply.text("ok"))
    obs = InMemoryObserver()
    result = run_agent(claude(), "Hi", [], observer=obs, runtime=Runtime(sleep=lambda s: None))
    assert result.stop_cause == "completed"
    assert [o.error_type for _, o in obs.attempts] == ["529", "500", None]
    assert len(server.exchanges) == 3


def test_a_400_is_sent_once(server: FakeAnthropicServer, claude) -> None:
    server.enqueue(FakeError.bad_request(), FakeReply.text("never sent"))
    result = run_agent(claude(), "Hi", [], runtime=Runtime(sleep=lambda s: None), config=AgentConfig(max_steps=2))
    assert result.stop_cause == "error" and result.error_type == "400"
    assert len(server.exchanges) == 1


def test_a_cut_off_stream_is_retried_not_booked(server: FakeAnthropicServer, claude) -> None:
    server.truncate_streams = True
    server.enqueue(FakeReply.text("partial"))
    server.responder = lambda body: FakeReply.text("whole")
    obs = InMemoryObserver()

    def heal(_: float) -> None:
        server.truncate_streams = False

    result = run_agent(claude(stream=True), "Hi", [], observer=obs, runtime=Runtime(sleep=heal))
    assert result.final_text == "whole"
    assert [o.error_type for _, o in obs.attempts] == ["connection", None]
    assert result.usage == usage_of(server.exchanges[1].response)


def test_extra_request_fields_reach_the_wire_unchanged(server: FakeAnthropicServer, claude) -> None:
    # `temperature` has no keyword in this SDK version; it must still be sent, and recorded, as given.
    server.enqueue(FakeReply.text("ok"))
    response = claude().complete(
        "sys",
        [{"role": "user", "content": "x"}],
        [],
        100,
        temperature=0.2,
        metadata={"user_id": "u-1"},
        tool_choice={"type": "auto"},
    )
    assert response.request == server.bodies[0]
    assert server.bodies[0]["temperature"] == 0.2 and server.bodies[0]["metadata"] == {"user_id": "u-1"}
