"""What every framework's agent does, shared by the agent scripts (run inside each framework's own
virtual environment, so this module imports nothing but the standard library and OpenTelemetry).

An order-desk agent with one tool and a large system prompt (about 7,000 tokens: past every Claude
model's prompt-cache minimum of 1,024-4,096 tokens), run twice: the question (not streamed), which
the model answers by calling ``lookup_order`` and then in text, and a follow-up (streamed). The fake
Anthropic API decides the replies and the usage; the test scripts a 429 before the first call.

The agent is told where things are by the environment: ``ANTHROPIC_BASE_URL`` (the fake),
``OTEL_EXPORTER_OTLP_ENDPOINT`` (the collector) and ``MATRIX_CONFIG`` (which configuration).
"""

from __future__ import annotations

import os

MODEL = "claude-sonnet-4-6"
QUESTION = "What is the status of order 17?"
FOLLOW_UP = "Thanks. Say that again in one line."
TOOL_NAME = "lookup_order"
TOOL_DESCRIPTION = "Look up an order by its id and return its shipping status."
CONFIG = os.environ.get("MATRIX_CONFIG", "default")

_RULES = [
    "Greet the customer by name when the order record gives one, and never guess a name.",
    "Quote dates exactly as the order record gives them, in ISO 8601.",
    "Never promise a delivery date that the carrier has not confirmed.",
    "When an order is split into parcels, report each parcel's status on its own line.",
    "Refunds over 500 EUR need a supervisor: say so and stop.",
    "Use the lookup tool before answering any question about a specific order.",
    "Keep answers under three sentences unless the customer asks for detail.",
]
# 60 sections of 7 rules, ~115 tokens a section: ~7,000 tokens, cached by every framework.
SYSTEM_PROMPT = "You are the order desk of Example Ltd.\n\n" + "\n\n".join(
    f"Section {s}.\n" + "\n".join(f"{s}.{i}. {rule}" for i, rule in enumerate(_RULES, 1)) for s in range(1, 61)
)


def lookup_order(order_id: str) -> str:
    """Look up an order by its id and return its shipping status."""
    return f"Order {order_id} shipped on 2026-12-01."


def tracer_provider():  # type: ignore[no-untyped-def]
    """The global TracerProvider with the official OTLP/HTTP exporter, as a user sets it up."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": f"matrix-{CONFIG}"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider


def flush(provider) -> None:  # type: ignore[no-untyped-def]
    """Every span exported (the collector answers 200 after its commit) before the process exits."""
    assert provider.force_flush(60_000), "the OTLP exporter did not flush"
    provider.shutdown()
