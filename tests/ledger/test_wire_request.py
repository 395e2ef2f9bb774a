"""The request each model call sent, rebuilt in its provider's wire format from what each convention
records (``ledger.wire_request``): synthetic spans of each convention through the real ingest into a
real ledger, read back as ``context --turn N --show request`` reads them."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.content import load_turn
from ledger.ingest import ingest
from ledger.spans import SpanEvent, SpanRecord
from ledger.wire_request import ANTHROPIC_MESSAGES, OPENAI_CHAT, WireRequest, comparable

T0 = 1_800_000_000_000_000_000
_IDS = itertools.count(1)
SYSTEM = "You are the order desk."
TOOL_SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
USAGE = {"gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 20}

# What the client sent: a system prompt, one tool, a tool call and its result, then the question again.
SENT_ANTHROPIC = {
    "model": "claude-sonnet-4-6",
    "max_tokens": 1024,
    "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Where is order 17?"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"order_id": "17"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "shipped"}], "is_error": False}]},
    ],
    "tools": [{"name": "lookup", "description": "Look up an order.", "input_schema": TOOL_SCHEMA}],
    "temperature": 0.5,
    "stream": True,
}  # fmt: skip


def _span(attributes: dict[str, Any], events: tuple[SpanEvent, ...] = ()) -> SpanRecord:
    n = next(_IDS)
    return SpanRecord(f"{n:032x}", f"{n:016x}", "chat", T0, T0 + 10**9, kind="CLIENT",
                      attributes={**USAGE, **attributes}, events=events)  # fmt: skip


def _rebuilt(ledger: Any, span: SpanRecord) -> WireRequest:
    ingest(ledger, [span])
    turn = load_turn(ledger, span.trace_id, span.span_id)
    assert turn is not None and turn.wire is not None
    return turn.wire


def _genai_anthropic_attributes() -> dict[str, Any]:
    return {
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-sonnet-4-6",
        "gen_ai.request.max_tokens": 1024,
        "gen_ai.request.temperature": 0.5,
        "gen_ai.request.stream": True,
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": SYSTEM}]),
        "gen_ai.tool.definitions": json.dumps(
            [{"type": "function", "name": "lookup", "description": "Look up an order.", "parameters": TOOL_SCHEMA}]
        ),
        "gen_ai.input.messages": json.dumps([
            {"role": "user", "parts": [{"type": "text", "content": "Where is order 17?"}]},
            {"role": "assistant", "parts": [{"type": "tool_call", "id": "toolu_1", "name": "lookup", "arguments": {"order_id": "17"}}]},
            {"role": "tool", "parts": [{"type": "tool_call_response", "id": "toolu_1", "response": "shipped"}]},
        ]),
    }  # fmt: skip


def test_genai_attributes_rebuild_the_anthropic_request_and_name_what_they_cannot_carry(ledger):
    wire = _rebuilt(ledger, _span(_genai_anthropic_attributes()))
    assert wire.api == ANTHROPIC_MESSAGES
    assert comparable(SENT_ANTHROPIC, wire.not_reported) == wire.body
    # The parts carry no cache_control and no is_error: named, never guessed.
    assert {"system[].cache_control", "messages[].content[].is_error", "tool_choice"} <= set(wire.not_reported)
    assert not set(wire.not_reported) & set(wire.body)
    assert wire.body["max_tokens"] == 1024 and wire.body["stream"] is True


def test_openinference_flattened_messages_win_over_a_frameworks_own_serialization(ledger):
    lc = {"messages": [[{"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "HumanMessage"],
                         "kwargs": {"content": "Where is order 17?"}}]]}  # fmt: skip
    attrs = {
        "openinference.span.kind": "LLM", "llm.provider": "anthropic", "llm.model_name": "claude-sonnet-4-6",
        "input.value": json.dumps(lc), "input.mime_type": "application/json",
        "llm.invocation_parameters": json.dumps({"model": "claude-sonnet-4-6", "max_tokens": 1024, "temperature": None,
                                                 "streaming": False, "_type": "anthropic-chat"}),
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.contents.0.message_content.type": "text",
        "llm.input_messages.0.message.contents.0.message_content.text": SYSTEM,
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": "Where is order 17?",
        "llm.input_messages.2.message.role": "assistant",
        "llm.input_messages.2.message.tool_calls.0.tool_call.id": "toolu_1",
        "llm.input_messages.2.message.tool_calls.0.tool_call.function.name": "lookup",
        "llm.input_messages.2.message.tool_calls.0.tool_call.function.arguments": '{"order_id": "17"}',
        "llm.input_messages.3.message.role": "tool",
        "llm.input_messages.3.message.content": "shipped",
        "llm.input_messages.3.message.tool_call_id": "toolu_1",
        "llm.tools.0.tool.json_schema": json.dumps({"name": "lookup", "description": "Look up an order.",
                                                   "input_schema": TOOL_SCHEMA}),
    }  # fmt: skip
    wire = _rebuilt(ledger, _span(attrs))
    sent = {
        "model": "claude-sonnet-4-6", "max_tokens": 1024,
        "system": [{"type": "text", "text": SYSTEM}],
        "messages": [
            {"role": "user", "content": "Where is order 17?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"order_id": "17"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "shipped", "is_error": False}]},
        ],
        "tools": [{"name": "lookup", "description": "Look up an order.", "input_schema": TOOL_SCHEMA}],
    }  # fmt: skip
    assert comparable(sent, wire.not_reported) == wire.body
    assert "lc" not in json.dumps(wire.body)
    assert {"stream", "temperature", "system[].cache_control"} <= set(wire.not_reported)


def test_openllmetry_prompt_attributes_rebuild_the_request(ledger):
    attrs = {
        "gen_ai.system": "Anthropic", "gen_ai.request.model": "claude-sonnet-4-6", "gen_ai.request.max_tokens": 512,
        "llm.is_streaming": True, "llm.request.type": "chat",
        "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": SYSTEM,
        "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": "Where is order 17?",
        "llm.request.functions.0.name": "lookup", "llm.request.functions.0.description": "Look up an order.",
        "llm.request.functions.0.parameters": json.dumps(TOOL_SCHEMA),
    }  # fmt: skip
    wire = _rebuilt(ledger, _span(attrs))
    assert wire.body == {
        "model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": "Where is order 17?"}],
        "max_tokens": 512, "system": SYSTEM,
        "tools": [{"name": "lookup", "description": "Look up an order.", "input_schema": TOOL_SCHEMA}], "stream": True,
    }  # fmt: skip
    assert "tools[].cache_control" in wire.not_reported and "stream" not in wire.not_reported


def test_message_events_with_converse_blocks_keep_their_cache_point(ledger):
    def event(name: str, content: Any) -> SpanEvent:
        return SpanEvent(name, T0, {"content": json.dumps(content)})

    events = (
        event("gen_ai.system.message", [{"text": SYSTEM}, {"cachePoint": {"type": "default"}}]),
        event("gen_ai.user.message", [{"text": "Where is order 17?"}]),
        event("gen_ai.assistant.message", [{"toolUse": {"toolUseId": "toolu_1", "name": "lookup", "input": {"order_id": "17"}}}]),
        event("gen_ai.tool.message", [{"toolResult": {"toolUseId": "toolu_1", "status": "success", "content": [{"text": "shipped"}]}}]),
    )  # fmt: skip
    wire = _rebuilt(
        ledger, _span({"gen_ai.system": "strands-agents", "gen_ai.request.model": "claude-sonnet-4-6"}, events)
    )
    sent = {**SENT_ANTHROPIC, "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]}
    assert comparable(sent, wire.not_reported) == wire.body
    assert {"max_tokens", "tools", "stream", "temperature"} <= set(wire.not_reported)  # the events say none


def test_an_openai_call_is_rebuilt_as_chat_completions(ledger):
    attrs = {**_genai_anthropic_attributes(), "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-5"}
    wire = _rebuilt(ledger, _span(attrs))
    assert wire.api == OPENAI_CHAT
    assert wire.body == {
        "model": "gpt-5",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Where is order 17?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "toolu_1", "type": "function", "function": {"name": "lookup", "arguments": '{"order_id": "17"}'}}]},
            {"role": "tool", "tool_call_id": "toolu_1", "content": "shipped"},
        ],
        "max_tokens": 1024, "temperature": 0.5, "stream": True,
        "tools": [{"type": "function", "function": {"name": "lookup", "description": "Look up an order.", "parameters": TOOL_SCHEMA}}],
    }  # fmt: skip
    assert "tool_choice" in wire.not_reported and "max_tokens" not in wire.not_reported


def test_a_body_recorded_as_sent_is_kept_exactly(ledger):
    wire = _rebuilt(
        ledger, _span({"gen_ai.provider.name": "anthropic", "turnledger.request.body": json.dumps(SENT_ANTHROPIC)})
    )
    assert wire.body == SENT_ANTHROPIC and list(wire.body) == list(SENT_ANTHROPIC)  # key order too
    assert "tool_choice" in wire.not_reported and not any("[]" in path for path in wire.not_reported)


def test_no_rebuild_for_an_unknown_provider(ledger):
    span = _span({"gen_ai.system": "acme-llm", "gen_ai.request.model": "acme-7",
                  "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}])})  # fmt: skip
    ingest(ledger, [span])
    turn = load_turn(ledger, span.trace_id, span.span_id)
    assert turn is not None and turn.request is not None and turn.wire is None


# --- the recorded fields round-trip -------------------------------------------------------------
_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)
_ids = st.from_regex(r"toolu_[a-z0-9]{4}", fullmatch=True)
_args = st.dictionaries(st.sampled_from(["q", "id", "n"]), st.one_of(_text, st.integers(-5, 5)), max_size=2)


@st.composite
def _sent(draw: st.DrawFn) -> dict[str, Any]:
    """An Anthropic request, as a client sends it: text turns with tool calls and their results."""
    messages: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 4))):
        messages.append({"role": "user", "content": [{"type": "text", "text": draw(_text)}]})
        if draw(st.booleans()):
            call = draw(_ids)
            messages.append(
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": call,
                            "name": draw(st.sampled_from(["lookup", "search"])),
                            "input": draw(_args),
                        }
                    ],
                }
            )
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": call, "content": [{"type": "text", "text": draw(_text)}]}
                    ],
                }
            )
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-6",
        "max_tokens": draw(st.integers(1, 64_000)),
        "messages": messages,
    }
    if draw(st.booleans()):
        body["system"] = [{"type": "text", "text": draw(_text)}]
    for key, value in (
        ("temperature", st.floats(0, 1)),
        ("top_p", st.floats(0, 1)),
        ("top_k", st.integers(1, 500)),
        ("stop_sequences", st.lists(_text, min_size=1, max_size=2)),
    ):
        if draw(st.booleans()):
            body[key] = draw(value)
    if draw(st.booleans()):
        body["stream"] = True
    return body  # fmt: skip


def _as_genai(sent: dict[str, Any]) -> dict[str, Any]:
    """What a GenAI-convention instrumentation records of ``sent``: its parts and parameters."""

    def parts(block: dict[str, Any]) -> dict[str, Any]:
        if block["type"] == "text":
            return {"type": "text", "content": block["text"]}
        if block["type"] == "tool_use":
            return {"type": "tool_call", "id": block["id"], "name": block["name"], "arguments": block["input"]}
        return {"type": "tool_call_response", "id": block["tool_use_id"], "response": block["content"][0]["text"]}

    messages = []
    for m in sent["messages"]:
        role = "tool" if m["content"][0]["type"] == "tool_result" else m["role"]
        messages.append({"role": role, "parts": [parts(b) for b in m["content"]]})
    attrs = {"gen_ai.provider.name": "anthropic", "gen_ai.request.model": sent["model"],
             "gen_ai.input.messages": json.dumps(messages)}  # fmt: skip
    if "system" in sent:
        attrs["gen_ai.system_instructions"] = json.dumps([parts(b) for b in sent["system"]])
    for key in ("max_tokens", "temperature", "top_p", "top_k", "stop_sequences", "stream"):
        if key in sent:
            attrs[f"gen_ai.request.{key}"] = sent[key]
    return attrs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sent=_sent())
def test_every_recorded_field_round_trips(ledger: Any, sent: dict[str, Any]) -> None:
    wire = _rebuilt(ledger, _span(_as_genai(sent)))
    assert set(wire.body) == set(sent)  # the GenAI attributes record every field drawn here: none left out
    assert comparable(sent, wire.not_reported) == wire.body  # each equal, but for the details named missing
    assert not set(wire.not_reported) & set(wire.body)  # a field is either rebuilt or named missing


@pytest.mark.parametrize("path", ["system[].cache_control", "messages[].content[].cache_control"])
def test_comparable_drops_only_what_the_path_names(path):
    sent = {"system": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}}]}]}  # fmt: skip
    out = comparable(sent, [path])
    where = path.split("[]")[0]
    assert "cache_control" not in json.dumps(out[where])
    other = "messages" if where == "system" else "system"
    assert out[other] == sent[other]


# --- the CLI --------------------------------------------------------------------------------------
def test_context_show_request_prints_the_rebuilt_body_and_names_the_rest(tmp_path, capsys):
    from collector.cli import main
    from ledger.store import open_ledger

    db = tmp_path / "l.duckdb"
    span = _span(_genai_anthropic_attributes())
    with open_ledger(db) as con:
        ingest(con, [span])
    where = ["--db", str(db)]
    assert main(["context", span.trace_id, "--turn", "1", "--show", "request", *where]) == 0
    out = capsys.readouterr()
    body = json.loads(out.out)  # what the Anthropic SDK takes: client.messages.create(**body)
    named = out.err.strip().removeprefix("not reported by the source: ").split(", ")
    assert comparable(SENT_ANTHROPIC, named) == body
    assert "not reported by the source: " in out.err and "tool_choice" in out.err
    assert main(["context", span.trace_id, "--turn", "1", "--show", "request", "--json", *where]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["api"] == ANTHROPIC_MESSAGES and doc["request"] == body
    assert comparable(SENT_ANTHROPIC, doc["not_reported"]) == body and "tool_choice" in doc["not_reported"]
    assert main(["context", span.trace_id, "--turn", "1", *where]) == 0
    both = json.loads(capsys.readouterr().out)
    assert both["request"] == body and both["not_reported"] == doc["not_reported"]
    assert main(["context", span.trace_id, "--turn", "1", "--show", "recorded", *where]) == 0
    assert json.loads(capsys.readouterr().out)["messages"][0]["parts"]  # the GenAI parts, as recorded


def test_the_anthropic_sdk_sends_the_rebuilt_body_as_it_is(ledger):
    """The dump is something the provider's SDK accepts: replayed through the real SDK, the API
    receives exactly the rebuilt body."""
    import anthropic

    from tests.fakes.anthropic_server import FakeAnthropicServer, FakeReply

    attrs = {k: v for k, v in _genai_anthropic_attributes().items() if k != "gen_ai.request.temperature"}
    wire = _rebuilt(ledger, _span(attrs))  # (temperature: the SDK 2.x takes it only in extra_body)
    with FakeAnthropicServer() as fake:
        fake.enqueue(FakeReply.text("shipped"))
        client = anthropic.Anthropic(base_url=fake.base_url, api_key="sk-ant-test", max_retries=0)
        with client.messages.create(**wire.body) as stream:  # stream: true, as recorded
            assert [event.type for event in stream][-1] == "message_stop"
    assert fake.bodies == [wire.body]
