"""OTLP logs (HTTP and gRPC) into the ledger: Claude Code's events, sent by the official OTLP log
exporters exactly as Claude Code shapes them, become charges (one per ``api_request``) and runs.

The shape is the CLI's own (2.1.197, its event emitter): scope ``com.anthropic.claude_code.events``,
body ``claude_code.<event>``, ``event.name``/``event.sequence``/``event.timestamp``, ``session.id``,
``prompt.id``, the user and organization, and for ``api_request`` the API's token counts
(``input_tokens`` EXCLUDING the cache), ``cost_usd`` and ``request_id``. Expected dollars come from
genai-prices directly, never from our price book.
"""

from __future__ import annotations

import json
from decimal import Decimal

import grpc
import pytest
from genai_prices import Usage, calc_price
from opentelemetry._logs import LogRecord
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetricExporter
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetricExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import LogRecordExportResult, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import Counter, MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    InMemoryMetricReader,
    MetricExportResult,
    MetricsData,
)
from opentelemetry.sdk.resources import Resource

from collector.receiver import CollectorServer
from ledger import queries as q
from ledger.claude_code import EVENTS_SCOPE
from ledger.report import build_report

from .conftest import MS, T0, count, request

TOKEN = "s3cret-logs-token"
SECRET = "sk-ant-api03-" + "Q" * 93 + "AA"  # an Anthropic API key's shape: the redaction policy knows it
MODEL = "claude-sonnet-4-5"  # a model genai-prices knows, as Claude Code names it
SESSION = "7d1c9f7e-1b7c-4b51-9d0e-2f0f6a1c0a11"
ORG = "org-5e0c"
# (prompt, input EXCLUDING cache, cache creation, cache read, output): what the fake API would bill.
REQUESTS = [
    ("prompt-1", 1200, 4000, 0, 310),
    ("prompt-1", 150, 900, 4000, 120),
    ("prompt-2", 6000, 0, 300, 95),  # more uncached input than cache: only the scope says it excludes the cache
]


def _truth(uncached: int, write: int, read: int, out: int) -> Decimal:
    """The price genai-prices gives this usage (its input count INCLUDES the cache)."""
    usage = Usage(input_tokens=uncached + write + read, cache_write_tokens=write, cache_read_tokens=read,
                  output_tokens=out)  # fmt: skip
    return Decimal(str(calc_price(usage, model_ref=MODEL, provider_id="anthropic").total_price))


def _common(prompt: str, seq: int) -> dict[str, object]:
    """The attributes Claude Code puts on every event."""
    return {
        "user.id": "d3adb33f" * 8, "session.id": SESSION, "organization.id": ORG, "user.email": "dev@example.com",
        "user.account_uuid": "acc-1", "terminal.type": "non-interactive", "event.name": "", "prompt.id": prompt,
        "event.timestamp": f"2026-09-21T10:00:{seq:02d}.000Z", "event.sequence": seq,
    }  # fmt: skip


def claude_code_records() -> list[LogRecord]:
    """One session, two prompts (each a user prompt and its api_requests), a tool result, as Claude Code emits them."""
    records = []
    seq = 0

    def event(name: str, prompt_id: str, at: int, **attrs: object) -> None:
        nonlocal seq
        attributes = {**_common(prompt_id, seq), "event.name": name, **attrs}
        records.append(
            LogRecord(timestamp=at, observed_timestamp=at, body=f"claude_code.{name}", attributes=attributes)
        )
        seq += 1

    at = T0
    event("user_prompt", "prompt-1", at, prompt_length="42", prompt="<REDACTED>")
    for i, (prompt, uncached, write, read, out) in enumerate(REQUESTS):
        at += 2000 * MS
        if i == 2:
            event("user_prompt", prompt, at - 1000 * MS, prompt_length="9", prompt="<REDACTED>")
        event(
            "api_request", prompt, at, model=MODEL, input_tokens=uncached, output_tokens=out,
            cache_read_tokens=read, cache_creation_tokens=write, cost_usd=float(_truth(uncached, write, read, out)),
            cost_usd_micros=int(_truth(uncached, write, read, out) * 1_000_000), duration_ms=1500,
            request_id=f"req_01{i:022d}", speed="normal", query_source="repl_main_thread",
        )  # fmt: skip
        if i == 0:
            event("tool_result", prompt, at + 100 * MS, tool_name="Bash", success="true", duration_ms="30")
    return records


