"""OTLP trace payloads (protobuf and JSON encodings) <-> ``ledger.SpanRecord``.

Structural problems (not JSON, not an ExportTraceServiceRequest, a body of the
wrong shape) raise ``MalformedInput`` naming the problem; a single odd span (bad
id, bad times, a field that cannot be decoded) is decoded as far as it goes and
left for ``ledger.ingest`` to reject on its own (``SpanRecord.problem``), so one
bad span never costs the batch its good ones.
"""

from __future__ import annotations

import base64
import gzip
import json
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, cast

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from ledger.errors import MalformedInput
from ledger.limits import (
    INT64_MAX,
    INT64_MIN,
    MAX_ATTRIBUTE_DEPTH,
    MAX_ATTRIBUTES,
    MAX_EVENTS,
    MAX_REQUEST_VALUES,
    MAX_SPAN_BYTES,
    MAX_SPAN_VALUES,
)
from ledger.spans import Base64Bytes, SpanEvent, SpanLink, SpanRecord

from .otlp_salvage import Rejected, _split, field_bytes, salvage
from .otlp_salvage import _bad_utf8 as bad_utf8  # the salvage's own readers of the wire format
from .otlp_salvage import _Structural as Structural

__all__ = [
    "RequestTooLarge", "decode_json", "decode_protobuf", "encode_json", "iter_json", "iter_protobuf", "read_file",
    "read_file_parts",
]  # fmt: skip

_KINDS = ["UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"]
_STATUS = ["UNSET", "OK", "ERROR"]


class _SpanProblem(ValueError):
    """A field of one span cannot be decoded (or is past ``ledger.limits``); the message names it."""


class _SpanTooLarge(_SpanProblem):
    """The span as a whole is past a bound (its values or its size), not one attribute."""


class RequestTooLarge(MalformedInput):
    """More attribute values in one request than ``ledger.limits.MAX_REQUEST_VALUES`` (413):
    decoding stops there, so what a request makes the collector hold stays bounded."""


class _Budget:
    """The attribute values one request may still decode: ``MAX_SPAN_VALUES`` for the span being
    decoded and ``MAX_REQUEST_VALUES`` for the whole request, nested elements included. Counted
    by list lengths as each list is reached, so nothing past a bound is ever built."""

    __slots__ = ("span_left", "spent")

    def __init__(self) -> None:
        self.span_left = MAX_SPAN_VALUES
        self.spent = 0  # by the spans before this one (the values each reached)

    def take(self, n: int) -> None:
        self.span_left -= n
        if self.span_left < 0:
            self.overdrawn()

    @staticmethod
    def overdrawn() -> None:
        raise _SpanTooLarge(f"more than {MAX_SPAN_VALUES} attribute values (its events' and nested ones included)")

    def end_span(self) -> None:
        """Charge the values the span reached to the request, and start the next span's count."""
        self.spent += MAX_SPAN_VALUES - self.span_left
        self.span_left = MAX_SPAN_VALUES
        if self.spent > MAX_REQUEST_VALUES:
            self.refuse()

    @staticmethod
    def refuse() -> None:
        raise RequestTooLarge(
            f"more than {MAX_REQUEST_VALUES} attribute values in one request (nothing written): export smaller batches"
        )


# --- protobuf -----------------------------------------------------------------------
# decode_protobuf is the OTLP/HTTP collector's hot path (~12 attributes a span), so it is
# written for speed: no Python-level function call per attribute in the common cases.
_KIND_NAMES = dict(enumerate(_KINDS))
_STATUS_NAMES = dict(enumerate(_STATUS))
# AnyValue oneof members whose getattr() already is the decoded value (str, int, float, bool).
_PLAIN = frozenset({"string_value", "int_value", "double_value", "bool_value"})


