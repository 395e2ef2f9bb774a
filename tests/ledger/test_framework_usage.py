"""Every framework's token shape, charged as the provider billed it (ledger.framework_usage, ledger.normalize).

One billed call, as the Anthropic API answered it (the ground truth every shape
below was made from): ``input_tokens`` 300 (excluding the cache), 5,000 read from
the cache, 2,000 written to it (500 with a 5-minute TTL, 1,500 with a 1-hour one),
400 output, on claude-sonnet-4-6. The expected dollars come from genai-prices
itself (``calc_price``, whose ``input_tokens`` includes the cache), not from the
ledger's price book. The attribute sets are the ones each framework's code writes
(named in ``ledger.framework_usage``), with the values this call gives them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from genai_prices import Usage, calc_price

from ledger.ingest import ingest
from ledger.normalize import model_call
from ledger.spans import SpanRecord
from ledger.store import open_ledger

MODEL = "claude-sonnet-4-6"
UNCACHED, READ, WRITE_5M, WRITE_1H, OUT = 300, 5_000, 500, 1_500, 400
WRITE = WRITE_5M + WRITE_1H
TOTAL_IN = UNCACHED + READ + WRITE
T0 = 1_790_000_000_000_000_000
MS = 1_000_000
TRACE = "c" * 32
RESPONSE_ID = "msg_01XFDUDYJgAACzvnptvVoYEL"


def genai_prices_usd(*, write_5m: int = WRITE_5M, write_1h: int = WRITE_1H, uncached: int = UNCACHED,
                     out: int = OUT) -> Decimal:  # fmt: skip
    usage = Usage(input_tokens=uncached + READ + write_5m + write_1h, cache_read_tokens=READ,
                  cache_write_tokens=write_5m + write_1h, cache_write_5m_tokens=write_5m,
                  cache_write_1h_tokens=write_1h, output_tokens=out)  # fmt: skip
    when = datetime.fromtimestamp(T0 / 1e9, UTC)
    return Decimal(
        calc_price(usage, model_ref=MODEL, provider_id="anthropic", genai_request_timestamp=when).total_price
    )


EXACT = genai_prices_usd()
# The raw Anthropic usage object (the fake's record of the call), as the frameworks copy it.
ANTHROPIC_USAGE = {
    "input_tokens": UNCACHED, "output_tokens": OUT, "cache_read_input_tokens": READ,
    "cache_creation_input_tokens": WRITE,
    "cache_creation": {"ephemeral_5m_input_tokens": WRITE_5M, "ephemeral_1h_input_tokens": WRITE_1H},
    "service_tier": "standard",
}  # fmt: skip


def span(attrs: dict[str, object], scope: str, *, name: str = f"chat {MODEL}", span_id: str = "d" * 16,
         parent: str = "e" * 16, version: str = "", start: int = T0, end: int = T0 + 900 * MS) -> SpanRecord:  # fmt: skip
    return SpanRecord(TRACE, span_id, name, start, end, parent, "CLIENT", attributes=attrs, scope_name=scope,
                      scope_version=version)  # fmt: skip


def stored(spans: list[SpanRecord]) -> list[tuple[object, ...]]:
    """(uncached, read, write 5m, write 1h, output, usd, incomplete) of each charge, by span id."""
    con = open_ledger(":memory:")
    report = ingest(con, spans)
    assert not report.rejected
    return con.execute(
        "SELECT uncached_input_tokens, cache_read_tokens, cache_write_tokens, cache_write_1h_tokens, output_tokens, "
        "usd_input + usd_output + usd_cache_write + usd_cache_read + usd_cache_write_1h, incomplete_usage "
        "FROM charges ORDER BY span_id"
    ).fetchall()


WHOLE = (UNCACHED, READ, WRITE_5M, WRITE_1H, OUT, EXACT, False)

# --- pydantic-ai ---------------------------------------------------------------------------------
_PYDANTIC_BASE = {
    "gen_ai.operation.name": "chat", "gen_ai.system": "anthropic", "gen_ai.provider.name": "anthropic",
    "gen_ai.request.model": MODEL, "gen_ai.response.model": MODEL, "gen_ai.response.id": RESPONSE_ID,
    "gen_ai.usage.input_tokens": TOTAL_IN, "gen_ai.usage.output_tokens": OUT,
    "gen_ai.usage.details.input_tokens": UNCACHED, "gen_ai.usage.details.output_tokens": OUT,
    "gen_ai.usage.details.cache_creation_input_tokens": WRITE, "gen_ai.usage.details.cache_read_input_tokens": READ,
    "gen_ai.usage.details.ephemeral_5m_input_tokens": WRITE_5M,
    "gen_ai.usage.details.ephemeral_1h_input_tokens": WRITE_1H,
    "operation.cost": 0.0,
}  # fmt: skip
PYDANTIC_AI_1_40 = {**_PYDANTIC_BASE, "gen_ai.usage.details.cache_write_tokens": WRITE,
                    "gen_ai.usage.details.cache_read_tokens": READ}  # fmt: skip
PYDANTIC_AI_2 = {**PYDANTIC_AI_1_40, "gen_ai.usage.cache_creation.input_tokens": WRITE,
                 "gen_ai.usage.cache_read.input_tokens": READ}  # fmt: skip


@pytest.mark.parametrize(("attrs", "version"), [(PYDANTIC_AI_1_40, "1.40.0"), (PYDANTIC_AI_2, "2.1.0")],
                         ids=["v1.40-details-only", "v2-genai-and-details"])  # fmt: skip
def test_pydantic_ai_details_give_the_cache_terms_and_the_1_hour_split(attrs, version):
    assert stored([span(attrs, "pydantic-ai", version=version)]) == [WHOLE]


# --- LiteLLM -------------------------------------------------------------------------------------
# LiteLLM's usage object for the call (litellm.types.utils.Usage as a dict), as str() writes it.
LITELLM_USAGE = repr({
    "completion_tokens": OUT, "prompt_tokens": TOTAL_IN, "total_tokens": TOTAL_IN + OUT,
    "completion_tokens_details": None,
    "prompt_tokens_details": {"audio_tokens": None, "cached_tokens": READ, "text_tokens": None, "image_tokens": None,
                              "cache_creation_tokens": WRITE,
                              "cache_creation_token_details": {"ephemeral_5m_input_tokens": WRITE_5M,
                                                               "ephemeral_1h_input_tokens": WRITE_1H}},
    "cache_creation_input_tokens": WRITE, "cache_read_input_tokens": READ,
})  # fmt: skip


def litellm_attrs(response_id: str = RESPONSE_ID, usage: str = LITELLM_USAGE) -> dict[str, object]:
    return {
        "gen_ai.request.model": MODEL, "gen_ai.system": "anthropic", "llm.is_streaming": "False",
        "gen_ai.response.id": response_id, "gen_ai.response.model": MODEL, "gen_ai.usage.total_tokens": TOTAL_IN + OUT,
        "gen_ai.usage.output_tokens": OUT, "gen_ai.usage.input_tokens": TOTAL_IN, "gen_ai.operation.name": "chat",
        "metadata.usage_object": usage, "metadata.user_api_key_hash": "", "hidden_params": "{}",
    }  # fmt: skip


def litellm_raw(span_id: str, parent: str, response_id: str = RESPONSE_ID, *, start: int = T0) -> SpanRecord:
    attrs = {
        "llm.anthropic.model": MODEL, "llm.anthropic.max_tokens": 1024, "llm.anthropic.messages": "[{'role': ...}]",
        "llm.anthropic.id": response_id, "llm.anthropic.type": "message", "llm.anthropic.role": "assistant",
        "llm.anthropic.content": "[{'type': 'text', 'text': 'done'}]", "llm.anthropic.stop_reason": "end_turn",
        "llm.anthropic.usage": repr(ANTHROPIC_USAGE),
    }  # fmt: skip
    return span(attrs, "litellm", name="raw_gen_ai_request", span_id=span_id, parent=parent, start=start + 5 * MS,
                end=start + 800 * MS)  # fmt: skip


def test_litellm_default_reads_the_cache_from_its_usage_object_not_as_uncached_input():
    assert stored([span(litellm_attrs(), "litellm", name="litellm_request")]) == [WHOLE]


def test_litellm_request_and_its_raw_child_are_one_charge_with_the_same_terms():
    own = span(litellm_attrs(), "litellm", name="litellm_request", span_id="1" * 16)
    assert stored([own, litellm_raw("2" * 16, "1" * 16)]) == [WHOLE]


def test_an_application_span_litellm_wrote_onto_is_not_charged_its_raw_spans_are():
    """With an application parent span LiteLLM stamps each call's attributes onto it (the last call's
    stay); its raw_gen_ai_request children are the calls."""
    parent = span(litellm_attrs("msg_second"), "my-agent", name="agent turn", span_id="1" * 16, parent="")
    first, second = litellm_raw("2" * 16, "1" * 16, "msg_first"), litellm_raw("3" * 16, "1" * 16, "msg_second",
                                                                               start=T0 + 2_000 * MS)  # fmt: skip
    assert model_call(parent) is None
    assert stored([parent, first, second]) == [WHOLE, WHOLE]


@pytest.mark.parametrize(
    "usage",
    ["Usage(completion_tokens=400)", "{'prompt_tokens': " * 3000, "x" * 20_000, "[1, 2]", "__import__('os')"],
    ids=["object-repr", "nested-past-limit", "huge", "not-a-dict", "code"],
)
def test_a_litellm_usage_object_that_is_not_one_leaves_the_call_as_its_gen_ai_names_say(usage):
    (row,) = stored([span(litellm_attrs(usage=usage), "litellm", name="litellm_request")])
    assert row[:5] == (TOTAL_IN, 0, 0, 0, OUT)  # prompt_tokens with no split to read: all of it uncached input


def test_a_litellm_usage_object_with_a_bad_count_is_flagged_invalid_not_guessed():
    usage = LITELLM_USAGE.replace(f"'cache_read_input_tokens': {READ}", "'cache_read_input_tokens': -5")
    call = model_call(span(litellm_attrs(usage=usage), "litellm", name="litellm_request"))
    assert call is not None and "cache_read" in call.invalid_usage


# --- LangChain ------------------------------------------------------------------------------------
def langchain_output(usage_metadata: dict[str, object], response_id: str = RESPONSE_ID) -> str:
    """LangChain's LLMResult as OpenInference keeps it in output.value (the message serialized by dumpd)."""
    message = {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessage"],
               "kwargs": {"content": "done", "type": "ai", "usage_metadata": usage_metadata,
                          "response_metadata": {"id": response_id, "model": MODEL, "stop_reason": "end_turn"}}}  # fmt: skip
    return json.dumps({"generations": [[{"text": "done", "type": "ChatGeneration", "message": message}]],
                       "llm_output": {"id": response_id, "model": MODEL}, "run": None, "type": "LLMResult"})  # fmt: skip


