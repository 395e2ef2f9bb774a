"""The decoded span: what every producer hands to ``ledger.ingest``.

Decoding (OTLP protobuf/JSON, the in-process SDK exporter) belongs to the
collector; the ledger only ever sees these plain records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Base64Bytes", "SpanEvent", "SpanLink", "SpanRecord"]

Attributes = dict[str, Any]


class Base64Bytes(str):
    """An OTLP ``bytesValue`` attribute: stored as the base64 text it is received as, and typed
    so that redaction (``ledger.redact``) reads the bytes it encodes, not the base64, which
    hides whatever secret is in them from every pattern."""

    __slots__ = ()


# Not frozen: a frozen dataclass costs ~6x more to construct, and ingest builds
# one record per span on its hot path. Treat records as read-only.
@dataclass(slots=True)
class SpanEvent:
    name: str
    time_ns: int
    attributes: Attributes = field(default_factory=dict)


@dataclass(slots=True)
class SpanLink:
    """A link to another span (a batch's trigger, a hand-off across traces)."""

    trace_id: str
    span_id: str
    attributes: Attributes = field(default_factory=dict)


@dataclass(slots=True)
class SpanRecord:
    """One finished span. Ids are lowercase hex; times are Unix nanoseconds."""

    trace_id: str
    span_id: str
    name: str
    start_ns: int
    end_ns: int
    parent_span_id: str = ""
    kind: str = "INTERNAL"  # OTLP SpanKind without the prefix: INTERNAL, CLIENT, SERVER, ...
    status_code: str = "UNSET"  # UNSET, OK, ERROR
    status_message: str = ""
    attributes: Attributes = field(default_factory=dict)
    events: tuple[SpanEvent, ...] = ()
    resource: Attributes = field(default_factory=dict)
    scope_name: str = ""
    scope_version: str = ""
    # Why this span cannot be stored, when its decoder already knows (a field of the
    # wrong type, nesting past the limits): ingest rejects it on its own, naming it.
    problem: str = ""
    links: tuple[SpanLink, ...] = ()

    def attr(self, key: str, default: Any = None) -> Any:
        """A span attribute, falling back to the resource (where tenant/service often live)."""
        if key in self.attributes:
            return self.attributes[key]
        return self.resource.get(key, default)