def _pb_value(v: AnyValue, budget: _Budget, depth: int = 0) -> Any:
    which = v.WhichOneof("value")
    if which in _PLAIN:
        return getattr(v, which)
    if depth >= MAX_ATTRIBUTE_DEPTH:  # the parser's own limit lets arrays nest ~47 deep
        raise _SpanProblem(f"an attribute value is nested deeper than {MAX_ATTRIBUTE_DEPTH} levels")
    if which == "array_value":
        values = v.array_value.values
        budget.take(len(values))
        # Non-empty strings read directly (as in _pb_attrs): arrays are mostly of strings.
        return [s if (s := x.string_value) else _pb_value(x, budget, depth + 1) for x in values]
    if which == "kvlist_value":
        return _pb_attrs(v.kvlist_value.values, budget, depth + 1)
    if which == "bytes_value":  # typed, so that redaction reads the bytes and not their base64
        return Base64Bytes(base64.b64encode(v.bytes_value).decode())
    return None


def _pb_attrs(kvs: Any, budget: _Budget, depth: int = 0) -> dict[str, Any]:
    # _pb_value inlined for the common cases, for speed (a Python call per attribute was
    # most of the cost): a non-empty string or non-zero int (nearly all GenAI attribute
    # values) can only be the oneof member that is set, so it is read directly; anything
    # else (0, "", doubles, bools, arrays, kvlists, bytes, no value) takes the call.
    if len(kvs) > MAX_ATTRIBUTES:
        raise _SpanProblem(f"{len(kvs)} attributes, more than {MAX_ATTRIBUTES}")
    budget.span_left -= len(kvs)  # budget.take, inlined: this is the hot path
    if budget.span_left < 0:
        budget.overdrawn()
    if depth:
        return {kv.key: _pb_value(kv.value, budget, depth) for kv in kvs}
    return {
        kv.key: (s if (s := (v := kv.value).string_value) else i if (i := v.int_value) else _pb_value(v, budget))
        for kv in kvs
    }


def _pb_where(sp: Any, exc: _SpanProblem) -> str:
    """The problem of a span past the limits, naming the attribute (found again: the rare path)."""
    for prefix, kvs in (
        ("attributes", sp.attributes),
        *((f"events[{i}].attributes", e.attributes) for i, e in enumerate(sp.events)),
    ):
        for kv in kvs:
            try:
                _pb_value(kv.value, _Budget())
            except _SpanProblem as found:
                return f"{prefix}.{kv.key}: {found}"
    return f"attributes: {exc}"  # a count past the limits


def _pb_events(events: Any, budget: _Budget) -> tuple[SpanEvent, ...]:
    if len(events) > MAX_EVENTS:
        raise _SpanProblem(f"{len(events)} events, more than {MAX_EVENTS}")
    return tuple(SpanEvent(e.name, e.time_unix_nano, _pb_attrs(e.attributes, budget)) for e in events)


def _pb_links(links: Any, budget: _Budget) -> tuple[SpanLink, ...]:
    if len(links) > MAX_EVENTS:
        raise _SpanProblem(f"{len(links)} links, more than {MAX_EVENTS}")
    return tuple(SpanLink(x.trace_id.hex(), x.span_id.hex(), _pb_attrs(x.attributes, budget)) for x in links)


def decode_protobuf(body: bytes) -> list[SpanRecord]:
    return list(iter_protobuf(body))


