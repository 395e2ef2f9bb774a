"""1-hour cache writes from real sources, priced exactly in a real ledger.

Issue #12's worked call on claude-sonnet-4-6: 41 uncached input tokens, 67 output tokens,
6,100 cache-write tokens. Written for 1 hour it costs $0.037728; for 5 minutes $0.024003.
The local fake Messages API returns that usage with the TTL split (``usage.cache_creation``)
to the real ``anthropic`` SDK, and two sources report it: our harness (``ClaudeLLM`` and its
``chat`` span) and the SDK's own span (its tracing on). Each is ingested into a DuckDB file.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import anthropic
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from collector.harness import Runtime, run_agent
from collector.harness.config import DEFAULT_PRICES
from collector.harness.llm import ClaudeLLM, Usage
from collector.harness.telemetry import InMemorySpanExporter
from collector.otlp import decode_protobuf
from ledger import conventions as c
from ledger.ingest import ingest
from ledger.store import open_ledger
from ledger.terms import usd_sum
from tests.fakes.anthropic_server import FakeAnthropicServer, FakeReply, api_usage
from tests.telemetry.helpers import Traced

MODEL = "claude-sonnet-4-6"
ONE_HOUR = api_usage(41, 67, cache_1h=6_100)
FIVE_MINUTES = api_usage(41, 67, cache_5m=6_100)
EXPECTED = {"1h": (ONE_HOUR, Decimal("0.037728"), 0, 6_100), "5m": (FIVE_MINUTES, Decimal("0.024003"), 6_100, 0)}
CHARGE = f"""SELECT uncached_input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens, cache_read_tokens,
                    {usd_sum()} AS usd, price_source FROM charges"""


def _charges(con: Any) -> list[tuple[Any, ...]]:
    return con.execute(CHARGE).fetchall()


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("ttl", ["1h", "5m"])
def test_the_harness_span_charges_1_hour_writes_at_the_1_hour_rate(
    traced: Callable[..., Traced], ttl: str, stream: bool
) -> None:
    usage, usd, write_5m, write_1h = EXPECTED[ttl]
    t = traced()
    with FakeAnthropicServer() as server:
        server.enqueue(FakeReply.text("Done.", usage=usage))
        with ClaudeLLM(MODEL, base_url=server.base_url, api_key="test-key", timeout=10, stream=stream) as llm:
            result = run_agent(llm, "Summarize the policy.", observer=t.observer, runtime=Runtime.seeded(1))
    assert result.stop_cause == "completed"
    assert result.cost_usd == usd  # the harness's own budget estimate prices the 1-hour rate too
    (chat,) = [s for s in t.spans() if s.name.startswith("chat ")]
    assert chat.attributes[c.CACHE_CREATION_INPUT_TOKENS] == 6_100
    if ttl == "1h":
        assert chat.attributes[c.CACHE_CREATION_1H_INPUT_TOKENS] == 6_100
        assert chat.attributes[c.CACHE_CREATION_5M_INPUT_TOKENS] == 0
    else:  # no 1-hour write: no split on the span, which means every write was a 5-minute one
        assert c.CACHE_CREATION_1H_INPUT_TOKENS not in chat.attributes
    t.close()
    with t.open() as con:
        assert _charges(con) == [(41, 67, write_5m, write_1h, 0, usd, "genai-prices")]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("ttl", ["1h", "5m"])
def test_the_sdk_span_charges_1_hour_writes_at_the_1_hour_rate(tmp_path: Any, ttl: str, stream: bool) -> None:
    usage, usd, write_5m, write_1h = EXPECTED[ttl]
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    request = {"model": MODEL, "max_tokens": 256, "messages": [{"role": "user", "content": "Summarize the policy."}]}
    with FakeAnthropicServer() as server:
        server.enqueue(FakeReply.text("Done.", usage=usage))
        client = anthropic.Anthropic(
            base_url=server.base_url, api_key="test-key", max_retries=0, open_telemetry={"tracer_provider": provider}
        )
        with client:
            if stream:
                with client.messages.stream(**request) as events:
                    message = events.get_final_message()
            else:
                message = client.messages.create(**request)
    assert Usage.from_api(message.usage) == Usage(41, 67, 6_100, 0, write_1h)
    (span,) = memory.get_finished_spans()
    assert span.instrumentation_scope is not None and span.instrumentation_scope.name == "com.anthropic.sdk.python"
    assert span.attributes["anthropic.usage.cache_creation.ephemeral_1h_input_tokens"] == write_1h
    # as the collector receives it: the official OTLP encoder, our protobuf decoder
    records = decode_protobuf(encode_spans([span]).SerializeToString())
    with open_ledger(tmp_path / "sdk.duckdb") as con:
        ingest(con, records)
        assert _charges(con) == [(41, 67, write_5m, write_1h, 0, usd, "genai-prices")]


def test_usage_from_the_api_keeps_the_ttl_split_and_the_budget_prices_it() -> None:
    usage = Usage.from_api(ONE_HOUR)
    assert (usage.cache_creation_input_tokens, usage.cache_creation_1h_input_tokens) == (6_100, 6_100)
    assert usage.cache_creation_5m_input_tokens == 0 and usage.prompt_tokens == 6_141
    price = DEFAULT_PRICES[MODEL]
    assert price.cost(usage) == Decimal("0.037728")
    assert price.cost(Usage.from_api(FIVE_MINUTES)) == Decimal("0.024003")
    assert price.cost(Usage(41, 67, 6_100)) == Decimal("0.024003")  # no split reported: 5-minute writes
    # a split larger than the total: the split is trusted (as the ledger reads it)
    odd = Usage.from_api({**ONE_HOUR, "cache_creation_input_tokens": 100})
    assert (odd.cache_creation_input_tokens, odd.cache_creation_1h_input_tokens) == (6_100, 6_100)
    assert (Usage.from_api(ONE_HOUR) + Usage.from_api(FIVE_MINUTES)).cache_creation_1h_input_tokens == 6_100
