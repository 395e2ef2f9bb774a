"""The OTLP/HTTP trace protocol, minus the sockets: media types, encodings, responses.

Follows the OTLP/HTTP specification for ``POST /v1/traces`` (and ``/v1/logs``, ``/v1/metrics``:
``.signals``):

* ``Content-Type: application/x-protobuf`` (binary) or ``application/json``
  (OTLP/JSON); anything else is 415. The response uses the request's encoding.
* ``Content-Encoding: gzip`` or ``deflate`` (zlib or raw) or none; the
  decompressed size is capped like the wire size (413), so a small compressed
  body cannot inflate into unbounded memory.
* Success is 200 with the signal's Export response (``ExportTraceServiceResponse``, …);
  when some items were rejected it carries ``partial_success`` with the count and the first reasons.
* Failures carry a ``google.rpc.Status`` body in the request's encoding.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from typing import Any

from google.protobuf import json_format
from google.rpc import code_pb2, status_pb2

from collector.otlp import iter_json, iter_protobuf
from ledger.errors import InputError, MalformedInput
from ledger.spans import SpanRecord

__all__ = [
    "JSON",
    "PROTOBUF",
    "BodyTooLarge",
    "UnsupportedEncoding",
    "UnsupportedMediaType",
    "decode_body",
    "decompress",
    "export_response",
    "media_kind",
    "status_body",
]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_REASONS_IN_MESSAGE = 5


class BodyTooLarge(InputError):
    """The body (on the wire or decompressed) exceeds the configured limit: 413."""


class UnsupportedMediaType(InputError):
    """Neither OTLP protobuf nor OTLP/JSON: 415."""


class UnsupportedEncoding(InputError):
    """A Content-Encoding other than gzip, deflate or identity: 415."""


def media_kind(content_type: str | None) -> str:
    """``PROTOBUF`` or ``JSON`` from a Content-Type header (parameters such as charset ignored)."""
    base = (content_type or "").split(";", 1)[0].strip().lower()
    if base in (PROTOBUF, "application/protobuf", "application/vnd.google.protobuf"):
        return PROTOBUF
    if base == JSON:
        return JSON
    raise UnsupportedMediaType(f"Content-Type {content_type!r} is not supported: send {PROTOBUF} or {JSON} (OTLP/HTTP)")


def decompress(body: bytes | bytearray, encoding: str | None, limit: int) -> bytes | bytearray:
    """The body with its Content-Encoding removed, never producing more than ``limit`` bytes."""
    enc = (encoding or "identity").strip().lower()
    if enc in ("", "identity"):
        return body
    if enc in ("gzip", "x-gzip"):
        candidates = [zlib.MAX_WBITS | 16]
    elif enc == "deflate":
        candidates = [zlib.MAX_WBITS, -zlib.MAX_WBITS]  # zlib-wrapped as HTTP says, raw as some clients send
    else:
        raise UnsupportedEncoding(f"Content-Encoding {encoding!r} is not supported: use gzip, deflate or none")
    error: zlib.error | None = None
    for wbits in candidates:
        d = zlib.decompressobj(wbits)
        try:
            out: bytes | bytearray = d.decompress(body, min(limit + 1, _INFLATED_AT_ONCE))
            if not d.eof and len(out) <= limit:
                out = _inflate_rest(d, out, limit)
        except zlib.error as exc:
            error = exc
            continue
        if len(out) > limit or d.unconsumed_tail:
            raise BodyTooLarge(f"body inflates past the {limit}-byte limit")
        if not d.eof:
            raise MalformedInput(f"{enc} body is truncated")
        return out
    raise MalformedInput(f"body is not valid {enc} data: {error}")


# A body inflating past this is inflated a piece at a time into one buffer: in one call zlib's pieces and
# the bytes they are joined into were held together, twice the inflated size (a 60 MiB body peaked at
# ~120 MiB in its worker; #41 item 7). An exporter's usual batch inflates in one call.
_INFLATED_AT_ONCE = 4 << 20


def _inflate_rest(d: Any, first: bytes | bytearray, limit: int) -> bytearray:
    """What ``d`` still has to inflate, after ``first``, appended to one buffer (at most ``limit + 1``
    bytes: one past the limit tells the caller it was passed)."""
    out = bytearray(first)
    del first
    while not d.eof and len(out) <= limit:
        piece = d.decompress(d.unconsumed_tail, min(limit + 1 - len(out), _INFLATED_AT_ONCE))
        if not piece and not d.unconsumed_tail:
            break  # the input ran out first: truncated (the caller says so)
        out += piece
    return out


def decode_body(body: bytes | bytearray, kind: str) -> Iterator[SpanRecord]:
    """Spans from an ExportTraceServiceRequest, one at a time (rows are built as they come: the records
    of a whole body are never held at once); MalformedInput, possibly mid-way, if the body is not one."""
    return iter_protobuf(body) if kind == PROTOBUF else iter_json(body)


def export_response(
    kind: str, rejected: list[str] | None = None, flagged: list[str] | None = None, signal: str = "traces"
) -> bytes:
    """The 200 body: the signal's Export response (``ExportTraceServiceResponse`` for traces), with
    partial_success when items were rejected.

    Items kept with a part left out (usage flagged ``invalid_usage``, content not
    stored, log records of no known event) are named in ``error_message`` too, as the
    warning OTLP allows it to carry with the rejected count 0.
    """
    from .signals import SIGNALS  # the signals module imports this one

    s = SIGNALS[signal]
    response: Any = s.response()
    parts = []
    if rejected:
        setattr(response.partial_success, s.rejected_field, len(rejected))
        parts.append(f"{len(rejected)} invalid {s.noun}(s) rejected: {_listed(rejected)}")
    if flagged:
        parts.append(f"{len(flagged)} {s.noun}(s) kept with a problem: {_listed(flagged)}")
    if parts:
        response.partial_success.error_message = "; ".join(parts)
    if kind == PROTOBUF:
        return bytes(response.SerializeToString())
    return json_format.MessageToJson(response, indent=None).encode()


def _listed(reasons: list[str]) -> str:
    shown = "; ".join(reasons[:_REASONS_IN_MESSAGE])
    more = f" (and {len(reasons) - _REASONS_IN_MESSAGE} more)" if len(reasons) > _REASONS_IN_MESSAGE else ""
    return shown + more


_GRPC_CODES = {
    400: code_pb2.INVALID_ARGUMENT,
    401: code_pb2.UNAUTHENTICATED,
    404: code_pb2.NOT_FOUND,
    411: code_pb2.INVALID_ARGUMENT,
    413: code_pb2.RESOURCE_EXHAUSTED,
    415: code_pb2.INVALID_ARGUMENT,
    429: code_pb2.RESOURCE_EXHAUSTED,
    503: code_pb2.UNAVAILABLE,
}


def status_body(kind: str, http_status: int, message: str) -> bytes:
    """A ``google.rpc.Status`` error body in the request's encoding (OTLP/HTTP failures)."""
    status = status_pb2.Status(code=_GRPC_CODES.get(http_status, code_pb2.UNKNOWN), message=message)
    if kind == PROTOBUF:
        return status.SerializeToString()
    return json.dumps({"code": status.code, "message": message}).encode()
