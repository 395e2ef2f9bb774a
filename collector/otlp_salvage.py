"""The items of an OTLP protobuf request that parse, when the request as a whole does not.

The official classes refuse a whole ``ExportTraceServiceRequest`` (or ``…Logs…``) when one
proto3 string anywhere in it is not UTF-8: one span's name, an attribute key or value, an
event name, a status message. Invalid UTF-8 is that item's content, not the request's
structure, so it costs that item only, as a bad field does in OTLP/JSON: ``salvage`` takes the
request apart on the wire (resource → scope → item, each level's repeated field one entry at a
time), keeps every item that parses and returns the others with the field that failed.

Anything else the parser refuses (a truncated length, nesting past its recursion limit) stays
structural: ``MalformedInput`` for the whole request, as before. This runs only after a failed
parse of the whole request, so a valid request costs nothing more.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.internal.decoder import _DecodeVarint  # the library's own varint reader
from google.protobuf.message import DecodeError, Message

from ledger.errors import MalformedInput

__all__ = ["Rejected", "field_bytes", "salvage"]

# Past this many nested messages the parser refuses a body for its depth (protobuf's default
# recursion limit): no UTF-8 culprit is looked for deeper, the body is structurally refused.
_MAX_DEPTH = 100
_LENGTH_DELIMITED = 2


@dataclass(frozen=True)
class Rejected:
    """One item (span, log record) left out: where it was, its bytes (for its ids), and why."""

    where: str  # e.g. "resourceSpans[0].scopeSpans[1].spans[3]"
    raw: bytes
    problem: str  # e.g. "name is not valid UTF-8"


class _Structural(ValueError):
    """The wire framing is broken (truncated, a varint past 64 bits, a group): not one item's content."""


def _fields(buf: bytes) -> Iterator[tuple[int, int, Any, int, int]]:
    """``(number, wire type, value, start, end)`` of each field of one message's bytes, in order;
    ``value`` is the bytes of a length-delimited field, else an int or the fixed-width bytes."""
    pos, size = 0, len(buf)
    try:
        while pos < size:
            start = pos
            tag, pos = _DecodeVarint(buf, pos)
            number, wire = tag >> 3, tag & 7
            value: Any
            if wire == 0:
                value, pos = _DecodeVarint(buf, pos)
            elif wire == 1 or wire == 5:
                width = 8 if wire == 1 else 4
                value, pos = buf[pos : pos + width], pos + width
            elif wire == _LENGTH_DELIMITED:
                length, pos = _DecodeVarint(buf, pos)
                value, pos = buf[pos : pos + length], pos + length
            else:  # groups (3, 4) are not in OTLP; 6 and 7 are no wire type at all
                raise _Structural(f"wire type {wire} at byte {start}")
            if pos > size or number == 0:
                raise _Structural(f"a field truncated or numbered 0 at byte {start}")
            yield number, wire, value, start, pos
    except (IndexError, DecodeError) as exc:  # a varint running off the end, or past 64 bits
        raise _Structural(f"bad varint at byte {pos}: {exc}") from None


def field_bytes(buf: bytes, number: int) -> bytes:
    """The last value of a length-delimited field (as a parser would take it), b"" if absent or unreadable."""
    found = b""
    try:
        for n, wire, value, _, _ in _fields(buf):
            if n == number and wire == _LENGTH_DELIMITED:
                found = value
    except _Structural:
        pass
    return found


def _bad_utf8(descriptor: Descriptor, buf: bytes, depth: int = 0) -> str | None:
    """The path of the first string in ``buf`` (a ``descriptor`` message) that is not UTF-8, by
    the JSON names of its fields (``events[1].attributes[0].value.stringValue``); None if none."""
    if depth > _MAX_DEPTH:
        return None
    seen: dict[int, int] = {}
    for number, wire, value, _, _ in _fields(buf):
        field = descriptor.fields_by_number.get(number)
        if field is None or wire != _LENGTH_DELIMITED:
            continue  # unknown fields are skipped by the parser too; packed numbers hold no text
        index = seen[number] = seen.get(number, -1) + 1
        name = f"{field.json_name}[{index}]" if field.is_repeated else field.json_name
        if field.type == FieldDescriptor.TYPE_STRING:
            try:
                value.decode()
            except UnicodeDecodeError:
                return f"{name} is not valid UTF-8"
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            inner = _bad_utf8(field.message_type, value, depth + 1)
            if inner is not None:
                return f"{name}.{inner}"
    return None


