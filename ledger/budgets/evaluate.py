"""Measuring a rule over its window: SQL builders (pure) and their evaluation.

Spend and cache hit rate are measured over *charges* (a charge belongs to the
window its span started in; the hit rate counts only finished runs' charges,
since every run's first call writes the cache and reads nothing); the run
metrics over *finished runs* (a root span seen, so the stop cause is known)
started in the window. A rule's scope narrows
either the same way:

* tenant: the charge's tenant, or its run's when the span carried none;
* agent: the run's agent name (known once the root span has arrived);
* model / call_site: the charge's, and for run metrics the runs that made such a call;
* run: one trace.

After an ingest only the rules whose scope the batch touched are evaluated
(:func:`touched_by`, then ``list_rules(covering=touched)``); per-run rules are
measured for all touched runs in one grouped query.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import duckdb

from ledger.queries import Query
from ledger.terms import input_tokens_sum, usd_sum

from .anomaly import ANOMALY_METRIC, anomaly_query
from .health_rules import SOURCES as HEALTH_SOURCES
from .health_rules import health_value, trace_scope
from .projection import Projection, project
from .relative import measure_relative
from .rules import Level, Rule, decimal_str, level_for
from .windows import Window, naive_utc, window_for

__all__ = [
    "PROJECTION_LOOKBACK",
    "Evaluation",
    "Touched",
    "current",
    "evaluate",
    "evaluate_runs",
    "measure_query",
    "touched_by",
]

PROJECTION_LOOKBACK = timedelta(hours=1)
_USD = usd_sum("c")
_CHARGE_METRICS = ("spend", "cache_hit_rate")


@dataclass(frozen=True)
class Evaluation:
    """A rule measured over one window: the value, its level and the figures behind it."""

    rule: Rule
    window: Window
    value: Decimal | None
    level: Level
    evaluated_at: datetime
    figures: dict[str, Any] = field(default_factory=dict)
    projection: Projection | None = None

    @property
    def state_key(self) -> str:
        """Alert state is kept per rule, and per run for per-run rules."""
        return self.window.trace_id or ""

    @property
    def fraction(self) -> float | None:
        if self.value is None or not self.rule.limit:
            return None
        return float(self.value / self.rule.limit)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule.to_dict(),
            "window": self.window.to_dict(),
            "value": decimal_str(self.value),
            "limit": decimal_str(self.rule.limit),
            "soft_threshold": decimal_str(self.rule.soft_threshold),
            "fraction": self.fraction,
            "level": self.level,
            "evaluated_at": self.evaluated_at.isoformat(),
            "figures": self.figures,
            "projection": self.projection.to_dict() if self.projection else None,
        }


# --- SQL builders ---------------------------------------------------------------------------
def _charge_scope(rule: Rule) -> tuple[str, list[Any]]:
    kind, value = rule.scope.kind, rule.scope.value
    if kind == "global":
        return "TRUE", []
    if kind == "tenant":
        return (
            "(c.tenant = ? OR (c.tenant IS NULL AND c.trace_id IN (SELECT trace_id FROM runs WHERE tenant = ?)))",
            [value, value],
        )
    if kind == "agent":
        return "c.trace_id IN (SELECT trace_id FROM runs WHERE agent_name = ?)", [value]
    column = {"model": "c.model", "call_site": "c.call_site", "run": "c.trace_id"}[kind]
    return f"{column} = ?", [value]


def _run_scope(rule: Rule) -> tuple[str, list[Any]]:
    kind, value = rule.scope.kind, rule.scope.value
    if kind == "global":
        return "TRUE", []
    if kind in ("model", "call_site"):
        return f"EXISTS (SELECT 1 FROM charges m WHERE m.trace_id = r.trace_id AND m.{kind} = ?)", [value]
    column = {"tenant": "r.tenant", "agent": "r.agent_name", "run": "r.trace_id"}[kind]
    return f"{column} = ?", [value]


def measure_query(
    rule: Rule,
    window: Window,
    *,
    trace_ids: Sequence[str] | None = None,
    exclude_trace: str | None = None,
    recent_since: datetime | None = None,
) -> Query:
    """The figures of ``rule`` over ``window``.

    For a per-run rule pass ``trace_ids``: one row per run (column ``trace_id``).
    ``exclude_trace`` leaves one run's charges out (the gate adds that run's own
    live count instead); ``recent_since`` adds a ``recent`` spend column for projections.
    """
    charges = rule.metric in _CHARGE_METRICS
    health = HEALTH_SOURCES.get(rule.metric)
    if health is not None:  # a health or quality metric: its own table, time column and rows
        alias, time_col = health.alias, health.time_column
        scopes = {"c": _charge_scope, "r": _run_scope}
        scope_sql, params = scopes[alias](rule) if alias in scopes else trace_scope(rule, alias)
        where = [*health.where, scope_sql]
    else:
        alias, time_col = ("c", "c.start_time") if charges else ("r", "r.started_at")
        scope_sql, params = _charge_scope(rule) if charges else _run_scope(rule)
        where = [scope_sql] if charges else ["r.stop_cause IS NOT NULL", scope_sql]
    if rule.metric == "cache_hit_rate":
        # Only finished runs: a run's first call always writes the cache and reads nothing,
        # so a run (or a window) judged mid-way would look broken.
        where.append("c.trace_id IN (SELECT trace_id FROM runs WHERE stop_cause IS NOT NULL)")
    group, select_trace = "", ""
    if window.kind == "run":
        ids = list(trace_ids) if trace_ids is not None else [window.trace_id]
        where.append(f"list_contains(?::VARCHAR[], {alias}.trace_id)")
        params.append(ids)
        group, select_trace = f" GROUP BY {alias}.trace_id", f"{alias}.trace_id AS trace_id, "
    else:
        if window.start is not None:
            where.append(f"{time_col} >= ?")
            params.append(naive_utc(window.start))
        if window.end is not None:
            where.append(f"{time_col} < ?")
            params.append(naive_utc(window.end))
    if exclude_trace is not None:
        where.append(f"{alias}.trace_id <> ?")
        params.append(exclude_trace)

    if health is not None:
        sql = f"SELECT {select_trace}{health.select} FROM {health.table} {alias} WHERE {' AND '.join(where)}{group}"
        return Query(sql, params)
    if rule.metric == "spend":
        recent = "NULL"
        if recent_since is not None:
            recent = f"coalesce(sum({_USD}) FILTER (WHERE c.start_time >= ?), 0)"
        select = (
            f"coalesce(sum({_USD}), 0) AS spend, count(*) AS charges, count(DISTINCT c.trace_id) AS runs, "
            f"count(*) FILTER (WHERE c.unpriced) AS unpriced_charges, {recent} AS recent"
        )
        head = [naive_utc(recent_since)] if recent_since is not None else []
        return Query(f"SELECT {select_trace}{select} FROM charges c WHERE {' AND '.join(where)}{group}", head + params)
    if rule.metric == "cache_hit_rate":
        select = (
            "coalesce(sum(c.cache_read_tokens), 0) AS cache_read_tokens, "
            f"coalesce(sum({input_tokens_sum('c')}), 0) AS input_tokens, "
            "count(*) AS charges"
        )
        return Query(f"SELECT {select_trace}{select} FROM charges c WHERE {' AND '.join(where)}{group}", params)
    if rule.metric == ANOMALY_METRIC:  # each run against its own agent's baseline (ledger.budgets.anomaly)
        return anomaly_query(where, params, select_trace, group)
    select = (
        "count(*) AS runs, count(*) FILTER (WHERE r.stop_cause = 'completed') AS successful_runs, "
        "coalesce(sum(r.usd_total), 0) AS total_usd, quantile_disc(r.usd_total, 0.95) AS p95_usd, "
        "count(*) FILTER (WHERE r.loop_trips > 0) AS looping_runs, "
        "count(*) FILTER (WHERE r.stop_cause = 'max_steps') AS step_capped_runs"
    )
    return Query(f"SELECT {select_trace}{select} FROM runs r WHERE {' AND '.join(where)}{group}", params)


# --- values ---------------------------------------------------------------------------------
def _ratio(num: int, den: int) -> Decimal | None:
    return None if not den else Decimal(num) / Decimal(den)


def _value(rule: Rule, row: dict[str, Any]) -> Decimal | None:
    m = rule.metric
    if m in HEALTH_SOURCES:
        return health_value(rule, row)
    if m == "spend":
        return Decimal(row["spend"])
    if m == "cache_hit_rate":
        return _ratio(int(row["cache_read_tokens"]), int(row["input_tokens"]))
    if m == ANOMALY_METRIC:
        times = row["times_baseline_p95"]
        return None if times is None else Decimal(str(round(times, 6)))
    runs = int(row["runs"] or 0)
    if m == "p95_run_cost":
        return None if not runs else Decimal(row["p95_usd"])
    if m == "cost_per_successful_run":
        total, ok = Decimal(row["total_usd"]), int(row["successful_runs"])
        # No success yet: the spend so far is a lower bound on what one success costs.
        return (total / ok if ok else total) if runs else None
    if m == "loop_trip_rate":
        return _ratio(int(row["looping_runs"]), runs)
    return _ratio(int(row["step_capped_runs"]), runs)


def _figures(row: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in row.items():
        if k in ("recent", "trace_id"):
            continue
        out[k] = decimal_str(v) if isinstance(v, Decimal) else v
    return out


def _rows(con: duckdb.DuckDBPyConnection, q: Query) -> list[dict[str, Any]]:
    cur = con.execute(q.sql, q.params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def _evaluation(rule: Rule, window: Window, row: dict[str, Any], now: datetime, lookback: timedelta) -> Evaluation:
    value = _value(rule, row)
    projection = None
    if rule.metric == "spend" and window.kind != "run" and row.get("recent") is not None:
        start = window.start or now - lookback
        effective = min(lookback, now - start) if not window.rolling else lookback
        projection = project(value or Decimal(0), rule.limit, Decimal(row["recent"]), effective, now, window.end)
    return Evaluation(rule, window, value, level_for(rule, value), now, _figures(row), projection)


def evaluate(
    con: duckdb.DuckDBPyConnection,
    rule: Rule,
    now: datetime,
    *,
    trace_id: str | None = None,
    lookback: timedelta = PROJECTION_LOOKBACK,
) -> Evaluation:
    """Measure ``rule`` over the window containing ``now`` (or the run ``trace_id``)."""
    window = window_for(rule, now, trace_id)
    if rule.relative is not None:  # a candidate against its baseline: measured on its own (ledger.budgets.relative)
        value, level, figures = measure_relative(con, rule, window)
        return Evaluation(rule, window, value, level, now, figures)
    recent_since = None
    if rule.metric == "spend" and window.kind != "run":
        recent_since = max(window.start, now - lookback) if window.start else now - lookback
    rows = _rows(con, measure_query(rule, window, recent_since=recent_since))
    row = rows[0] if rows else {}
    if not row:  # a run with no charges yet: a grouped query returns no row
        return Evaluation(rule, window, None if rule.metric != "spend" else Decimal(0), "ok", now, {}, None)
    return _evaluation(rule, window, row, now, lookback)


def evaluate_runs(
    con: duckdb.DuckDBPyConnection, rule: Rule, trace_ids: Iterable[str], now: datetime
) -> list[Evaluation]:
    """A per-run rule measured for each of these runs that falls in its scope (one query)."""
    ids = sorted(set(trace_ids))
    if not ids or rule.window != "run":
        return []
    if rule.scope.kind == "run":
        ids = [t for t in ids if t == rule.scope.value]
        if not ids:
            return []
    probe = Window("run", None, None, "run:*", ids[0])
    out = []
    for row in _rows(con, measure_query(rule, probe, trace_ids=ids)):
        window = Window("run", None, None, f"run:{row['trace_id']}", row["trace_id"])
        out.append(_evaluation(rule, window, row, now, PROJECTION_LOOKBACK))
    return out


def _latest_run(con: duckdb.DuckDBPyConnection, rule: Rule) -> str | None:
    kind, value = rule.scope.kind, rule.scope.value
    if kind == "run":
        return value
    if kind in ("model", "call_site"):
        sql = f"SELECT trace_id FROM charges WHERE {kind} = ? ORDER BY start_time DESC LIMIT 1"
    elif kind == "tool":
        sql = "SELECT trace_id FROM spans WHERE tool = ? ORDER BY start_time DESC LIMIT 1"
    elif kind == "global":
        sql = "SELECT trace_id FROM runs WHERE ? IS NULL ORDER BY started_at DESC NULLS LAST LIMIT 1"
    else:
        column = "tenant" if kind == "tenant" else "agent_name"
        sql = f"SELECT trace_id FROM runs WHERE {column} = ? ORDER BY started_at DESC NULLS LAST LIMIT 1"
    row = con.execute(sql, [value]).fetchone()
    return str(row[0]) if row else None


def current(
    con: duckdb.DuckDBPyConnection, rule: Rule, now: datetime, *, lookback: timedelta = PROJECTION_LOOKBACK
) -> Evaluation | None:
    """The rule as it stands now; a per-run rule reports its latest run in scope (None: no run yet)."""
    if rule.window != "run":
        return evaluate(con, rule, now, lookback=lookback)
    latest = _latest_run(con, rule)
    return None if latest is None else evaluate(con, rule, now, trace_id=latest, lookback=lookback)


# --- which rules a batch touched ------------------------------------------------------------
@dataclass(frozen=True)
class Touched(Mapping[str, frozenset[str]]):
    """The scope values an ingested batch's runs carry: a ``ScopeValues`` mapping
    (``touched["tenant"]``), so ``list_rules(covering=touched)`` gives the rules it could have changed."""

    traces: frozenset[str] = frozenset()
    tenants: frozenset[str] = frozenset()
    agents: frozenset[str] = frozenset()
    models: frozenset[str] = frozenset()
    call_sites: frozenset[str] = frozenset()
    tools: frozenset[str] = frozenset()  # the tools its runs called (``tool=NAME`` health rules)

    def __bool__(self) -> bool:
        return bool(self.traces)

    def _by_kind(self) -> dict[str, frozenset[str]]:
        return {
            "tenant": self.tenants,
            "agent": self.agents,
            "model": self.models,
            "call_site": self.call_sites,
            "run": self.traces,
            "tool": self.tools,
        }

    def __getitem__(self, kind: str) -> frozenset[str]:
        return self._by_kind()[kind]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_kind())

    def __len__(self) -> int:
        return len(self._by_kind())


_TOUCHED = """
SELECT (SELECT {'tenants': list_distinct(list(c.tenant)), 'models': list_distinct(list(c.model)),
                'call_sites': list_distinct(list(c.call_site))}
        FROM charges c WHERE c.trace_id IN (SELECT unnest(?::VARCHAR[]))),
       (SELECT {'tenants': list_distinct(list(r.tenant)), 'agents': list_distinct(list(r.agent_name))}
        FROM runs r WHERE r.trace_id IN (SELECT unnest(?::VARCHAR[]))),
       (SELECT list_distinct(list(s.tool)) FROM spans s
        WHERE s.trace_id IN (SELECT unnest(?::VARCHAR[])) AND s.tool IS NOT NULL)
"""


def touched_by(con: duckdb.DuckDBPyConnection, trace_ids: Iterable[str]) -> Touched:
    """Tenants, agents, models, call sites and tools of these runs (all their rows, not just new ones)."""
    ids = sorted(set(trace_ids))
    if not ids:
        return Touched()
    row = con.execute(_TOUCHED, [ids, ids, ids]).fetchone()
    ch, ru, tools = row or (None, None, None)
    ch, ru = ch or {}, ru or {}

    def values(*lists: Any) -> frozenset[str]:
        return frozenset(str(v) for lst in lists for v in (lst or ()) if v is not None)

    return Touched(
        frozenset(ids),
        values(ch.get("tenants"), ru.get("tenants")),
        values(ru.get("agents")),
        values(ch.get("models")),
        values(ch.get("call_sites")),
        values(tools),
    )
