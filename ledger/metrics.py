"""OTLP metric data points as a cross-check series: stored (``metric_points``, migration 20), never charged.

A producer's own counters (Claude Code's ``claude_code.cost.usage`` in USD and
``claude_code.token.usage`` by ``type``) say what it believes it spent; the ledger's charges
come from the model-call spans and log events alone, priced by our price book. The series is
kept to compare the two (``ledger.queries.crosscheck``), so a metric can never add a charge.

Only number points (``Sum`` and ``Gauge``) are stored; a histogram, exponential histogram or
summary point is counted and left out (no producer we read reports money that way). Values
are exact decimals (``DECIMAL(38,12)``: a double's shortest repr, cut to 12 places). A point
is keyed by its metric, its series (a hash of resource, scope and attributes) and its time, so
an exporter's retry stores nothing twice. Every stored string passes the redaction policy.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson

from .limits import MAX_TIME_NS, MIN_TIME_NS
from .redact import Redactor, default_policy
from .rows import PreparedBatch
from .tables import table

__all__ = ["CUMULATIVE", "DELTA", "GAUGE", "MetricPoint", "prepare_points"]

DELTA, CUMULATIVE, GAUGE = "delta", "cumulative", "gauge"
_PLACES = Decimal(10) ** -12
_MAX_VALUE = Decimal(10) ** 26  # what DECIMAL(38,12) holds
_SESSION_ID = "session.id"
_MODEL = "model"


@dataclass(slots=True)
class MetricPoint:
    """One number data point of one metric. Times are Unix ns (start 0: none given)."""

    name: str
    time_ns: int
    value: int | float
    temporality: str = GAUGE  # DELTA, CUMULATIVE or GAUGE
    start_ns: int = 0
    unit: str = ""
    monotonic: bool = False
    attributes: dict[str, Any] = field(default_factory=dict)
    resource: dict[str, Any] = field(default_factory=dict)
    scope_name: str = ""
    scope_version: str = ""
    problem: str = ""  # why it cannot be stored, when its decoder already knows


_POINT_ROW = table("metric_points").compile_row(
    "p, name, series, value, attributes, resource, scope_name, scope_version, unit, session_id, model, now_us",
    {
        "name": "name", "series": "series", "start_time": "p.start_ns or None", "time": "p.time_ns",
        "value": "value", "unit": "unit", "temporality": "p.temporality", "monotonic": "p.monotonic",
        "session_id": "session_id", "model": "model", "attributes": "attributes", "resource": "resource",
        "scope_name": "scope_name", "scope_version": "scope_version", "ingested_at": "now_us",
    },
)  # fmt: skip


def _dumps(value: Any) -> str:
    return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SORT_KEYS).decode()


def _exact(value: int | float) -> Decimal | str:
    """The value as stored, or why it cannot be (not finite, past DECIMAL(38,12))."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"value {value!r} is not a finite number"
    try:
        exact = Decimal(repr(value)).quantize(_PLACES)
    except InvalidOperation:
        return f"value {value!r} does not fit DECIMAL(38,12)"
    return exact if abs(exact) < _MAX_VALUE else f"value {value!r} does not fit DECIMAL(38,12)"


def _problem(p: MetricPoint) -> str:
    if p.problem:
        return p.problem
    if not p.name:
        return "metric has no name"
    if not MIN_TIME_NS <= p.time_ns <= MAX_TIME_NS:
        return f"timeUnixNano {p.time_ns} is outside [{MIN_TIME_NS}, {MAX_TIME_NS}]"
    if p.start_ns and not MIN_TIME_NS <= p.start_ns <= p.time_ns:
        return f"startTimeUnixNano {p.start_ns} is not in [{MIN_TIME_NS}, timeUnixNano]"
    return ""


def prepare_points(
    points: Iterable[MetricPoint], *, redact_content: bool = True, policy: Redactor | None = None
) -> PreparedBatch:
    """The ``metric_points`` rows of these points (redacted), bad ones rejected alone; nothing is stored."""
    chosen = (policy or default_policy()) if redact_content else None
    p_on = chosen if chosen is not None and chosen.enabled else None
    now_us = int(datetime.now(UTC).timestamp() * 1e6)
    rows: list[tuple[Any, ...]] = []
    rejected: list[str] = []
    resources: dict[int, str] = {}  # one request shares a resource dict across its points
    received = 0
    for p in points:
        received += 1
        problem = _problem(p)
        value = _exact(p.value) if not problem else Decimal(0)
        if isinstance(value, str):
            problem = value
        if problem:
            rejected.append(f"{p.name or '?'}@{p.time_ns}: {problem}")
            continue
        attrs = p_on.attributes(p.attributes) if p_on else p.attributes
        resource = resources.get(id(p.resource))
        if resource is None:
            resource = resources[id(p.resource)] = _dumps(p_on.attributes(p.resource) if p_on else p.resource)
        name, unit, scope, version = (
            (p_on.text(p.name), p_on.text(p.unit), p_on.text(p.scope_name), p_on.text(p.scope_version))
            if p_on
            else (p.name, p.unit, p.scope_name, p.scope_version)
        )
        attributes = _dumps(attrs)
        series = hashlib.sha256(f"{resource}\0{scope}\0{version}\0{attributes}".encode()).hexdigest()[:32]
        session, model = (None if (v := attrs.get(k)) is None else str(v) for k in (_SESSION_ID, _MODEL))
        rows.append(
            _POINT_ROW(p, name, series, value, attributes, resource, scope, version, unit, session, model, now_us)
        )
    return PreparedBatch(received, rejected, {}, set(), {"metric_points": rows})