def iter_protobuf(body: bytes | bytearray) -> Iterator[SpanRecord]:
    """``decode_protobuf``'s spans one at a time: a consumer that builds rows as they come
    (``ledger.rows.prepare``) never holds every span record at once (a 60 MiB body's records
    took ~160 MiB), and the body is dropped once parsed. MalformedInput may come mid-way."""
    salvaged: list[Rejected] = []
    resources = _streamed(body, salvaged) if len(body) >= STREAMED_BYTES else None
    if resources is None:
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except DecodeError as exc:  # invalid UTF-8 in one span costs that span only (collector.otlp_salvage)
            request = ExportTraceServiceRequest()
            salvaged = salvage(bytes(body), request, ("resourceSpans", "scopeSpans", "spans"), exc)
        except ValueError as exc:
            raise MalformedInput(f"not an OTLP ExportTraceServiceRequest protobuf: {exc}") from None
        resources = ((rs.resource, ((ss.scope, ss.spans) for ss in rs.scope_spans)) for rs in request.resource_spans)
    # No span can be larger than the body: its size is only worth asking of a large body.
    sizes = len(body) > MAX_SPAN_BYTES
    del body  # parsed (or, streamed, held by the spans' views only)
    attrs, kinds, statuses = _pb_attrs, _KIND_NAMES.get, _STATUS_NAMES.get
    budget = _Budget()
    spent = 0  # budget's request count, kept here (see below)
    for i, (resource_message, scopes) in enumerate(resources):
        try:
            resource = attrs(resource_message.attributes, budget)  # one dict shared by the resource's spans
        except _SpanProblem as exc:  # shared by every span below: the request is malformed
            raise MalformedInput(f"resourceSpans[{i}].resource: {exc}") from None
        spent += MAX_SPAN_VALUES - budget.span_left
        budget.span_left = MAX_SPAN_VALUES
        for scope, spans in scopes:
            scope_name, scope_version = scope.name, scope.version
            for sp in spans:
                status, events, links = sp.status, sp.events, sp.links
                problem = ""
                try:  # a value past the limits costs its span only (ingest rejects it, naming it)
                    if sizes and (size := sp.ByteSize()) > MAX_SPAN_BYTES:
                        raise _SpanTooLarge(f"{size} bytes encoded, more than {MAX_SPAN_BYTES}")
                    attributes = attrs(sp.attributes, budget)
                    decoded_events = _pb_events(events, budget) if events else ()
                    decoded_links = _pb_links(links, budget) if links else ()
                except _SpanTooLarge as exc:
                    attributes, decoded_events, decoded_links, problem = {}, (), (), f"span: {exc}"
                except _SpanProblem as exc:
                    attributes, decoded_events, decoded_links, problem = {}, (), (), _pb_where(sp, exc)
                # budget.end_span, inlined (a method call per span was 3% of this loop)
                spent += MAX_SPAN_VALUES - budget.span_left
                budget.span_left = MAX_SPAN_VALUES
                if spent > MAX_REQUEST_VALUES:
                    budget.refuse()
                # Positional, in SpanRecord's field order: measurably faster than keywords.
                yield (
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
                        attributes,
                        decoded_events,
                        resource,
                        scope_name,
                        scope_version,
                        problem,
                        decoded_links,
                    )
                )
    yield from map(_rejected_span, salvaged)


# A body this large is parsed a span at a time (``_streamed``): parsed whole, its message took ~80 MiB
# for a 60 MiB body, held beside the body while parsing and beside the rows after (#41 item 7). An
# exporter's usual batch is far smaller and parsed whole (one call, the fastest).
STREAMED_BYTES = 16 << 20
_REFUSED = "not an OTLP ExportTraceServiceRequest protobuf"
_Resources = Iterator[tuple[Any, Iterator[tuple[Any, Iterable[Any]]]]]


def _streamed(body: bytes | bytearray, salvaged: list[Rejected]) -> _Resources | None:
    """The request's resources, each with its scopes and their spans, read from the wire: a resource's and
    a scope's own fields parsed here, each span only when iterated (a view of ``body``, parsed then).
    None if the framing or a resource's or scope's own fields do not parse: the whole-body path decides
    then, as for any body. A span that does not parse for invalid UTF-8 is added to ``salvaged`` (as
    ``salvage`` does); one that does not parse otherwise is a MalformedInput, raised when it is reached."""
    view = cast(bytes, memoryview(body))  # read as bytes are, its slices views (no copy of the body)
    try:
        _, resource_bufs = _split(ExportTraceServiceRequest.DESCRIPTOR, view, 1)
        resources = []
        for resource_buf in resource_bufs:
            rest, scope_bufs = _split(ResourceSpans.DESCRIPTOR, resource_buf, 2)
            scopes = []
            for scope_buf in scope_bufs:
                scope_rest, span_bufs = _split(ScopeSpans.DESCRIPTOR, scope_buf, 2)
                scopes.append((ScopeSpans.FromString(scope_rest).scope, span_bufs))
            resources.append((ResourceSpans.FromString(rest).resource, scopes))
    except (Structural, DecodeError, ValueError):
        return None

    def spans(where: str, bufs: list[Any]) -> Iterator[Any]:
        for k, buf in enumerate(bufs):
            try:
                span = Span.FromString(buf)
            except DecodeError as exc:
                path = bad_utf8(Span.DESCRIPTOR, bytes(buf))
                if path is None:
                    raise MalformedInput(f"{_REFUSED}: {where}.spans[{k}]: {exc}") from None
                salvaged.append(Rejected(f"{where}.spans[{k}]", bytes(buf), path))
                continue
            except ValueError as exc:  # as the whole-body parse's (its nesting past the parser's limit)
                raise MalformedInput(f"{_REFUSED}: {where}.spans[{k}]: {exc}") from None
            bufs[k] = None  # type: ignore[call-overload]  # parsed: its view can go
            yield span

    return (
        (
            resource,
            ((scope, spans(f"resourceSpans[{i}].scopeSpans[{j}]", bufs)) for j, (scope, bufs) in enumerate(scopes)),
        )
        for i, (resource, scopes) in enumerate(resources)
    )


