"""OTLP log payloads (protobuf and JSON encodings) -> ``ledger.log_events.LogEvent``.

Both encodings are parsed by the official generated class (``ExportLogsServiceRequest``);
OTLP/JSON through ``json_format`` once its hex ids are rewritten (``collector.otlp_json_ids``).
Attribute values are read, and counted against ``ledger.limits``, by the same code as span
attributes (``collector.otlp``): a record past a bound is that record's ``problem`` (it is
rejected alone), a request past the request bound is refused whole (413).
"""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from ledger.errors import MalformedInput
from ledger.limits import MAX_SPAN_BYTES
from ledger.log_events import LogEvent

from .otlp import _Budget, _pb_attrs, _pb_value, _SpanProblem
from .otlp_json_ids import base64_ids
from .otlp_salvage import Rejected, field_bytes, salvage

__all__ = ["decode_logs_json", "decode_logs_protobuf"]


def decode_logs_protobuf(body: bytes) -> list[LogEvent]:
    request = ExportLogsServiceRequest()
    salvaged: list[Rejected] = []
    try:
        request.ParseFromString(body)
    except DecodeError as exc:  # invalid UTF-8 in one record costs that record only (collector.otlp_salvage)
        request = ExportLogsServiceRequest()
        salvaged = salvage(body, request, ("resourceLogs", "scopeLogs", "logRecords"), exc)
    except ValueError as exc:
        raise MalformedInput(f"not an OTLP ExportLogsServiceRequest protobuf: {exc}") from None
    events = _events(request, sizes=len(body) > MAX_SPAN_BYTES)
    events.extend(_rejected_record(r) for r in salvaged)
    return events


def _rejected_record(item: Rejected) -> LogEvent:
    """A record the parser refused, with the ids its bytes still hold (LogRecord fields 9 and 10)."""
    trace_id, _ = _id(field_bytes(item.raw, 9), 16, "traceId")
    span_id, _ = _id(field_bytes(item.raw, 10), 8, "spanId")
    return LogEvent(0, 0, None, trace_id=trace_id, span_id=span_id, problem=f"{item.where}: {item.problem}")


def decode_logs_json(body: bytes | str) -> list[LogEvent]:
    """Log records of an OTLP/JSON request; a body of the wrong shape raises MalformedInput."""
    try:
        doc = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise MalformedInput(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("resourceLogs"), list):
        raise MalformedInput("not OTLP/JSON logs: expected an object with a `resourceLogs` list")
    for i, rl in enumerate(doc["resourceLogs"]):
        for j, sl in enumerate(_list(rl, "scopeLogs", f"resourceLogs[{i}]")):
            for k, record in enumerate(_list(sl, "logRecords", f"resourceLogs[{i}].scopeLogs[{j}]")):
                base64_ids(record, f"resourceLogs[{i}].scopeLogs[{j}].logRecords[{k}]")
    request = ExportLogsServiceRequest()
    try:
        json_format.ParseDict(doc, request, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as exc:
        raise MalformedInput(f"not an OTLP/JSON ExportLogsServiceRequest: {str(exc)[:200]}") from None
    return _events(request, sizes=len(body) > MAX_SPAN_BYTES)


def _list(doc: Any, key: str, where: str) -> list[dict[str, Any]]:
    if not isinstance(doc, dict):
        raise MalformedInput(f"{where}: expected an object")
    value = doc.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(x, dict) for x in value):
        raise MalformedInput(f"{where}.{key}: expected a list of objects")
    return value


def _id(raw: bytes, size: int, where: str) -> tuple[str, str]:
    """An id as lowercase hex ("" if absent or all zeros: no context), and the problem of a malformed one."""
    if not raw or raw == bytes(size):
        return "", ""
    if len(raw) != size:
        return "", f"{where} is {len(raw)} bytes, not {size}"
    return raw.hex(), ""


def _events(request: ExportLogsServiceRequest, *, sizes: bool) -> list[LogEvent]:
    out: list[LogEvent] = []
    budget = _Budget()
    for i, rl in enumerate(request.resource_logs):
        try:
            resource = _pb_attrs(rl.resource.attributes, budget)  # one dict shared by the resource's records
        except _SpanProblem as exc:
            raise MalformedInput(f"resourceLogs[{i}].resource: {exc}") from None
        budget.end_span()
        for sl in rl.scope_logs:
            scope_name, scope_version = sl.scope.name, sl.scope.version
            for lr in sl.log_records:
                trace_id, bad_trace = _id(lr.trace_id, 16, "traceId")
                span_id, bad_span = _id(lr.span_id, 8, "spanId")
                problem = bad_trace or bad_span
                attributes: dict[str, Any] = {}
                body: Any = None
                try:
                    if sizes and (size := lr.ByteSize()) > MAX_SPAN_BYTES:
                        raise _SpanProblem(f"{size} bytes encoded, more than {MAX_SPAN_BYTES}")
                    attributes = _pb_attrs(lr.attributes, budget)
                    body = _pb_value(lr.body, budget) if lr.HasField("body") else None
                except _SpanProblem as exc:
                    attributes, body, problem = {}, None, f"log record: {exc}"
                budget.end_span()
                out.append(
                    LogEvent(
                        time_ns=lr.time_unix_nano,
                        observed_ns=lr.observed_time_unix_nano,
                        body=body,
                        attributes=attributes,
                        resource=resource,
                        scope_name=scope_name,
                        scope_version=scope_version,
                        trace_id=trace_id,
                        span_id=span_id,
                        event_name=lr.event_name,
                        severity_text=lr.severity_text,
                        problem=problem,
                    )
                )
    return out