LANGCHAIN_USAGE = {
    "input_tokens": TOTAL_IN, "output_tokens": OUT, "total_tokens": TOTAL_IN + OUT,
    "input_token_details": {"cache_read": READ, "cache_creation": 0, "ephemeral_5m_input_tokens": WRITE_5M,
                            "ephemeral_1h_input_tokens": WRITE_1H},
}  # fmt: skip


def openinference_langchain(usage: dict[str, object], prompt: int, completion: int, read: int) -> dict[str, object]:
    return {
        "openinference.span.kind": "LLM", "llm.provider": "anthropic", "llm.system": "anthropic",
        "llm.model_name": MODEL, "llm.token_count.prompt": prompt, "llm.token_count.completion": completion,
        "llm.token_count.total": prompt + completion, "llm.token_count.prompt_details.cache_read": read,
        "llm.token_count.prompt_details.cache_write": 0,
        "output.value": langchain_output(usage), "output.mime_type": "application/json",
    }  # fmt: skip


def test_langchain_under_openinference_reads_the_write_split_inside_output_value():
    attrs = openinference_langchain(LANGCHAIN_USAGE, TOTAL_IN, OUT, READ)
    assert stored([span(attrs, "openinference.instrumentation.langchain", name="ChatAnthropic")]) == [WHOLE]


