"""The three OTLP signals the receiver takes, behind one door: traces, logs, metrics.

Each arrives on its own path (``POST /v1/traces``, ``/v1/logs``, ``/v1/metrics``) and gRPC
service (``TraceService``, ``LogsService``, ``MetricsService``, each ``Export``), and goes
through the same steps (token, size limits, decode slots, the writer's commit, 200 only
after it, partial success); only what its body decodes to differs:

* traces: spans (``collector.otlp``);
* logs: the events the ledger knows, as the spans they stand for (``ledger.log_events``:
  Claude Code's ``api_request`` becomes a charge like any model-call span), and GenAI
  evaluation events as the judgments their span-event form gives;
* metrics: number data points, stored as a cross-check series (``ledger.metrics``), never charged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

import pyarrow as pa
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from collector.otlp_logs import decode_logs_json, decode_logs_protobuf
from collector.otlp_metrics import decode_metrics_json, decode_metrics_protobuf
from ledger.log_events import spans_of
from ledger.metrics import prepare_points
from ledger.pricing import PriceBook
from ledger.redact import default_policy
from ledger.rows import PreparedBatch, judgment_batch, prepare
from ledger.spans import SpanRecord

from .defaults import DEFAULT_MAX_DECODED_BYTES
from .otlp_http import PROTOBUF, decode_body, decompress

__all__ = ["BY_PATH", "LOGS", "METRICS", "SIGNALS", "TRACES", "Signal", "prepare_signal"]

TRACES, LOGS, METRICS = "traces", "logs", "metrics"


@dataclass(frozen=True)
class Signal:
    name: str
    path: str  # the OTLP/HTTP path
    request: str  # the request message's name, for error messages
    service: str  # the gRPC service's full name
    noun: str  # what one item is called in a partial-success message
    response: Callable[[], Message]  # the Export response message class
    rejected_field: str  # partial_success's count of rejected items


def _signal(name: str, module: Any, service: str, request: str, response: str, noun: str, rejected: str) -> Signal:
    full = module.DESCRIPTOR.services_by_name[service].full_name
    return Signal(name, f"/v1/{name}", request, full, noun, getattr(module, response), rejected)


SIGNALS = {
    TRACES: _signal(
        TRACES, trace_service_pb2, "TraceService", "ExportTraceServiceRequest", "ExportTraceServiceResponse",
        "span", "rejected_spans",
    ),
    LOGS: _signal(
        LOGS, logs_service_pb2, "LogsService", "ExportLogsServiceRequest", "ExportLogsServiceResponse",
        "log record", "rejected_log_records",
    ),
    METRICS: _signal(
        METRICS, metrics_service_pb2, "MetricsService", "ExportMetricsServiceRequest", "ExportMetricsServiceResponse",
        "data point", "rejected_data_points",
    ),
}  # fmt: skip
BY_PATH = {s.path: s for s in SIGNALS.values()}


def prepare_signal(
    body: bytes | bytearray,
    kind: str,
    signal: str,
    prices: PriceBook | None,
    *,
    redact_content: bool,
    encoding: str | None = None,
    max_decoded_bytes: int = DEFAULT_MAX_DECODED_BYTES,
) -> PreparedBatch:
    """The rows of one OTLP body of ``signal``; raises MalformedInput (or RequestTooLarge, BodyTooLarge,
    UnsupportedEncoding) for a bad body. ``body`` is as received: with ``encoding`` it is inflated here,
    to at most ``max_decoded_bytes``, so a decode worker is sent the compressed bytes (a gzip body of 60 MiB
    inflated crossed the pipe at 8 MiB, not 60), and the inflated copy is dropped once parsed."""
    if encoding is not None:
        body = decompress(body, encoding, max_decoded_bytes)
    if signal == TRACES:
        records = decode_body(body, kind)  # lazy: parsed on prepare's first span, then the bytes are dropped
        del body  # ... held by nothing else meanwhile
        return _prepare_spans(records, prices, redact_content=redact_content)
    body = bytes(body) if isinstance(body, bytearray) else body  # a large inflated one (copied: logs, metrics)
    if signal == LOGS:
        policy = default_policy() if redact_content else None
        events = decode_logs_protobuf(body) if kind == PROTOBUF else decode_logs_json(body)
        del body
        logged = spans_of(events, policy if policy is not None and policy.enabled else None)
        batch = prepare(logged.spans, prices, redact_content=redact_content)
        if logged.judgments:  # committed with the spans, as a judgment a span event carries is
            judged = judgment_batch(logged.judgments)
            batch.rows.setdefault("evaluations", []).extend(judged.rows["evaluations"])
            for trace, start in judged.first_starts.items():  # (ledger.runs.earliest, without its DuckDB import)
                batch.first_starts[trace] = min(start, batch.first_starts.get(trace, start))
            batch.received += len(logged.judgments)
        batch.flagged += logged.notes
        if logged.unread:
            batch.flagged.append(f"{logged.unread} log record(s) not stored: no event turnledger reads")
        return batch
    points = decode_metrics_protobuf(body) if kind == PROTOBUF else decode_metrics_json(body)
    del body
    return prepare_points(points, redact_content=redact_content)


# A body of more spans than this is turned into rows this many spans at a time, each part's rows made Arrow
# before the next part's are built: a 60 MiB-inflated body's rows as Python objects took ~65 MiB at once,
# as Arrow they take ~30 (#41 item 7). An exporter's usual batch (512 spans) is one part, as before.
SPANS_AT_ONCE = 2048


def _prepare_spans(records: Iterator[SpanRecord], prices: PriceBook | None, *, redact_content: bool) -> PreparedBatch:
    """``prepare(records)``, a part at a time for a large body (``SPANS_AT_ONCE``). Parts are prepared apart: a
    content block that two parts share is a row in each (``ledger.write`` stores it once, as it does one
    that an earlier request stored)."""
    batch = prepare(islice(records, SPANS_AT_ONCE), prices, redact_content=redact_content)
    if batch.received < SPANS_AT_ONCE:
        return batch  # the whole body: its rows stay Python until the writer needs them (as one batch)
    parts = [batch.to_arrow()]
    while batch.received == SPANS_AT_ONCE:
        batch = prepare(islice(records, SPANS_AT_ONCE), prices, redact_content=redact_content)
        if batch.received:
            parts.append(batch.to_arrow())
    return _joined(parts)


def _joined(parts: list[PreparedBatch]) -> PreparedBatch:
    """One batch of the rows of ``parts`` (each already Arrow), in their order."""
    first_starts: dict[str, int] = {}
    for part in parts:
        for trace, start in part.first_starts.items():
            if start < first_starts.get(trace, start + 1):
                first_starts[trace] = start
    names = dict.fromkeys(name for part in parts for name in part.tables)
    return PreparedBatch(
        received=sum(part.received for part in parts),
        rejected=[r for part in parts for r in part.rejected],
        first_starts=first_starts,
        unpriced_models=set().union(*(part.unpriced_models for part in parts)),
        rows={},
        tables={name: pa.concat_tables([p.tables[name] for p in parts if name in p.tables]) for name in names},
        flagged=[f for part in parts for f in part.flagged],
    )
