"""What the health and quality rules (``rules.HEALTH_METRICS``) measure, and over which rows.

Each metric reads one table, windowed by its own time column, and keeps the
scopes of the cost rules (``evaluate`` builds the window and the scope):

* ``p99_run_latency``: finished runs (root span seen) started in the window, their
  wall time in ms, nearest-rank like the Health page (``queries.health``);
* ``model_call_error_rate``: model-call attempts (charges) started in the window,
  failed = ERROR status, as on the Health page;
* ``tool_failure_rate``: tool spans started in the window, hard (ERROR) or soft
  failures; ``tool=NAME`` narrows it to one tool;
* ``safety_violations``: evaluations judged in the window that are a safety
  judgment and failed (``safety AND failed``);
* ``task_success_rate``: finished runs started in the window that completed and
  carry no failed evaluation (a floor).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ledger.health_columns import SOFT_FAILURE
from ledger.queries.health import DURATION_MS

from .rules import Rule

__all__ = ["SOURCES", "HealthSource", "health_value", "trace_scope"]

_RUN_MS = DURATION_MS.format(start="r.started_at", end="r.ended_at")


@dataclass(frozen=True, slots=True)
class HealthSource:
    table: str
    alias: str
    time_column: str
    where: tuple[str, ...]
    select: str


SOURCES: Mapping[str, HealthSource] = {
    "p99_run_latency": HealthSource(
        "runs", "r", "r.started_at", ("r.root_span_id IS NOT NULL", "r.ended_at IS NOT NULL"),
        f"count(*) AS runs, quantile_disc({_RUN_MS}, 0.99) AS p99_ms, max({_RUN_MS}) AS max_ms",
    ),
    "model_call_error_rate": HealthSource(
        "charges", "c", "c.start_time", (),
        "count(*) AS attempts, count(*) FILTER (WHERE c.status_code = 'ERROR') AS failed_attempts",
    ),
    "tool_failure_rate": HealthSource(
        "spans", "s", "s.start_time", ("s.operation = 'execute_tool'",),
        "count(*) AS tool_calls, count(*) FILTER (WHERE s.status_code = 'ERROR') AS hard_failures, "
        f"count(*) FILTER (WHERE s.status_code IS DISTINCT FROM 'ERROR' AND {SOFT_FAILURE}) AS soft_failures",
    ),
    "safety_violations": HealthSource(
        "evaluations", "e", "e.time", ("e.safety", "e.failed"),
        "count(*) AS violations, count(DISTINCT e.trace_id) AS runs",
    ),
    "task_success_rate": HealthSource(
        "runs", "r", "r.started_at", ("r.stop_cause IS NOT NULL",),
        "count(*) AS runs, count(*) FILTER (WHERE r.stop_cause = 'completed' AND NOT EXISTS ("
        "SELECT 1 FROM evaluations e WHERE e.trace_id = r.trace_id AND e.kind = 'evaluation' AND e.failed"
        ")) AS successful_runs",
    ),
}  # fmt: skip


def trace_scope(rule: Rule, alias: str) -> tuple[str, list[Any]]:
    """The scope of a rule over rows that carry a trace id and a tenant (tool spans, evaluations)."""
    kind, value = rule.scope.kind, rule.scope.value
    if kind == "global":
        return "TRUE", []
    if kind == "tenant":
        runs_of = f"{alias}.trace_id IN (SELECT trace_id FROM runs WHERE tenant = ?)"
        return f"({alias}.tenant = ? OR ({alias}.tenant IS NULL AND {runs_of}))", [value, value]
    if kind == "agent":
        return f"{alias}.trace_id IN (SELECT trace_id FROM runs WHERE agent_name = ?)", [value]
    if kind in ("model", "call_site"):
        return f"{alias}.trace_id IN (SELECT trace_id FROM charges WHERE {kind} = ?)", [value]
    return (f"{alias}.tool = ?" if kind == "tool" else f"{alias}.trace_id = ?"), [value]


def _ratio(num: Any, den: Any) -> Decimal | None:
    return Decimal(int(num or 0)) / Decimal(int(den)) if den else None


def health_value(rule: Rule, row: Mapping[str, Any]) -> Decimal | None:
    """The rule's figure from its measured row (None: nothing to judge in the window)."""
    m = rule.metric
    if m == "p99_run_latency":
        return Decimal(str(row["p99_ms"])) if row.get("runs") else None
    if m == "model_call_error_rate":
        return _ratio(row["failed_attempts"], row["attempts"])
    if m == "tool_failure_rate":
        return _ratio(int(row["hard_failures"] or 0) + int(row["soft_failures"] or 0), row["tool_calls"])
    if m == "safety_violations":
        return Decimal(int(row["violations"] or 0))
    return _ratio(row["successful_runs"], row["runs"])
