"""The issue's hostile spans, as OTLP/JSON span objects and as protobuf: one of each kind beside good ones.

Shared by the ledger-level, CLI and receiver tests of validation at the door.
"""

from __future__ import annotations

import json
import math
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

TRACE = "cd" * 16
T0 = 1_790_000_000_000_000_000
MODEL = "claude-sonnet-4-6"


def span_id(n: int) -> str:
    return f"{n:016x}"


def _kv(key: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"key": key, "value": value}


def chat(n: int, *extra: dict[str, Any], input_tokens: Any = {"intValue": "41"}, **fields: Any) -> dict[str, Any]:  # noqa: B006
    """A model-call span (41 uncached in, 67 out on claude-sonnet-4-6) with extra attributes."""
    attrs = [
        _kv("gen_ai.operation.name", {"stringValue": "chat"}),
        _kv("gen_ai.provider.name", {"stringValue": "anthropic"}),
        _kv("gen_ai.request.model", {"stringValue": MODEL}),
        _kv("gen_ai.usage.input_tokens", input_tokens),
        _kv("gen_ai.usage.output_tokens", {"intValue": "67"}),
    ]
    keys = {a["key"] for a in extra}
    span = {
        "traceId": TRACE, "spanId": span_id(n), "name": f"chat {MODEL}",
        "startTimeUnixNano": str(T0 + n * 10**9), "endTimeUnixNano": str(T0 + n * 10**9 + 5 * 10**8),
        "attributes": [a for a in attrs if a["key"] not in keys] + list(extra),
    }  # fmt: skip
    return {**span, **fields}


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"stringValue": "bottom"}
    for _ in range(depth):
        value = {"kvlistValue": {"values": [_kv("k", value)]}}
    return value


GOOD = (1, 2, 3)
# span number -> (the span, what the answer must name)
HOSTILE: dict[int, tuple[dict[str, Any], str]] = {
    4: (chat(4, input_tokens={"intValue": "99999999999999999999"}), "gen_ai.usage.input_tokens"),
    5: (chat(5, _kv("gen_ai.usage.output_tokens", {"intValue": "-5"})), "gen_ai.usage.output_tokens"),
    6: (chat(6, _kv("gen_ai.usage.output_tokens", {"doubleValue": "NaN"})), "gen_ai.usage.output_tokens"),
    7: (chat(7, startTimeUnixNano=str(2**63), endTimeUnixNano=str(2**63)), "startTimeUnixNano"),
    8: (chat(8, _kv("deep", nested(100))), "attributes.deep"),  # past our 32, within the JSON parser
    9: (chat(9, _kv("gen_ai.input.messages", {"stringValue": "not json ["})), "captured content"),
    10: (chat(10, _kv("gen_ai.input.messages", {"intValue": "5"})), "captured content"),
}
INVALID_USAGE = (4, 5, 6)  # kept, charge flagged
REJECTED = (7, 8)  # rejected alone
CONTENT_NOT_STORED = (9, 10)  # kept, no captured payload


def request_json(spans: list[dict[str, Any]]) -> bytes:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"scope": {"name": "x"}, "spans": spans}]}]}).encode()


def must_show_json() -> bytes:
    """Three good spans and one of each hostile kind, in one OTLP/JSON request."""
    return request_json([chat(n) for n in GOOD] + [s for s, _ in HOSTILE.values()])


def must_show_protobuf() -> bytes:
    """The same in protobuf, where each case can be expressed: a 20-digit count can only be text there,
    and nesting past our limit within the parser's is an array 40 deep (kvlists hit the parser at ~31)."""
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans

    def add(n: int, **attrs: Any) -> Any:
        sp = spans.add(trace_id=bytes.fromhex(TRACE), span_id=bytes.fromhex(span_id(n)), name=f"chat {MODEL}")
        sp.start_time_unix_nano, sp.end_time_unix_nano = T0 + n * 10**9, T0 + n * 10**9 + 5 * 10**8
        base = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic", "gen_ai.request.model": MODEL}
        for key, value in {**base, "gen_ai.usage.input_tokens": 41, "gen_ai.usage.output_tokens": 67, **attrs}.items():
            v = sp.attributes.add(key=key).value
            if isinstance(value, str):
                v.string_value = value
            elif isinstance(value, float):
                v.double_value = value
            elif isinstance(value, int):
                v.int_value = value
            else:
                value(v)
        return sp

    def deep_array(v: Any) -> None:
        for _ in range(40):
            v = v.array_value.values.add()
        v.string_value = "bottom"

    for n in GOOD:
        add(n)
    add(4, **{"gen_ai.usage.input_tokens": "99999999999999999999"})
    add(5, **{"gen_ai.usage.output_tokens": -5})
    add(6, **{"gen_ai.usage.output_tokens": math.nan})
    sp = add(7)
    sp.start_time_unix_nano = sp.end_time_unix_nano = 2**63
    add(8, deep=deep_array)
    add(9, **{"gen_ai.input.messages": "not json ["})
    add(10, **{"gen_ai.input.messages": 5})
    return request.SerializeToString()


def deep_json(depth: int = 500) -> bytes:
    """One span nested ``depth`` attribute levels deep (4 JSON levels each): past the JSON parser at 500.
    Written as text: no JSON encoder goes that deep either."""
    value = '{"kvlistValue": {"values": [{"key": "k", "value": ' * depth + '{"stringValue": "bottom"}' + "}]}}" * depth
    body = request_json([chat(1), chat(2, _kv("deep", {"stringValue": "HERE"}))]).decode()
    return body.replace('{"stringValue": "HERE"}', value).encode()


def deep_protobuf(depth: int = 500) -> bytes:
    request = ExportTraceServiceRequest()
    sp = (
        request.resource_spans.add()
        .scope_spans.add()
        .spans.add(trace_id=bytes.fromhex(TRACE), span_id=bytes.fromhex(span_id(1)), name="x")
    )
    sp.start_time_unix_nano, sp.end_time_unix_nano = T0, T0 + 1
    v = sp.attributes.add(key="deep").value
    for _ in range(depth):
        v = v.kvlist_value.values.add(key="k").value
    v.string_value = "bottom"
    return request.SerializeToString()
