"""A third-party agent: the real ``anthropic`` SDK under one PyPI instrumentation, exporting over OTLP/HTTP.

Run as a separate process (each instrumentation patches the SDK for the whole
process, so they cannot share one):

    python instrumented_agent.py {official|traceloop|openinference} ANTHROPIC_URL COLLECTOR_URL [TOKEN]

It holds a three-turn conversation (two plain calls and one streamed) inside a
root span, exports with the official ``OTLPSpanExporter`` (protobuf) and prints
the trace id.
"""

from __future__ import annotations

import os
import sys

# Content capture on, and the latest GenAI conventions, for every instrumentation.
os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
os.environ["TRACELOOP_TRACE_CONTENT"] = "true"

import anthropic
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

MODEL = "claude-sonnet-5"
SYSTEM = "You are a terse support agent."
SECRET_KEY = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345"
USER_TURNS = [
    "My email is bob@example.com and my key is " + SECRET_KEY + "; rotate it please.",
    "Which settings page was that?",
    "Thanks, summarise it in one line.",
]


def instrumentor(which: str):  # type: ignore[no-untyped-def]
    if which == "official":
        from opentelemetry.instrumentation.genai.anthropic import AnthropicInstrumentor
    elif which == "traceloop":
        from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor
    elif which == "openinference":
        from openinference.instrumentation.anthropic import AnthropicInstrumentor
    else:
        raise SystemExit(f"unknown instrumentation {which!r}")
    return AnthropicInstrumentor()


def main(which: str, anthropic_url: str, collector_url: str, token: str | None = None) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    provider = TracerProvider(resource=Resource.create({"service.name": f"agent-{which}", "tenant.id": "acme"}))
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{collector_url}/v1/traces", headers=headers))
    )
    instrumentor(which).instrument(tracer_provider=provider)
    client = anthropic.Anthropic(base_url=anthropic_url, api_key=SECRET_KEY, max_retries=0)
    tracer = provider.get_tracer("demo-agent")
    messages: list[dict[str, str]] = []
    with tracer.start_as_current_span("conversation") as root:
        for i, text in enumerate(USER_TURNS):
            messages.append({"role": "user", "content": text})
            kwargs = {"model": MODEL, "max_tokens": 256, "system": SYSTEM, "messages": list(messages)}
            if i == len(USER_TURNS) - 1:
                with client.messages.stream(**kwargs) as stream:
                    for _ in stream.text_stream:
                        pass
                    reply = stream.get_final_message()
            else:
                reply = client.messages.create(**kwargs)
            messages.append({"role": "assistant", "content": reply.content[0].text})
        trace_id = format(root.get_span_context().trace_id, "032x")
    provider.force_flush()
    provider.shutdown()
    print(trace_id)


if __name__ == "__main__":
    main(*sys.argv[1:])