def _rejected_span(item: Rejected) -> SpanRecord:
    """A span the parser refused, named by the ids its bytes still hold, for ingest to reject alone."""
    trace_id, span_id = field_bytes(item.raw, 1).hex(), field_bytes(item.raw, 2).hex()
    return SpanRecord(trace_id, span_id, "", 0, 0, problem=f"{item.where}: {item.problem}")


# --- JSON (the OTLP/JSON encoding: hex ids, integers possibly as strings) ----------
# Hostile input is normal input. A body of the wrong shape (not an object, `scopeSpans`
# not a list of objects, `resource` a number, a span's `attributes` not a list) is
# MalformedInput for the whole request (400: the sender has a bug, retrying cannot
# help). A value that cannot be taken (an integer that is not one, nesting or counts
# past the limits) is that span's `problem`: ingest rejects it alone and the request's
# other spans still land.
def _json_value(v: Any, where: str, budget: _Budget, depth: int = 0) -> Any:
    if not isinstance(v, dict) or not v:
        return None
    if depth > MAX_ATTRIBUTE_DEPTH:
        raise _SpanProblem(f"{where}: nested deeper than {MAX_ATTRIBUTE_DEPTH} levels")
    key, value = next(iter(v.items()))
    if key == "stringValue":
        return str(value)
    if key == "intValue":
        n = _int(value, where)
        return n if INT64_MIN <= n <= INT64_MAX else str(n)  # past int64: kept as its digits (ledger.limits)
    if key == "doubleValue":
        try:
            return float(value)
        except (TypeError, ValueError):
            raise _SpanProblem(f"{where}: doubleValue {value!r} is not a number") from None
    if key == "boolValue":
        return bool(value)
    if key == "arrayValue":
        values = _members(value, where)
        budget.take(len(values))
        return [_json_value(x, where, budget, depth + 1) for x in values]
    if key == "kvlistValue":
        return _json_attrs(_members(value, where), where, budget, depth + 1)
    if key == "bytesValue":  # base64 in OTLP/JSON; typed, so that redaction reads the bytes it encodes
        return Base64Bytes(value)
    raise _SpanProblem(f"{where}: unknown attribute value type {key!r}")


def _members(value: Any, where: str) -> list[Any]:
    """The ``values`` list of an arrayValue / kvlistValue."""
    values = value.get("values", []) if isinstance(value, dict) else [] if value is None else None
    if not isinstance(values, list):
        raise MalformedInput(f"{where}: `values` must be a list")
    return values


def _int(value: Any, where: str) -> int:
    if isinstance(value, float) and value.is_integer():
        return int(value)  # a JSON number written with an exponent
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise _SpanProblem(f"{where}: {value!r} is not an integer")
    try:
        return int(value)
    except ValueError:
        raise _SpanProblem(f"{where}: {value!r} is not an integer") from None


def _json_attrs(kvs: Any, where: str, budget: _Budget, depth: int = 0) -> dict[str, Any]:
    if not isinstance(kvs, list):
        raise MalformedInput(f"{where}: attributes must be a list of {{key, value}}")
    if len(kvs) > MAX_ATTRIBUTES:
        raise _SpanProblem(f"{where}: {len(kvs)} attributes, more than {MAX_ATTRIBUTES}")
    budget.take(len(kvs))
    out: dict[str, Any] = {}
    for kv in kvs:
        if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
            raise MalformedInput(f"{where}: each attribute needs a string `key`")
        out[kv["key"]] = _json_value(kv.get("value"), f"{where}.{kv['key']}", budget, depth)
    return out


