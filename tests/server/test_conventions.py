"""Convention normalization for third-party spans (ledger.normalize), through a real ingest.

Each case is one model call of the same usage as the API billed it: 300 uncached
input, 2,000 written to the cache, 5,000 read from it, 400 output, on
claude-sonnet-5 ($3 / $15 per MTok, writes x1.25, reads x0.1): 900 + 6,000 +
7,500 + 1,500 = 15,900 µ$, however the source spells it.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from ledger import normalize as n
from ledger.content import load_context, trace_attributes
from ledger.ingest import ingest
from ledger.spans import SpanEvent, SpanRecord
from ledger.store import open_ledger

from .conftest import MS, T0

TRACE, SPAN = "c" * 32, "d" * 16
UNCACHED, WRITE, READ, OUT = 300, 2_000, 5_000, 400
TOTAL_IN = UNCACHED + WRITE + READ
USD = Decimal("0.0159")


def charge(attrs, scope=("some.instrumentation", "1.0.0"), events=()):  # type: ignore[no-untyped-def]
    con = open_ledger(":memory:")
    span = SpanRecord(TRACE, SPAN, "llm call", T0, T0 + 500 * MS, "e" * 16, "CLIENT", attributes=attrs,
                      events=tuple(events), scope_name=scope[0], scope_version=scope[1])  # fmt: skip
    report = ingest(con, [span])
    assert not report.rejected
    row = con.execute(
        "SELECT uncached_input_tokens, cache_write_tokens, cache_read_tokens, output_tokens, provider, model, "
        "usd_input + usd_output + usd_cache_write + usd_cache_read, token_convention FROM charges"
    ).fetchall()
    stored = con.execute("SELECT attributes FROM spans").fetchall()[0][0]
    return (row[0] if row else None), load_context(con, TRACE, SPAN), json.loads(stored)


EXACT = (UNCACHED, WRITE, READ, OUT, "anthropic", "claude-sonnet-5", USD)


@pytest.mark.parametrize(
    ("attrs", "scope"),
    [
        pytest.param(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "anthropic",
                "gen_ai.request.model": "claude-sonnet-5",
                "gen_ai.usage.input_tokens": TOTAL_IN,
                "gen_ai.usage.output_tokens": OUT,
                "gen_ai.usage.cache_write.input_tokens": WRITE,
                "gen_ai.usage.cache_read.input_tokens": READ,
            },
            ("opentelemetry.instrumentation.genai.anthropic", "1.3b0"),
            id="otel-contrib-cache_write-spelling",
        ),
        pytest.param(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "anthropic",
                "gen_ai.request.model": "claude-sonnet-5",
                "gen_ai.usage.input_tokens": TOTAL_IN,
                "gen_ai.usage.output_tokens": OUT,
                "gen_ai.usage.cache_creation.input_tokens": WRITE,
                "gen_ai.usage.cache_read.input_tokens": READ,
            },
            ("opentelemetry.instrumentation.anthropic", "0.62.4"),
            id="openllmetry-current",
        ),
        pytest.param(
            {
                "llm.request.type": "chat",
                "gen_ai.system": "Anthropic",
                "gen_ai.request.model": "claude-sonnet-5",
                "gen_ai.usage.prompt_tokens": TOTAL_IN,
                "gen_ai.usage.completion_tokens": OUT,
                "gen_ai.usage.cache_creation_input_tokens": WRITE,
                "gen_ai.usage.cache_read_input_tokens": READ,
            },
            ("opentelemetry.instrumentation.anthropic", "0.40.0"),
            id="openllmetry-deprecated-names",
        ),
        pytest.param(
            {
                "llm.request.type": "chat",
                "llm.vendor": "anthropic",
                "llm.request.model": "claude-sonnet-5",
                "llm.usage.prompt_tokens": UNCACHED,
                "llm.usage.completion_tokens": OUT,
            },
            ("opentelemetry.instrumentation.anthropic", "0.10.0"),
            id="openllmetry-oldest-no-cache-counts",
        ),
        pytest.param(
            {
                "openinference.span.kind": "LLM",
                "llm.provider": "anthropic",
                "llm.model_name": "claude-sonnet-5",
                "llm.token_count.prompt": TOTAL_IN,
                "llm.token_count.completion": OUT,
                "llm.token_count.prompt_details.cache_write": WRITE,
                "llm.token_count.prompt_details.cache_read": READ,
            },
            ("openinference.instrumentation.anthropic", "3.1.0"),
            id="openinference",
        ),
        pytest.param(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.system": "anthropic",
                "gen_ai.request.model": "claude-sonnet-5",
                "gen_ai.usage.input_tokens": UNCACHED,
                "gen_ai.usage.output_tokens": OUT,
                "gen_ai.usage.cache_creation.input_tokens": WRITE,
                "gen_ai.usage.cache_read.input_tokens": READ,
            },
            ("someones.raw.anthropic.wrapper", "0.1"),
            id="unknown-source-copying-anthropics-raw-count",
        ),
    ],
)
def test_every_spelling_is_charged_the_same(attrs, scope):
    row, _, _ = charge(attrs, scope)
    if "llm.usage.prompt_tokens" in attrs:  # the oldest OpenLLMetry reported no cache counts at all
        assert row[:4] == (UNCACHED, 0, 0, OUT)
        return
    assert row[:7] == EXACT


def test_a_known_scope_rule_beats_the_family_default(monkeypatch):
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic", "gen_ai.request.model": "claude-sonnet-5",
             "gen_ai.usage.input_tokens": 6_000, "gen_ai.usage.output_tokens": OUT,
             "gen_ai.usage.cache_read.input_tokens": READ}  # fmt: skip
    # 6,000 >= 5,000 read, so without a rule it is read as INCLUDING the reads: 1,000 uncached
    row, _, _ = charge(attrs, ("vendor.anthropic", "2.5.0"))
    assert row[0] == 1_000 and row[7] == "includes_cache"
    rules = (*n.SCOPE_CONVENTIONS, n.ScopeConvention("vendor.anthropic", False, since=(2, 0)))
    monkeypatch.setattr(n, "SCOPE_CONVENTIONS", rules)
    assert n.input_includes_cache("vendor.anthropic", "2.5.0") is False
    assert n.input_includes_cache("vendor.anthropic", "1.9") is None  # before the rule's range: unknown
    assert n.input_includes_cache("vendor.anthropic", "") is None  # no version: a bounded rule cannot apply
    row, _, _ = charge(attrs, ("vendor.anthropic", "2.5.0"))
    assert row[0] == 6_000 and row[7] == "excludes_cache"


def test_openinference_flattened_messages_and_tools_become_the_payload():
    attrs = {
        "openinference.span.kind": "LLM", "llm.provider": "anthropic", "llm.model_name": "claude-sonnet-5",
        "llm.token_count.prompt": 10, "llm.token_count.completion": 5,
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "Be brief.",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.contents.0.message_content.type": "text",
        "llm.input_messages.1.message.contents.0.message_content.text": "mail me at eve@example.org",
        "llm.input_messages.2.message.role": "assistant",
        "llm.input_messages.2.message.tool_calls.0.tool_call.id": "toolu_1",
        "llm.input_messages.2.message.tool_calls.0.tool_call.function.name": "search",
        "llm.input_messages.2.message.tool_calls.0.tool_call.function.arguments": '{"q": "x"}',
        "llm.tools.0.tool.json_schema": json.dumps({"name": "search", "input_schema": {"type": "object"}}),
    }  # fmt: skip
    _, payload, stored = charge(attrs)
    assert payload == {
        "model": "claude-sonnet-5",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "contents": [{"type": "text", "text": "mail me at [REDACTED:email]"}]},
            {"role": "assistant",
             "tool_calls": [{"id": "toolu_1", "function": {"name": "search", "arguments": '{"q": "x"}'}}]},
        ],
        "tools": [{"name": "search", "input_schema": {"type": "object"}}],
    }  # fmt: skip
    assert not any(k.startswith(("llm.input_messages", "llm.tools")) for k in stored)  # moved, not copied


def test_openllmetry_legacy_prompt_attributes_become_the_payload():
    attrs = {
        "llm.request.type": "chat", "gen_ai.system": "anthropic", "gen_ai.request.model": "claude-sonnet-5",
        "gen_ai.usage.prompt_tokens": 10, "gen_ai.usage.completion_tokens": 5,
        "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": "Be brief.",
        "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": "my card is 4111 1111 1111 1111",
        "llm.request.functions.0.name": "search", "llm.request.functions.0.description": "Search.",
        "gen_ai.completion.0.finish_reason": "end_turn",
    }  # fmt: skip
    row, payload, stored = charge(attrs, ("opentelemetry.instrumentation.anthropic", "0.30.0"))
    assert payload == {
        "model": "claude-sonnet-5",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "my card is [REDACTED:card]"},
        ],
        "tools": [{"name": "search", "description": "Search."}],
    }
    assert "gen_ai.prompt.1.content" not in stored
    assert row[:4] == (10, 0, 0, 5)


def test_content_carried_by_span_events_becomes_the_payload():
    base = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic", "gen_ai.request.model": "claude-sonnet-5",
            "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 5}  # fmt: skip
    details = SpanEvent("gen_ai.client.inference.operation.details", T0, {
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be brief."}]),
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]),
    })  # fmt: skip
    _, payload, _ = charge(base, events=[details])
    assert payload == {
        "model": "claude-sonnet-5",
        "system": [{"type": "text", "content": "Be brief."}],
        "messages": [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}],
    }
    legacy = [
        SpanEvent("gen_ai.system.message", T0, {"gen_ai.system": "anthropic", "content": "Be brief."}),
        SpanEvent("gen_ai.user.message", T0, {"content": "hi"}),
    ]
    _, payload, _ = charge(base, events=legacy)
    assert payload["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]


def test_spans_that_are_not_model_calls_carry_no_charge():
    row, payload, _ = charge({"openinference.span.kind": "TOOL", "tool.name": "search", "input.value": "{}"})
    assert row is None and payload is None


def test_openinference_input_value_is_the_request_on_llm_spans_only():
    request = {"model": "claude-sonnet-5", "system": "Be brief.", "messages": [{"role": "user", "content": "a@b.io"}]}
    attrs = {"openinference.span.kind": "LLM", "llm.provider": "anthropic", "llm.model_name": "claude-sonnet-5",
             "llm.token_count.prompt": 10, "llm.token_count.completion": 5,
             "input.value": json.dumps(request), "input.mime_type": "application/json"}  # fmt: skip
    _, payload, stored = charge(attrs)
    assert payload == {**request, "messages": [{"role": "user", "content": "[REDACTED:email]"}]}  # exact, redacted
    assert "input.value" not in stored  # moved to the content store, not kept raw beside it
    _, _, tool = charge({"openinference.span.kind": "TOOL", "tool.name": "search", "input.value": '{"q": 1}'})
    assert "input.value" not in tool  # a tool's input is content of its own: stored apart, referenced
    con = open_ledger(":memory:")
    ingest(
        con,
        [
            SpanRecord(
                TRACE,
                SPAN,
                "tool",
                T0,
                T0 + MS,
                attributes={"openinference.span.kind": "TOOL", "input.value": '{"q": 1}'},
            )
        ],
    )
    assert load_context(con, TRACE, SPAN) is None  # not request content
    assert trace_attributes(con, TRACE)[SPAN]["input.value"] == '{"q": 1}'  # rebuilt exactly