def _send(protocol: str, server: CollectorServer, records: list[LogRecord], token: str | None = TOKEN):  # type: ignore[no-untyped-def]
    """Export ``records`` with the official OTLP log exporter of ``protocol``; the export result."""
    if protocol == "grpc":
        exporter = GrpcLogExporter(
            endpoint=server.grpc_url, insecure=True, headers=(("authorization", f"Bearer {token}"),), timeout=60
        )
    else:
        exporter = HttpLogExporter(
            endpoint=f"{server.url}/v1/logs", headers={"Authorization": f"Bearer {token}"}, timeout=60
        )
    results: list[LogRecordExportResult] = []

    class Recording(SimpleLogRecordProcessor):
        def on_emit(self, log_record):  # type: ignore[no-untyped-def]
            results.append(exporter.export([log_record]))

    provider = LoggerProvider(resource=Resource.create({"service.name": "claude-code", "service.version": "2.1.197"}))
    provider.add_log_record_processor(Recording(exporter))
    logger = provider.get_logger(EVENTS_SCOPE, "2.1.197")
    for record in records:
        logger.emit(record)
    provider.shutdown()
    return results


@pytest.fixture
def logs_server(make_server):  # type: ignore[no-untyped-def]
    return make_server(token=TOKEN, grpc_port=0, decode_workers=0)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_claude_code_api_requests_are_charged_once_and_sessions_become_runs(protocol, logs_server) -> None:  # type: ignore[no-untyped-def]
    records = claude_code_records()
    results = _send(protocol, logs_server, records)
    assert results == [LogRecordExportResult.SUCCESS] * len(records)
    with logs_server.readers.connection() as cur:
        charges = cur.execute(
            """SELECT uncached_input_tokens, cache_write_tokens, cache_read_tokens, output_tokens, cache_write_1h_tokens,
                      usd_input + usd_output + usd_cache_write + usd_cache_read + usd_cache_write_1h,
                      provider, model, unpriced, token_convention, tenant
               FROM charges ORDER BY start_time"""
        ).fetchall()
        runs = cur.execute(
            "SELECT conversation_id, tenant, agent_name, model_calls, tool_calls, usd_total FROM runs ORDER BY started_at"
        ).fetchall()
        reported = cur.execute(
            "SELECT sum(CAST(json_extract_string(s.attributes, '$.\"turnledger.cost.usd\"') AS DECIMAL(38,12))) "
            "FROM charges c JOIN spans s USING (trace_id, span_id)"
        ).fetchone()
    assert [r[:5] for r in charges] == [(u, w, r, o, 0) for _, u, w, r, o in REQUESTS]
    assert [r[5] for r in charges] == [_truth(u, w, r, o) for _, u, w, r, o in REQUESTS]
    assert {r[6:] for r in charges} == {("anthropic", MODEL, False, "excludes_cache", ORG)}
    # Two prompts: two runs, both of the one session, the organization their tenant.
    assert [r[:5] for r in runs] == [(SESSION, ORG, "claude-code", 2, 1), (SESSION, ORG, "claude-code", 1, 0)]
    assert sum(r[5] for r in runs) == sum(_truth(u, w, r, o) for _, u, w, r, o in REQUESTS)
    # Claude Code's own cost_usd is kept beside our price (here: the same genai-prices figure).
    assert reported[0] == sum(_truth(u, w, r, o) for _, u, w, r, o in REQUESTS)
    # An exporter's retry of the same records stores nothing twice.
    _send(protocol, logs_server, records)
    assert count(logs_server, "SELECT count(*) FROM charges") == len(REQUESTS)
    assert count(logs_server, "SELECT count(*) FROM spans") == len(records)


