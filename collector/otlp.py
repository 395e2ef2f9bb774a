"""OTLP trace payloads (protobuf and JSON encodings) <-> ``ledger.SpanRecord``.

Structural problems (not JSON, not an ExportTraceServiceRequest) raise
``MalformedInput`` naming the problem; a single odd span (bad id, bad times) is
decoded as-is and left for ``ledger.ingest`` to reject on its own, so one bad
span never costs the batch its good ones.
"""

from __future__ import annotations

import base64
import gzip
import json
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from ledger.errors import MalformedInput
from ledger.spans import SpanEvent, SpanRecord

__all__ = ["decode_json", "decode_protobuf", "encode_json", "read_file"]

_KINDS = ["UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"]
_STATUS = ["UNSET", "OK", "ERROR"]


# --- protobuf -----------------------------------------------------------------------
# decode_protobuf is the OTLP/HTTP collector's hot path (~12 attributes a span), so it is
# written for speed: no Python-level function call per attribute in the common cases.
_KIND_NAMES = dict(enumerate(_KINDS))
_STATUS_NAMES = dict(enumerate(_STATUS))
# AnyValue oneof members whose getattr() already is the decoded value (str, int, float, bool).
_PLAIN = frozenset({"string_value", "int_value", "double_value", "bool_value"})


def _pb_value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which in _PLAIN:
        return getattr(v, which)
    if which == "array_value":
        # Non-empty strings read directly (as in _pb_attrs): arrays are mostly of strings.
        return [s if (s := x.string_value) else _pb_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return _pb_attrs(v.kvlist_value.values)
    if which == "bytes_value":
        return base64.b64encode(v.bytes_value).decode()
    return None


def _pb_attrs(kvs: Iterable[Any]) -> dict[str, Any]:
    # _pb_value inlined for the common cases, for speed (a Python call per attribute was
    # most of the cost): a non-empty string or non-zero int (nearly all GenAI attribute
    # values) can only be the oneof member that is set, so it is read directly; anything
    # else (0, "", doubles, bools, arrays, kvlists, bytes, no value) takes the call.
    return {
        kv.key: (s if (s := (v := kv.value).string_value) else i if (i := v.int_value) else _pb_value(v)) for kv in kvs
    }


def decode_protobuf(body: bytes) -> list[SpanRecord]:
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except (DecodeError, ValueError) as exc:
        raise MalformedInput(f"not an OTLP ExportTraceServiceRequest protobuf: {exc}") from None
    out: list[SpanRecord] = []
    append, attrs, kinds, statuses = out.append, _pb_attrs, _KIND_NAMES.get, _STATUS_NAMES.get
    for rs in request.resource_spans:
        resource = attrs(rs.resource.attributes)  # one dict shared by the resource's spans
        for ss in rs.scope_spans:
            scope_name, scope_version = ss.scope.name, ss.scope.version
            for sp in ss.spans:
                status, events = sp.status, sp.events
                # Positional, in SpanRecord's field order: measurably faster than keywords.
                append(
                    SpanRecord(
                        sp.trace_id.hex(),
                        sp.span_id.hex(),
                        sp.name,
                        sp.start_time_unix_nano,
                        sp.end_time_unix_nano,
                        sp.parent_span_id.hex(),
                        kinds(sp.kind, "UNSPECIFIED"),
                        statuses(status.code, "UNSET"),
                        status.message,
                        attrs(sp.attributes),
                        (
                            tuple(SpanEvent(e.name, e.time_unix_nano, attrs(e.attributes)) for e in events)
                            if events
                            else ()
                        ),
                        resource,
                        scope_name,
                        scope_version,
                    )
                )
    return out


# --- JSON (the OTLP/JSON encoding: hex ids, integers possibly as strings) ----------
def _json_value(v: dict[str, Any], where: str) -> Any:
    if not isinstance(v, dict) or not v:
        return None
    key, value = next(iter(v.items()))
    if key == "stringValue":
        return str(value)
    if key == "intValue":
        return int(value)
    if key == "doubleValue":
        return float(value)
    if key == "boolValue":
        return bool(value)
    if key == "arrayValue":
        return [_json_value(x, where) for x in (value or {}).get("values", [])]
    if key == "kvlistValue":
        return {kv["key"]: _json_value(kv.get("value", {}), where) for kv in (value or {}).get("values", [])}
    if key == "bytesValue":
        return str(value)
    raise MalformedInput(f"{where}: unknown attribute value type {key!r}")


def _json_attrs(kvs: Any, where: str) -> dict[str, Any]:
    if not isinstance(kvs, list):
        raise MalformedInput(f"{where}: attributes must be a list of {{key, value}}")
    try:
        return {kv["key"]: _json_value(kv.get("value", {}), f"{where}.{kv['key']}") for kv in kvs}
    except (KeyError, TypeError):
        raise MalformedInput(f"{where}: each attribute needs a `key`") from None


def _enum(value: Any, names: list[str], prefix: str) -> str:
    if isinstance(value, int):
        return names[value] if 0 <= value < len(names) else names[0]
    text = str(value or names[0]).removeprefix(prefix)
    return text if text in names else names[0]


def _json_span(sp: dict[str, Any], resource: dict[str, Any], scope: dict[str, Any], where: str) -> SpanRecord:
    try:
        status = sp.get("status") or {}
        return SpanRecord(
            trace_id=str(sp.get("traceId", "")).lower(),
            span_id=str(sp.get("spanId", "")).lower(),
            parent_span_id=str(sp.get("parentSpanId") or "").lower(),
            name=str(sp.get("name", "")),
            start_ns=int(sp.get("startTimeUnixNano", 0)),
            end_ns=int(sp.get("endTimeUnixNano", 0)),
            kind=_enum(sp.get("kind", 1), _KINDS, "SPAN_KIND_"),
            status_code=_enum(status.get("code", 0), _STATUS, "STATUS_CODE_"),
            status_message=str(status.get("message", "")),
            attributes=_json_attrs(sp.get("attributes", []), f"{where}.attributes"),
            events=tuple(
                SpanEvent(
                    str(e.get("name", "")),
                    int(e.get("timeUnixNano", 0)),
                    _json_attrs(e.get("attributes", []), f"{where}.events[{i}]"),
                )
                for i, e in enumerate(sp.get("events", []))
            ),
            resource=resource,
            scope_name=str(scope.get("name", "")),
            scope_version=str(scope.get("version", "")),
        )
    except (TypeError, ValueError, AttributeError) as exc:
        raise MalformedInput(f"{where}: {exc}") from None


def decode_json(body: bytes | str | dict[str, Any]) -> list[SpanRecord]:
    if isinstance(body, dict):
        doc = body
    else:
        try:
            doc = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise MalformedInput(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("resourceSpans"), list):
        raise MalformedInput("not OTLP/JSON: expected an object with a `resourceSpans` list")
    out = []
    for i, rs in enumerate(doc["resourceSpans"]):
        where = f"resourceSpans[{i}]"
        if not isinstance(rs, dict):
            raise MalformedInput(f"{where}: expected an object")
        resource = _json_attrs((rs.get("resource") or {}).get("attributes", []), f"{where}.resource")
        for j, ss in enumerate(rs.get("scopeSpans", [])):
            scope = ss.get("scope") or {}
            for k, sp in enumerate(ss.get("spans", [])):
                out.append(_json_span(sp, resource, scope, f"{where}.scopeSpans[{j}].spans[{k}]"))
    return out


def _any_value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, (list, tuple)):
        return {"arrayValue": {"values": [_any_value(x) for x in v]}}
    if isinstance(v, dict):
        return {"kvlistValue": {"values": [{"key": k, "value": _any_value(x)} for k, x in v.items()]}}
    return {"stringValue": str(v)}