def _enum(value: Any, names: list[str], prefix: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return names[value] if 0 <= value < len(names) else names[0]
    text = str(value or names[0]).removeprefix(prefix)
    return text if text in names else names[0]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _json_span(
    sp: dict[str, Any], resource: dict[str, Any], scope: dict[str, Any], where: str, budget: _Budget, sizes: bool
) -> SpanRecord:
    span = SpanRecord(
        trace_id=_text(sp.get("traceId")).lower(),
        span_id=_text(sp.get("spanId")).lower(),
        name=_text(sp.get("name")),
        start_ns=0,
        end_ns=0,
        parent_span_id=_text(sp.get("parentSpanId")).lower(),
        resource=resource,
        scope_name=_text(scope.get("name")),
        scope_version=_text(scope.get("version")),
    )
    try:
        if sizes and (size := len(json.dumps(sp))) > MAX_SPAN_BYTES:
            raise _SpanTooLarge(f"{where}: {size} bytes encoded, more than {MAX_SPAN_BYTES}")
        status = sp.get("status") or {}
        if not isinstance(status, dict):
            raise MalformedInput(f"{where}.status: expected an object")
        span.start_ns = _int(sp.get("startTimeUnixNano", 0), f"{where}.startTimeUnixNano")
        span.end_ns = _int(sp.get("endTimeUnixNano", 0), f"{where}.endTimeUnixNano")
        span.kind = _enum(sp.get("kind", 1), _KINDS, "SPAN_KIND_")
        span.status_code = _enum(status.get("code", 0), _STATUS, "STATUS_CODE_")
        span.status_message = _text(status.get("message"))
        span.attributes = _json_attrs(sp.get("attributes", []), f"{where}.attributes", budget)
        span.events = _json_events(sp.get("events", []), where, budget)
        span.links = _json_links(sp.get("links", []), where, budget)
    except _SpanProblem as exc:
        span.attributes, span.events, span.links, span.problem = {}, (), (), str(exc)
    budget.end_span()
    return span


def _span_list(items: Any, where: str, name: str) -> list[dict[str, Any]]:
    """A span's ``events`` or ``links``: a list of objects (else the body is malformed), within the limits."""
    if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
        raise MalformedInput(f"{where}.{name}: expected a list of objects")
    if len(items) > MAX_EVENTS:
        raise _SpanProblem(f"{where}.{name}: {len(items)} {name}, more than {MAX_EVENTS}")
    return items


def _json_events(events: Any, where: str, budget: _Budget) -> tuple[SpanEvent, ...]:
    return tuple(
        SpanEvent(
            _text(e.get("name")),
            _int(e.get("timeUnixNano", 0), f"{where}.events[{i}].timeUnixNano"),
            _json_attrs(e.get("attributes", []), f"{where}.events[{i}].attributes", budget),
        )
        for i, e in enumerate(_span_list(events, where, "events"))
    )


def _json_links(links: Any, where: str, budget: _Budget) -> tuple[SpanLink, ...]:
    return tuple(
        SpanLink(
            _text(x.get("traceId")).lower(),
            _text(x.get("spanId")).lower(),
            _json_attrs(x.get("attributes", []), f"{where}.links[{i}].attributes", budget),
        )
        for i, x in enumerate(_span_list(links, where, "links"))
    )


def _objects(doc: dict[str, Any], key: str, where: str) -> list[dict[str, Any]]:
    """``doc[key]``: a list of objects (absent or null: none), else the body is malformed."""
    value = doc.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(x, dict) for x in value):
        raise MalformedInput(f"{where}.{key}: expected a list of objects")
    return value


