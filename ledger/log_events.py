"""OTLP log records as the ledger reads them: which ones are events it knows, and the spans they become.

A log record is read only when it is an event whose meaning the ledger knows:

* Claude Code's ``claude_code.*`` events (``ledger.claude_code``): each becomes the same
  ``SpanRecord`` a span of that meaning would be, so pricing, the one-charge-per-billed-call
  rule, runs and redaction are the spans' own, not a second implementation;
* the GenAI ``gen_ai.evaluation.result`` event, in the trace context of the span it judges:
  the same judgment its span-event form gives (``ledger.quality.span_judgments``), read from
  the redacted record, under an id of its own (``log:{trace}/{span}/{digest of the record}``,
  so a redelivered record is one row). Without a span to judge it is not stored, and said so.

Any other record (an application's ordinary logs) is counted and left unstored: it carries
no money and no agent step.

Decoding (OTLP protobuf/JSON) belongs to the collector (``collector.otlp_logs``);
the ledger only sees these plain records.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from . import claude_code
from .normalize import tenant_of
from .quality import EVALUATION_EVENT, Judgment, SpanContext, span_judgments
from .redact import Redactor
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
    """What a request's log records become: spans, judgments, notes on what was left out."""

    spans: list[SpanRecord]
    judgments: list[Judgment] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # a judgment not stored, and why
    unread: int = 0  # records of no event the ledger reads


def _event_name(event: LogEvent) -> str:
    name = event.event_name or event.attributes.get("event.name") or event.body
    return name if isinstance(name, str) else ""


def spans_of(events: Iterable[LogEvent], policy: Redactor | None = None) -> LoggedSpans:
    """The span each known event becomes (a record with a ``problem`` becomes a span that carries it,
    so ``ledger.rows.prepare`` rejects it alone, naming it), the judgments evaluation events give
    (read after ``policy`` redacted them; None: as received); other records are only counted."""
    out = LoggedSpans([])
    for event in events:
        if not event.problem and _event_name(event) == EVALUATION_EVENT:
            _judge(event, policy, out)
            continue
        # A record that cannot be read is rejected alone (its span carries the problem), whatever it was.
        span = claude_code.span_of(event) if event.problem or claude_code.is_event(event) else None
        if span is None:
            out.unread += 1
        else:
            out.spans.append(span)
    return out


def _judge(event: LogEvent, policy: Redactor | None, out: LoggedSpans) -> None:
    if not (event.trace_id and event.span_id):
        out.notes.append(f"a {EVALUATION_EVENT} log record names no span it judges (no trace context): not stored")
        return
    attrs = policy.attributes(event.attributes) if policy is not None else event.attributes
    resource = policy.attributes(event.resource) if policy is not None else event.resource
    when = event.time_ns or event.observed_ns
    tenant = tenant_of(SpanRecord(event.trace_id, event.span_id, EVALUATION_EVENT, when, when, attributes=attrs,
                                  resource=resource))  # fmt: skip
    digest = hashlib.sha256(orjson.dumps([when, attrs], default=str, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]
    ctx = SpanContext(event.trace_id, event.span_id, tenant, when)
    for found in span_judgments(ctx, [(EVALUATION_EVENT, when, attrs)], {}, ()):
        if isinstance(found, str):
            out.notes.append(f"{event.trace_id}/{event.span_id}: log record {found.removeprefix('events[0] ')}")
        else:
            out.judgments.append(dataclasses.replace(found, eval_id=f"log:{event.trace_id}/{event.span_id}/{digest}"))
