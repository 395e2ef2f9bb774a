"""A third-party agent: the real ``anthropic`` SDK under one PyPI instrumentation, exporting over OTLP.

Run as a separate process (each instrumentation patches the SDK for the whole
process, so they cannot share one):

    python instrumented_agent.py {official|traceloop|openinference|none} ANTHROPIC_URL COLLECTOR_URL [TOKEN]
        [--sdk-tracing] [--capture DIR] [--protocol {http,grpc}]

It holds a three-turn conversation (two plain calls and one streamed) inside a
root span, exports with the official ``OTLPSpanExporter`` (protobuf; over
OTLP/HTTP to ``COLLECTOR_URL/v1/traces``, or with ``--protocol grpc`` over
OTLP/gRPC to ``COLLECTOR_URL``, the token in the ``authorization`` metadata) and prints
the trace id. A call the API answers with 529 is retried once by the agent
(the SDK's own retries are off), as applications that count their attempts do.

``--sdk-tracing`` lets the anthropic SDK trace itself too (its ``open_telemetry``
client option, given the same tracer provider): every billed call is then
reported twice, by the SDK and by the instrumentation (``none``: the SDK
alone). ``--capture DIR`` keeps the spans in memory instead and writes two
OTLP/protobuf request bodies, encoded by the official exporter's encoder:
``DIR/sdk.pb`` (the SDK's spans) and ``DIR/others.pb`` (the rest), for a test
to post in either order.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

# Content capture on, and the latest GenAI conventions, for every instrumentation.
os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
os.environ["TRACELOOP_TRACE_CONTENT"] = "true"

import anthropic
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

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


SDK_SCOPE = "com.anthropic.sdk.python"


def _create(client: anthropic.Anthropic, kwargs: dict[str, object], stream: bool) -> anthropic.types.Message:
    for attempt in (1, 2):
        try:
            if stream:
                with client.messages.stream(**kwargs) as events:  # type: ignore[arg-type]
                    for _ in events.text_stream:
                        pass
                    return events.get_final_message()
            return client.messages.create(**kwargs)  # type: ignore[arg-type, no-any-return]
        except anthropic.APIStatusError as exc:
            if exc.status_code != 529 or attempt == 2:
                raise
    raise AssertionError("unreachable")


def exporter(protocol: str, collector_url: str, token: str | None) -> SpanExporter:
    """The official OTLP exporter for ``protocol``, as an application would configure it (waiting 60 s for an
    answer rather than the SDK's 10 s: a collector's first commit beside another test suite can take longer)."""
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        metadata = (("authorization", f"Bearer {token}"),) if token else None
        return GrpcExporter(endpoint=collector_url, insecure=True, headers=metadata, timeout=60)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    headers = {"Authorization": f"Bearer {token}"} if token else None
    return HttpExporter(endpoint=f"{collector_url}/v1/traces", headers=headers, timeout=60)


def _capture(spans: list[ReadableSpan], folder: str) -> None:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    out = Path(folder)
    sdk = [s for s in spans if s.instrumentation_scope and s.instrumentation_scope.name == SDK_SCOPE]
    others = [s for s in spans if s not in sdk]
    (out / "sdk.pb").write_bytes(encode_spans(sdk).SerializeToString())
    (out / "others.pb").write_bytes(encode_spans(others).SerializeToString())


def main(
    which: str,
    anthropic_url: str,
    collector_url: str,
    token: str | None = None,
    *,
    sdk_tracing: bool = False,
    capture: str | None = None,
    protocol: str = "http",
) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": f"agent-{which}", "tenant.id": "acme"}))
    memory = InMemorySpanExporter()
    if capture:
        provider.add_span_processor(SimpleSpanProcessor(memory))
    else:
        provider.add_span_processor(BatchSpanProcessor(exporter(protocol, collector_url, token)))
    if which != "none":
        instrumentor(which).instrument(tracer_provider=provider)
    # Without a tracer provider of its own the SDK traces into the global one, which
    # this process never sets: its spans go nowhere (the case without --sdk-tracing).
    client = anthropic.Anthropic(
        base_url=anthropic_url,
        api_key=SECRET_KEY,
        max_retries=0,
        open_telemetry={"tracer_provider": provider} if sdk_tracing else None,
    )
    tracer = provider.get_tracer("demo-agent")
    messages: list[dict[str, str]] = []
    with tracer.start_as_current_span("conversation") as root:
        for i, text in enumerate(USER_TURNS):
            messages.append({"role": "user", "content": text})
            kwargs = {"model": MODEL, "max_tokens": 256, "system": SYSTEM, "messages": list(messages)}
            reply = _create(client, kwargs, stream=i == len(USER_TURNS) - 1)
            messages.append({"role": "assistant", "content": reply.content[0].text})  # type: ignore[union-attr]
        trace_id = format(root.get_span_context().trace_id, "032x")
    provider.force_flush()
    if capture:
        _capture(list(memory.get_finished_spans()), capture)
    provider.shutdown()
    print(trace_id)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("which", choices=["official", "traceloop", "openinference", "none"])
    parser.add_argument("anthropic_url")
    parser.add_argument("collector_url")
    parser.add_argument("token", nargs="?")
    parser.add_argument("--sdk-tracing", action="store_true")
    parser.add_argument("--capture", metavar="DIR")
    parser.add_argument("--protocol", choices=["http", "grpc"], default="http")
    a = parser.parse_args()
    main(a.which, a.anthropic_url, a.collector_url, a.token, sdk_tracing=a.sdk_tracing, capture=a.capture,
         protocol=a.protocol)  # fmt: skip