def test_a_stream_reporting_output_and_no_input_is_flagged_incomplete_and_charged_as_sent():
    """LangChain's classic message_delta shape: the last event's usage only (input 0, output 96)."""
    usage = {"input_tokens": 0, "output_tokens": 96, "total_tokens": 96}
    attrs = openinference_langchain(usage, 0, 96, 0)
    attrs["output.value"] = langchain_output(usage)
    rows = stored([span(attrs, "openinference.instrumentation.langchain", name="ChatAnthropic")])
    assert rows == [(0, 0, 0, 0, 96, genai_prices_usd(uncached=0, write_5m=0, write_1h=0, out=96) - (
        genai_prices_usd(uncached=0, write_5m=0, write_1h=0, out=0)), True)]  # fmt: skip


# --- Claude Code ----------------------------------------------------------------------------------
CLAUDE_CODE_OWN = {
    "model": MODEL, "gen_ai.system": "anthropic", "gen_ai.request.model": MODEL, "speed": "normal",
    "llm_request.context": "interaction", "duration_ms": 900, "input_tokens": UNCACHED, "output_tokens": OUT,
    "cache_read_tokens": READ, "cache_creation_tokens": WRITE, "success": True, "attempt": 1,
    "request_id": "req_011CV1", "stop_reason": "end_turn",
}  # fmt: skip


def test_claude_code_spans_in_its_own_names_are_anthropic_semantics_every_write_at_the_5_minute_rate():
    """Its spans carry no TTL split (its api_request log events do): a write is priced as a 5-minute one."""
    (row,) = stored([span(CLAUDE_CODE_OWN, "com.anthropic.claude_code", name="claude_code.llm_request")])
    assert row == (UNCACHED, READ, WRITE, 0, OUT, genai_prices_usd(write_5m=WRITE, write_1h=0), False)


def test_claude_code_spans_with_the_gen_ai_names_too_are_read_the_same():
    attrs = {**CLAUDE_CODE_OWN, "gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": TOTAL_IN,
             "gen_ai.usage.output_tokens": OUT, "gen_ai.usage.cache_read.input_tokens": READ,
             "gen_ai.usage.cache_write.input_tokens": WRITE, "gen_ai.response.id": "req_011CV1"}  # fmt: skip
    (row,) = stored([span(attrs, "com.anthropic.claude_code", name="claude_code.llm_request")])
    assert row == (UNCACHED, READ, WRITE, 0, OUT, genai_prices_usd(write_5m=WRITE, write_1h=0), False)
