"""Realistic GenAI agent spans for the ingest benchmarks, and their OTLP protobuf encoding.

Runs of 3–12 turns: a root ``invoke_agent``, ``chat`` spans with model, usage and
cache attributes, ``execute_tool`` spans, occasional guard events; optionally with
captured content: each call's request payload and answer (``gen_ai.output.messages``,
as our harness emits them). Deterministic for a seed; content draws nothing from
the random stream, so both variants have the same spans.
"""

from __future__ import annotations

import json
import random
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ledger import conventions as c
from ledger.spans import SpanEvent, SpanRecord

MS = 1_000_000
T0 = 1_790_000_000_000_000_000

WORDS = [
    "the",
    "account",
    "key",
    "rotate",
    "settings",
    "plan",
    "invoice",
    "refund",
    "shipment",
    "order",
    "status",
    "customer",
    "ticket",
    "error",
    "timeout",
    "retry",
    "search",
    "docs",
    "policy",
    "billing",
    "region",
    "latency",
    "cache",
    "prompt",
    "tool",
    "result",
    "summary",
    "escalate",
]
TOOLS = [
    {
        "name": f"tool_{i}",
        "description": f"Tool {i}: " + " ".join(WORDS[i : i + 12]) * 3,
        "input_schema": {"type": "object", "properties": {"q": {"type": "string"}, "limit": {"type": "integer"}}},
    }
    for i in range(6)
]
RESOURCE = {
    "service.name": "support-agent", "service.version": "1.4.0", "deployment.environment": "prod",
    "telemetry.sdk.name": "opentelemetry", "telemetry.sdk.language": "python", "telemetry.sdk.version": "1.45.2",
    "host.name": "worker-3",
}  # fmt: skip
SCOPE = ("turnledger.harness", "0.1.0")
# Spelled out, not ledger.conventions.OUTPUT_MESSAGES: --baseline runs this against older checkouts.
OUTPUT_MESSAGES = "gen_ai.output.messages"


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _agent_run(rng: random.Random, k: int, start: int, content: bool) -> list[SpanRecord]:
    trace, root = f"{rng.getrandbits(128):032x}", f"{rng.getrandbits(64):016x}"
    tenant = f"tenant-{k % 17}"
    spans: list[SpanRecord] = []
    clock = start + MS
    system = _text(rng, 300)
    messages: list[dict[str, Any]] = [{"role": "user", "content": _text(rng, 40)}]
    turns, cached = rng.randint(3, 12), 0
    for t in range(turns):
        sid = f"{rng.getrandbits(64):016x}"
        out = rng.randint(40, 600)
        write = rng.randint(200, 2500) if t else 4000
        read, cached = cached, cached + write
        attrs: dict[str, Any] = {
            c.OPERATION_NAME: "chat", c.PROVIDER_NAME: "anthropic", c.REQUEST_MODEL: "claude-sonnet-5",
            c.RESPONSE_MODEL: "claude-sonnet-5", c.CALL_SITE: "agent", c.ATTEMPT: 1, c.CALL_ID: sid, c.TENANT: tenant,
            c.INPUT_TOKENS: 20 + write + read, c.OUTPUT_TOKENS: out, c.CACHE_CREATION_INPUT_TOKENS: write,
            c.CACHE_READ_INPUT_TOKENS: read, c.FINISH_REASONS: ["tool_use" if t < turns - 1 else "end_turn"],
            "gen_ai.request.max_tokens": 8192, "gen_ai.response.id": f"msg_{sid}", "server.address": "api.anthropic.com",
        }  # fmt: skip
        if content:
            attrs[c.REQUEST_BODY] = json.dumps(
                {
                    "model": "claude-sonnet-5",
                    "max_tokens": 8192,
                    "system": [{"type": "text", "text": system}],
                    "tools": TOOLS,
                    "messages": messages,
                }
            )
        duration = 800 + out * 3
        spans.append(SpanRecord(trace, sid, "chat claude-sonnet-5", clock, clock + duration * MS, root, "CLIENT",
                                attributes=attrs, resource=RESOURCE, scope_name=SCOPE[0], scope_version=SCOPE[1]))  # fmt: skip
        clock += (duration + 5) * MS
        if t == turns - 1:
            if content:  # the final answer, which no later request contains
                answer = " ".join(WORDS[(k + i) % len(WORDS)] for i in range(out))
                attrs[OUTPUT_MESSAGES] = _answer([{"type": "text", "text": answer}], "end_turn")
            break
        calls = []
        for _ in range(rng.choice((1, 1, 2))):
            tid, name = f"{rng.getrandbits(64):016x}", f"tool_{rng.randrange(6)}"
            args, result = {"q": _text(rng, 5), "limit": 10}, _text(rng, rng.randint(20, 120))
            events: tuple[SpanEvent, ...] = ()
            if rng.random() < 0.05:
                events = (SpanEvent(c.EVENT_LOOP_TRIP, clock, {"shape": "repeat", "action": "nudge", "tool": name}),)
            tattrs = {c.OPERATION_NAME: "execute_tool", c.TOOL_NAME: name, c.TENANT: tenant,
                      "gen_ai.tool.call.id": f"toolu_{tid}", "gen_ai.tool.call.arguments": json.dumps(args),
                      "gen_ai.tool.call.result": result}  # fmt: skip
            spans.append(SpanRecord(trace, tid, f"execute_tool {name}", clock, clock + 150 * MS, root, "INTERNAL",
                                    attributes=tattrs, events=events, resource=RESOURCE, scope_name=SCOPE[0],
                                    scope_version=SCOPE[1]))  # fmt: skip
            calls.append((tid, name, args, result))
        clock += 160 * MS
        uses = [{"type": "tool_use", "id": f"toolu_{i}", "name": n, "input": a} for i, n, a, _ in calls]
        if content:
            attrs[OUTPUT_MESSAGES] = _answer(uses, "tool_use")
        messages = [
            *messages,
            {"role": "assistant", "content": uses},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": r} for i, _, _, r in calls]},
        ]  # fmt: skip
    rattrs = {c.OPERATION_NAME: "invoke_agent", c.AGENT_NAME: "support-agent", c.AGENT_VERSION: "1.4.0",
              c.PROMPT_VERSION: "v7", c.TENANT: tenant, c.STOP_CAUSE: "completed", c.CONVERSATION_ID: f"conv-{k}"}  # fmt: skip
    spans.append(SpanRecord(trace, root, "invoke_agent support-agent", start, clock, attributes=rattrs,
                            resource=RESOURCE, scope_name=SCOPE[0], scope_version=SCOPE[1]))  # fmt: skip
    return spans


