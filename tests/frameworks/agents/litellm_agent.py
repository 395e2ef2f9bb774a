"""LiteLLM: ``litellm.callbacks = ["otel"]`` on the global TracerProvider, a hand-written tool loop
over ``completion("anthropic/…")`` (``num_retries`` for the 429: it needs tenacity, which litellm
does not install), the system prompt a cached content
block, the follow-up streamed with usage. ``MATRIX_CONFIG`` parent-*: each turn inside an application
span; the conventions are chosen by OTEL_SEMCONV_STABILITY_OPT_IN."""

import contextlib
import json
import time

import litellm
from opentelemetry import trace
from scenario import (
    CONFIG,
    FOLLOW_UP,
    MODEL,
    QUESTION,
    SYSTEM_PROMPT,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    flush,
    lookup_order,
    tracer_provider,
)

provider = tracer_provider()
litellm.callbacks = ["otel"]
tracer = trace.get_tracer("order-desk")
TOOLS = [{"type": "function", "function": {"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "parameters": {
    "type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}}]  # fmt: skip
system = {
    "role": "system",
    "content": [{"type": "text", "text": SYSTEM_PROMPT, "cache_control": {"type": "ephemeral"}}],
}


def turn(name: str):  # type: ignore[no-untyped-def]
    return tracer.start_as_current_span(name) if CONFIG.startswith("parent") else contextlib.nullcontext()


def main() -> None:
    messages = [system, {"role": "user", "content": QUESTION}]
    with turn("order-desk question"):
        while True:
            reply = litellm.completion(model=f"anthropic/{MODEL}", messages=messages, tools=TOOLS, num_retries=2)
            message = reply.choices[0].message
            messages.append(message.model_dump())
            if not message.tool_calls:
                break
            for call in message.tool_calls:
                result = lookup_order(**json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    assert "shipped" in message.content
    messages.append({"role": "user", "content": FOLLOW_UP})
    with turn("order-desk follow-up"):
        stream = litellm.completion(
            model=f"anthropic/{MODEL}", messages=messages, stream=True, stream_options={"include_usage": True}
        )
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert "shipped" in text, text


main()
time.sleep(1)  # LiteLLM logs each call's success from a background thread
flush(provider)