def test_logs_door_is_the_traces_door(logs_server) -> None:  # type: ignore[no-untyped-def]
    """Token, media type, malformed bodies: answered on /v1/logs as on /v1/traces (never a 500)."""
    url = f"{logs_server.url}/v1/logs"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert _send("http", logs_server, claude_code_records()[:1], token="wrong") == [LogRecordExportResult.FAILURE]
    assert count(logs_server, "SELECT count(*) FROM spans") == 0
    assert request(url, "POST", b"{}", {"Content-Type": "application/json"}).status == 401
    assert request(url, "POST", b"x", {**auth, "Content-Type": "text/plain"}).status == 415
    bad = request(url, "POST", b"\xff\x00garbage", {**auth, "Content-Type": "application/x-protobuf"})
    assert bad.status == 400
    assert request(url, "POST", b'{"resourceLogs": 3}', {**auth, "Content-Type": "application/json"}).status == 400
    bad_id = {"resourceLogs": [{"scopeLogs": [{"logRecords": [{"traceId": "zz", "timeUnixNano": "1"}]}]}]}
    reply = request(url, "POST", json.dumps(bad_id).encode(), {**auth, "Content-Type": "application/json"})
    assert reply.status == 400 and "traceId" in reply.json()["message"]
    with grpc.insecure_channel(f"127.0.0.1:{logs_server.grpc_port}") as channel:
        call = channel.unary_unary("/opentelemetry.proto.collector.logs.v1.LogsService/Export")
        with pytest.raises(grpc.RpcError) as refused:
            call(b"", metadata=(("authorization", "Bearer wrong"),), timeout=60)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED


def _otlp_json_logs(records: list[dict[str, object]], app_logs: list[dict[str, object]]) -> bytes:
    return json.dumps(
        {
            "resourceLogs": [
                {
                    "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "claude-code"}}]},
                    "scopeLogs": [
                        {"scope": {"name": EVENTS_SCOPE, "version": "2.1.197"}, "logRecords": records},
                        {"scope": {"name": "my.app"}, "logRecords": app_logs},
                    ],
                }
            ]
        }
    ).encode()


def _record(seq: int, **attrs: object) -> dict[str, object]:
    values = {**_common("prompt-x", seq), "event.name": "api_request", "model": MODEL, "input_tokens": 10,
              "output_tokens": 5, "cache_read_tokens": 0, "cache_creation_tokens": 0, "duration_ms": 100, **attrs}  # fmt: skip

    def any_value(v: object) -> dict[str, object]:
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v)}
        if isinstance(v, float):
            return {"doubleValue": v}
        return {"stringValue": str(v)}

    return {
        "timeUnixNano": str(T0 + seq * 1000 * MS),
        "body": {"stringValue": "claude_code.api_request"},
        "attributes": [{"key": k, "value": any_value(v)} for k, v in values.items()],
    }