def _class(descriptor: Descriptor) -> type[Message]:
    return message_factory.GetMessageClass(descriptor)


def _split(descriptor: Descriptor, buf: bytes, child: int) -> tuple[bytes, list[bytes]]:
    """A message's bytes without its repeated field ``child``, and that field's entries."""
    rest, children = bytearray(), []
    for number, wire, value, start, end in _fields(buf):
        if number == child and wire == _LENGTH_DELIMITED:
            children.append(value)
        else:
            rest += buf[start:end]
    return bytes(rest), children


def _shared_problem(descriptor: Descriptor, rest: bytes, where: str, error: Exception) -> str:
    """Why the part of a resource or scope that its items share does not parse ("" if it does)."""
    try:
        _class(descriptor).FromString(rest)
        return ""
    except DecodeError:
        path = _bad_utf8(descriptor, rest)
    if path is None:
        raise MalformedInput(f"{where}: {error}")
    return f"its {descriptor.name}'s {path}"  # e.g. "its ScopeSpans's scope.name is not valid UTF-8"


def salvage(body: bytes, request: Message, names: tuple[str, str, str], error: Exception) -> list[Rejected]:
    """Fill ``request`` (empty, of the class that refused ``body`` with ``error``) with every item
    of ``body`` that parses; return the others. ``names`` are the three levels' JSON names, for
    the messages (``("resourceSpans", "scopeSpans", "spans")``). Raises MalformedInput when
    ``body`` is refused for anything but invalid UTF-8."""
    refused = f"not an OTLP {request.DESCRIPTOR.name} protobuf: {error}"
    try:
        return _salvage(body, request, names, error)
    except (_Structural, RecursionError):
        raise MalformedInput(refused) from None
    except MalformedInput as exc:
        raise MalformedInput(f"{refused} ({exc})") from None


def _salvage(body: bytes, request: Message, names: tuple[str, str, str], error: Exception) -> list[Rejected]:
    resources_field = request.DESCRIPTOR.fields_by_number[1]
    resource_d = resources_field.message_type
    scopes_field = resource_d.fields_by_number[2]
    scope_d = scopes_field.message_type
    items_field = scope_d.fields_by_number[2]
    item_class = _class(items_field.message_type)
    rejected: list[Rejected] = []
    _, resources = _split(request.DESCRIPTOR, body, 1)
    for i, resource_buf in enumerate(resources):
        resources_out = getattr(request, resources_field.name)
        try:
            resources_out.append(_class(resource_d).FromString(resource_buf))
            continue
        except DecodeError:
            pass
        where = f"{names[0]}[{i}]"
        rest, scopes = _split(resource_d, resource_buf, 2)
        shared = _shared_problem(resource_d, rest, where, error)
        resource_out = resources_out.add()
        if not shared:
            resource_out.MergeFromString(rest)
        for j, scope_buf in enumerate(scopes):
            scope_where = f"{where}.{names[1]}[{j}]"
            scope_out = getattr(resource_out, scopes_field.name)
            if not shared:
                try:
                    scope_out.append(_class(scope_d).FromString(scope_buf))
                    continue
                except DecodeError:
                    pass
            scope_rest, items = _split(scope_d, scope_buf, 2)
            problem = shared or _shared_problem(scope_d, scope_rest, scope_where, error)
            scope_msg = scope_out.add()
            if not problem:
                scope_msg.MergeFromString(scope_rest)
            items_out = getattr(scope_msg, items_field.name)
            for k, item_buf in enumerate(items):
                item_where = f"{scope_where}.{names[2]}[{k}]"
                if problem:
                    rejected.append(Rejected(item_where, item_buf, problem))
                    continue
                try:
                    items_out.append(item_class.FromString(item_buf))
                except DecodeError:
                    path = _bad_utf8(items_field.message_type, item_buf)
                    if path is None:
                        raise MalformedInput(f"{item_where}: {error}") from None
                    rejected.append(Rejected(item_where, item_buf, path))
    return rejected