def _kv(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _any_value(v)} for k, v in attrs.items()]


def encode_json(spans: Iterable[SpanRecord]) -> dict[str, Any]:
    """OTLP/JSON for spans, grouped by resource and scope (used for sample traces)."""
    groups: dict[str, dict[tuple[str, str], list[SpanRecord]]] = {}
    resources: dict[str, dict[str, Any]] = {}
    for s in spans:
        rkey = json.dumps(s.resource, sort_keys=True, default=str)
        resources[rkey] = s.resource
        groups.setdefault(rkey, {}).setdefault((s.scope_name, s.scope_version), []).append(s)
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _kv(resources[rkey])},
                "scopeSpans": [
                    {
                        "scope": {"name": name, "version": version},
                        "spans": [
                            {
                                "traceId": s.trace_id,
                                "spanId": s.span_id,
                                **({"parentSpanId": s.parent_span_id} if s.parent_span_id else {}),
                                "name": s.name,
                                "kind": _KINDS.index(s.kind) if s.kind in _KINDS else 1,
                                "startTimeUnixNano": str(s.start_ns),
                                "endTimeUnixNano": str(s.end_ns),
                                "attributes": _kv(s.attributes),
                                "events": [
                                    {"name": e.name, "timeUnixNano": str(e.time_ns), "attributes": _kv(e.attributes)}
                                    for e in s.events
                                ],
                                "status": {"code": _STATUS.index(s.status_code), "message": s.status_message}
                                if s.status_code != "UNSET"
                                else {},
                            }
                            for s in scope_spans
                        ],
                    }
                    for (name, version), scope_spans in scopes.items()
                ],
            }
            for rkey, scopes in groups.items()
        ]
    }


def _decompress(data: bytes) -> bytes:
    if data[:2] == b"\x1f\x8b":
        return gzip.decompress(data)
    if data[:1] == b"\x78":
        try:
            return zlib.decompress(data)
        except zlib.error:
            return data
    return data


def read_file(path: Path | str) -> list[SpanRecord]:
    """Spans from an OTLP file: JSON (``.json``, or one request per line in ``.jsonl``) or protobuf.

    Raises MalformedInput with the file name and the problem.
    """
    path = Path(path)
    try:
        data = _decompress(path.read_bytes())
    except OSError as exc:
        raise MalformedInput(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        stripped = data.lstrip()
        if stripped[:1] in (b"{", b"["):
            if path.suffix == ".jsonl" or (b"\n{" in stripped and stripped[:1] == b"{" and _is_jsonl(stripped)):
                out = []
                for n, line in enumerate(stripped.splitlines(), 1):
                    if line.strip():
                        try:
                            out += decode_json(line)
                        except MalformedInput as exc:
                            raise MalformedInput(f"line {n}: {exc}") from None
                return out
            return decode_json(stripped)
        return decode_protobuf(data)
    except MalformedInput as exc:
        raise MalformedInput(f"{path}: {exc}") from None


def _is_jsonl(data: bytes) -> bool:
    try:
        json.loads(data)
        return False
    except json.JSONDecodeError:
        return True