def _answer(content: list[dict[str, Any]], finish_reason: str) -> str:
    return json.dumps([{"role": "assistant", "content": content, "finish_reason": finish_reason}])


def workload(n_spans: int, content: bool, seed: int = 7) -> tuple[list[SpanRecord], int]:
    """Spans of concurrent runs in the order they end (how an exporter sees them), and the run count."""
    rng = random.Random(seed)
    spans: list[SpanRecord] = []
    runs = 0
    while len(spans) < n_spans:
        spans += _agent_run(rng, runs, T0 + runs * 700 * MS, content)
        runs += 1
    spans.sort(key=lambda s: s.end_ns)
    return spans, runs


def small_requests(n: int, seed: int = 11) -> list[list[SpanRecord]]:
    """``n`` small requests, one whole agent run each (3–12 turns, without content), as an agent
    that exports at the end of its run sends them; other trace ids than ``workload``'s."""
    rng = random.Random(seed)
    return [_agent_run(rng, k, T0 + k * 700 * MS, content=False) for k in range(n)]


def _value(v: Any, av: Any) -> None:
    if isinstance(v, bool):
        av.bool_value = v
    elif isinstance(v, int):
        av.int_value = v
    elif isinstance(v, float):
        av.double_value = v
    elif isinstance(v, (list, tuple)):
        for x in v:
            _value(x, av.array_value.values.add())
    else:
        av.string_value = str(v)


def _attrs(attrs: dict[str, Any], target: Any) -> None:
    for k, v in attrs.items():
        kv = target.add()
        kv.key = k
        _value(v, kv.value)


_KINDS = ["UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"]


def encode_protobuf(spans: list[SpanRecord]) -> bytes:
    """One ExportTraceServiceRequest (all spans share one resource and scope here)."""
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    _attrs(spans[0].resource, rs.resource.attributes)
    ss = rs.scope_spans.add()
    ss.scope.name, ss.scope.version = spans[0].scope_name, spans[0].scope_version
    for s in spans:
        p = ss.spans.add()
        p.trace_id, p.span_id = bytes.fromhex(s.trace_id), bytes.fromhex(s.span_id)
        if s.parent_span_id:
            p.parent_span_id = bytes.fromhex(s.parent_span_id)
        p.name, p.kind = s.name, _KINDS.index(s.kind)
        p.start_time_unix_nano, p.end_time_unix_nano = s.start_ns, s.end_ns
        _attrs(s.attributes, p.attributes)
        for e in s.events:
            pe = p.events.add()
            pe.name, pe.time_unix_nano = e.name, e.time_ns
            _attrs(e.attributes, pe.attributes)
    return req.SerializeToString()