def _object(doc: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise MalformedInput(f"{where}.{key}: expected an object")
    return value


def decode_json(body: bytes | str | dict[str, Any]) -> list[SpanRecord]:
    """Spans of an OTLP/JSON request. A body of the wrong shape raises MalformedInput;
    a bad field inside one span sets that span's ``problem`` instead."""
    return list(iter_json(body))


def iter_json(body: bytes | bytearray | str | dict[str, Any]) -> Iterator[SpanRecord]:
    """``decode_json``'s spans one at a time (as ``iter_protobuf``); a body given as bytes or text is
    dropped once parsed, and each span's part of the parsed document once it is decoded."""
    owned = not isinstance(body, dict)  # a document we parsed: ours to take apart as we go
    sizes = owned and len(body) > MAX_SPAN_BYTES  # as in iter_protobuf
    if isinstance(body, dict):
        doc = body
    else:
        try:
            if isinstance(body, bytes | bytearray):  # decoded as json.loads does, the bytes dropped before the parse:
                body = body.decode(json.detect_encoding(body), "surrogatepass")  # not held beside its objects
            doc = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
            raise MalformedInput(f"not JSON: {exc}") from None
    del body
    if not isinstance(doc, dict) or not isinstance(doc.get("resourceSpans"), list):
        raise MalformedInput("not OTLP/JSON: expected an object with a `resourceSpans` list")
    budget = _Budget()
    for i, rs in enumerate(_objects(doc, "resourceSpans", "request")):
        where = f"resourceSpans[{i}]"
        try:
            resource = _json_attrs(_object(rs, "resource", where).get("attributes", []), f"{where}.resource", budget)
        except _SpanProblem as exc:  # shared by every span below: the request is malformed
            raise MalformedInput(str(exc)) from None
        budget.end_span()
        for j, ss in enumerate(_objects(rs, "scopeSpans", where)):
            scope = _object(ss, "scope", f"{where}.scopeSpans[{j}]")
            spans = _objects(ss, "spans", f"{where}.scopeSpans[{j}]")
            for k, sp in enumerate(spans):
                if owned:
                    spans[k] = None  # type: ignore[call-overload]  # decoded: its dict can go (sp holds it until then)
                yield _json_span(sp, resource, scope, f"{where}.scopeSpans[{j}].spans[{k}]", budget, sizes)


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
    if isinstance(v, Base64Bytes):
        return {"bytesValue": str(v)}
    return {"stringValue": str(v)}


def _kv(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _any_value(v)} for k, v in attrs.items()]


def _json_link(link: SpanLink) -> dict[str, Any]:
    return {"traceId": link.trace_id, "spanId": link.span_id, "attributes": _kv(link.attributes)}


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
                                **({"links": [_json_link(x) for x in s.links]} if s.links else {}),
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
    return [span for _, spans in read_file_parts(path) for span in spans]


def read_file_parts(path: Path | str) -> list[tuple[int | None, list[SpanRecord]]]:
    """``read_file`` by request: ``(line number, spans)`` per line of a JSON-lines file,
    ``(None, spans)`` for a whole file, so a caller can say where each span came from."""
    path = Path(path)
    try:
        data = _decompress(path.read_bytes())
    except OSError as exc:
        raise MalformedInput(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (EOFError, zlib.error) as exc:  # a truncated or corrupt gzip file
        raise MalformedInput(f"{path}: cannot decompress: {exc}") from None
    try:
        stripped = data.lstrip()
        if stripped[:1] in (b"{", b"["):
            if path.suffix == ".jsonl" or (b"\n{" in stripped and stripped[:1] == b"{" and _is_jsonl(stripped)):
                out: list[tuple[int | None, list[SpanRecord]]] = []
                for n, line in enumerate(stripped.splitlines(), 1):
                    if line.strip():
                        try:
                            out.append((n, decode_json(line)))
                        except MalformedInput as exc:
                            raise MalformedInput(f"line {n}: {exc}") from None
                return out
            return [(None, decode_json(stripped))]
        return [(None, decode_protobuf(data))]
    except MalformedInput as exc:
        raise MalformedInput(f"{path}: {exc}") from None


def _is_jsonl(data: bytes) -> bool:
    try:
        json.loads(data)
        return False
    except json.JSONDecodeError:
        return True
    except RecursionError:  # one document nested past the parser: not lines; decode_json says why
        return False