def test_a_bad_record_costs_only_itself_and_every_string_is_redacted(logs_server) -> None:  # type: ignore[no-untyped-def]
    secret = SECRET
    records = [
        _record(0, **{"user.email": "alice@example.com", "note": f"key={secret}"}),
        {**_record(1), "timeUnixNano": "0"},  # no time at all: rejected alone
        _record(2, input_tokens="lots"),  # no token count: kept, flagged invalid_usage (never a silent $0)
    ]
    app_logs = [{"timeUnixNano": str(T0), "body": {"stringValue": "GET /health 200"}}]  # not stored, said so
    reply = request(
        f"{logs_server.url}/v1/logs", "POST", _otlp_json_logs(records, app_logs),
        {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )  # fmt: skip
    assert reply.status == 200
    body = reply.json()
    assert int(body["partialSuccess"]["rejectedLogRecords"]) == 1
    message = body["partialSuccess"]["errorMessage"]
    assert "bad times" in message and "invalid_usage" in message and "1 log record(s) not stored" in message
    with logs_server.readers.connection() as cur:
        stored = cur.execute("SELECT attributes::VARCHAR, resource::VARCHAR FROM spans").fetchall()
        flags = cur.execute("SELECT invalid_usage FROM charges ORDER BY start_time").fetchall()
    assert len(stored) == 2 and flags == [(False,), (True,)]
    text = " ".join(a + r for a, r in stored)
    assert secret not in text and "alice@example.com" not in text
    assert "[REDACTED" in text


def _claude_code_metrics(temporality: AggregationTemporality) -> list[MetricsData]:
    """Claude Code's cost and token counters for REQUESTS, collected after each prompt (one export each)."""
    reader = InMemoryMetricReader(preferred_temporality={Counter: temporality})
    provider = MeterProvider(resource=Resource.create({"service.name": "claude-code"}), metric_readers=[reader])
    meter = provider.get_meter(EVENTS_SCOPE.removesuffix(".events"), "2.1.197")
    cost = meter.create_counter("claude_code.cost.usage", unit="USD")
    tokens = meter.create_counter("claude_code.token.usage", unit="tokens")
    collected = []
    for prompt in ("prompt-1", "prompt-2"):
        for _, uncached, write, read, out in (r for r in REQUESTS if r[0] == prompt):
            where = {"session.id": SESSION, "organization.id": ORG, "model": MODEL, "prompt.id": prompt}
            cost.add(float(_truth(uncached, write, read, out)), where)
            for kind, n in (("input", uncached), ("output", out), ("cacheRead", read), ("cacheCreation", write)):
                tokens.add(n, {**where, "type": kind})
        collected.append(reader.get_metrics_data())
    provider.shutdown()
    return collected


@pytest.mark.parametrize(
    ("protocol", "temporality"),
    [("http", AggregationTemporality.DELTA), ("grpc", AggregationTemporality.CUMULATIVE)],
)
def test_metrics_are_a_cross_check_never_a_charge(protocol, temporality, logs_server) -> None:  # type: ignore[no-untyped-def]
    if protocol == "grpc":
        exporter = GrpcMetricExporter(
            endpoint=logs_server.grpc_url, insecure=True, headers=(("authorization", f"Bearer {TOKEN}"),), timeout=60
        )
    else:
        exporter = HttpMetricExporter(
            endpoint=f"{logs_server.url}/v1/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60
        )
    exports = _claude_code_metrics(temporality)
    for data in (*exports, exports[-1]):  # the last one twice, as an exporter's retry sends it
        assert exporter.export(data) == MetricExportResult.SUCCESS
    truth = sum(_truth(u, w, r, o) for _, u, w, r, o in REQUESTS)
    with logs_server.readers.connection() as cur:
        assert cur.execute("SELECT count(*) FROM charges").fetchone() == (0,)  # a metric is never charged
        points = cur.execute(
            "SELECT name, temporality, count(*) FROM metric_points GROUP BY ALL ORDER BY name"
        ).fetchall()
    # A point per series (one per prompt, and per token type) and export; a cumulative export repeats the
    # first prompt's series, a delta one does not; the retry added nothing.
    per_export = 3 if temporality == AggregationTemporality.CUMULATIVE else 2
    kind = temporality.name.lower()
    assert points == [("claude_code.cost.usage", kind, per_export), ("claude_code.token.usage", kind, 4 * per_export)]
    with logs_server.readers.connection() as cur:  # the token counter's total, read the same way
        (tokens,) = q.records(cur, q.reported_cost(metric="claude_code.token.usage"))
    assert tokens["metric_usd"] == sum(sum(r[1:]) for r in REQUESTS)
    # With the events too, the report shows our total beside Claude Code's own two figures: all agree.
    _send(protocol, logs_server, claude_code_records())
    with logs_server.readers.connection() as cur:
        crosscheck = build_report(cur)["reported_cost"]
    assert crosscheck == {
        "ours_usd": float(truth), "reported_calls": 3, "ours_for_reported_usd": float(truth),
        "reported_usd": float(truth), "metric_usd": float(truth), "metric_points": per_export,
    }  # fmt: skip


def test_metric_points_that_cannot_be_stored_are_named(logs_server) -> None:  # type: ignore[no-untyped-def]
    def point(value: dict[str, object], time: str = str(T0)) -> dict[str, object]:
        return {"timeUnixNano": time, **value, "attributes": [{"key": "token", "value": {"stringValue": SECRET}}]}

    body = {
        "resourceMetrics": [{"scopeMetrics": [{"metrics": [
            {"name": "claude_code.cost.usage", "unit": "USD", "sum": {"aggregationTemporality": 1, "isMonotonic": True,
             "dataPoints": [point({"asDouble": 0.25}), point({"asDouble": 0.5}, "0"), point({"asInt": "3"}, str(T0 + MS))]}},
            {"name": "latency", "histogram": {"aggregationTemporality": 1, "dataPoints": [{"timeUnixNano": str(T0)}]}},
        ]}]}]
    }  # fmt: skip
    reply = request(
        f"{logs_server.url}/v1/metrics", "POST", json.dumps(body).encode(),
        {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )  # fmt: skip
    assert reply.status == 200, reply.body
    partial = reply.json()["partialSuccess"]
    assert int(partial["rejectedDataPoints"]) == 2
    assert "timeUnixNano 0" in partial["errorMessage"] and "histogram" in partial["errorMessage"]
    with logs_server.readers.connection() as cur:
        rows = cur.execute("SELECT value, attributes::VARCHAR FROM metric_points ORDER BY time").fetchall()
    assert [r[0] for r in rows] == [Decimal("0.25"), Decimal(3)]
    assert all(SECRET not in r[1] and "[REDACTED" in r[1] for r in rows)
    garbage = request(
        f"{logs_server.url}/v1/metrics", "POST", b"\x0a\xff\xff", {"Authorization": f"Bearer {TOKEN}",
        "Content-Type": "application/x-protobuf"},
    )  # fmt: skip
    assert garbage.status == 400


def test_genai_evaluation_log_events_are_judgments_of_their_span(logs_server) -> None:  # type: ignore[no-untyped-def]
    """``gen_ai.evaluation.result`` sent as a log record (the official exporter, in the judged span's context)
    is read as its span-event form is; without a span to judge it is named and not stored."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import set_span_in_context

    tracer = TracerProvider().get_tracer("my.agent")
    span = tracer.start_span("chat claude-sonnet-4-5")
    judged = span.get_span_context()
    attrs = {"gen_ai.evaluation.name": "relevance", "gen_ai.evaluation.score.value": 0.25,
             "gen_ai.evaluation.score.label": "irrelevant", "gen_ai.evaluation.explanation": f"leaked {SECRET}"}  # fmt: skip
    with_context = LogRecord(timestamp=T0, event_name="gen_ai.evaluation.result", attributes=attrs,
                             context=set_span_in_context(span))  # fmt: skip
    without = LogRecord(timestamp=T0, event_name="gen_ai.evaluation.result", attributes=attrs)
    span.end()
    for _ in range(2):  # the second: a retry, one row still
        assert _send("http", logs_server, [with_context, without]) == [LogRecordExportResult.SUCCESS] * 2
    with logs_server.readers.connection() as cur:
        rows = cur.execute(
            "SELECT trace_id, span_id, name, score, label, explanation, source FROM evaluations"
        ).fetchall()
    assert len(rows) == 1
    trace_id, span_id, name, score, label, explanation, source = rows[0]
    assert (trace_id, span_id) == (f"{judged.trace_id:032x}", f"{judged.span_id:016x}")
    assert (name, score, label, source) == ("relevance", 0.25, "irrelevant", "otel")
    assert SECRET not in explanation and "[REDACTED" in explanation
    body = request(
        f"{logs_server.url}/v1/logs", "POST",
        _otlp_json_logs([], [{"timeUnixNano": str(T0), "eventName": "gen_ai.evaluation.result"}]),
        {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    ).json()  # fmt: skip
    assert "names no span it judges" in body["partialSuccess"]["errorMessage"]
