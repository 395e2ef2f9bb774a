"""OTLP log records as the ledger reads them: which ones are events it knows, and the spans they become.

A log record is read only when it is an event whose meaning the ledger knows
(``ledger.claude_code``: Claude Code's ``claude_code.*`` events). Each becomes
the same ``SpanRecord`` a span of that meaning would be, so pricing, the
one-charge-per-billed-call rule, runs and redaction are the spans' own, not a
second implementation. Any other record (an application's ordinary logs) is
counted and left unstored: it carries no money and no agent step.

Decoding (OTLP protobuf/JSON) belongs to the collector (``collector.otlp_logs``);
the ledger only sees these plain records.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from . import claude_code
from .spans import SpanRecord

__all__ = ["LogEvent", "LoggedSpans", "spans_of"]


@dataclass(slots=True)
class LogEvent:
    """One OTLP log record. Ids are lowercase hex ("" when the record has none); times Unix ns."""

    time_ns: int
    observed_ns: int
    body: Any
    attributes: dict[str, Any] = field(default_factory=dict)
    resource: dict[str, Any] = field(default_factory=dict)
    scope_name: str = ""
    scope_version: str = ""
    trace_id: str = ""
    span_id: str = ""
    event_name: str = ""  # the LogRecord's own event_name field (OTLP 1.5+); older senders name it elsewhere
    severity_text: str = ""
    # Why this record cannot be read, when its decoder already knows (past the limits, a bad value):
    # it is rejected alone, as a span with a problem is.
    problem: str = ""


@dataclass
class LoggedSpans:
    """The spans a request's log records become, and how many records were no event the ledger reads."""

    spans: list[SpanRecord]
    unread: int = 0


def spans_of(events: Iterable[LogEvent]) -> LoggedSpans:
    """The span each known event becomes (a record with a ``problem`` becomes a span that carries it,
    so ``ledger.rows.prepare`` rejects it alone, naming it); other records are only counted."""
    out = LoggedSpans([])
    for event in events:
        # A record that cannot be read is rejected alone (its span carries the problem), whatever it was.
        span = claude_code.span_of(event) if event.problem or claude_code.is_event(event) else None
        if span is None:
            out.unread += 1
        else:
            out.spans.append(span)
    return out
