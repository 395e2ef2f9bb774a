"""Named queries over the ledger: pure builders of SQL + bound parameters.

A builder never touches a connection; ``run`` executes one and returns a
DataFrame (USD as float, for display), ``records`` returns exact rows (USD as
Decimal, for reports). Values are always bound; the only identifiers that vary
are chosen from fixed allow-lists in this module. ``QUERIES`` is the registry
the server's named-query API and the dashboard use.

Definitions used throughout:
* cost of a run = sum of its charges' four USD terms (every attempt included);
* percentiles are nearest-rank (``quantile_disc``): each is a real run's cost;
* cache hit rate = cache_read / (uncached_input + cache_write + cache_read);
* a successful run is one whose stop cause is ``completed``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import duckdb
import pandas as pd

from . import conventions as c

__all__ = [
    "CACHE_HEALTHY",
    "CACHE_WEAK",
    "QUERIES",
    "Filters",
    "Query",
    "alert_history",
    "budget_events",
    "budget_status",
    "cache_hit_rate",
    "cache_verdict",
    "call_site_attribution",
    "charge_totals",
    "cost_by_turns",
    "cost_histogram",
    "cost_per_run",
    "cost_per_successful_run",
    "filter_values",
    "find_runs",
    "guard_summary",
    "long_tail",
    "loop_spend",
    "loop_trip_runs",
    "loop_trips",
    "loop_trips_over_time",
    "model_attribution",
    "price_sources",
    "records",
    "retry_charges",
    "run",
    "run_budget_limits",
    "run_guard_events",
    "run_header",
    "run_summary",
    "run_trace_tree",
    "run_turns",
    "runs_table",
    "spend_over_time",
    "stop_causes",
    "time_bounds",
    "typical_run",
    "unpriced_models",
    "where_the_money_went",
]

CACHE_HEALTHY = 0.7  # hit rate above this: healthy (seed ex. 7)
CACHE_WEAK = 0.1  # above this: weak; otherwise broken


@dataclass(frozen=True)
class Query:
    sql: str
    params: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class Filters:
    """Narrows every query to runs started in [since, until) and matching the rest."""

    since: datetime | None = None
    until: datetime | None = None
    tenant: str | None = None
    agent: str | None = None
    model: str | None = None
    agent_version: str | None = None
    prompt_version: str | None = None


NO_FILTERS = Filters()
USD = "(usd_input + usd_output + usd_cache_write + usd_cache_read)"


def cache_verdict(rate: float | None) -> str:
    if rate is None:
        return "no data"
    return "healthy" if rate > CACHE_HEALTHY else "weak" if rate > CACHE_WEAK else "broken"


def _runs_where(f: Filters) -> tuple[str, list[Any]]:
    clauses: list[str] = ["TRUE"]
    params: list[Any] = []
    for column, value in (
        ("tenant", f.tenant),
        ("agent_name", f.agent),
        ("agent_version", f.agent_version),
        ("prompt_version", f.prompt_version),
    ):
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    if f.since is not None:
        clauses.append("started_at >= ?")
        params.append(f.since)
    if f.until is not None:
        clauses.append("started_at < ?")
        params.append(f.until)
    if f.model is not None:
        clauses.append("EXISTS (SELECT 1 FROM charges m WHERE m.trace_id = runs.trace_id AND m.model = ?)")
        params.append(f.model)
    return " AND ".join(clauses), params


def _with(f: Filters) -> tuple[str, list[Any]]:
    """CTEs ``fr`` (filtered runs) and ``fc`` (their charges, model-filtered too)."""
    where, params = _runs_where(f)
    model_clause = ""
    if f.model is not None:
        model_clause = "WHERE c.model = ?"
        params = [*params, f.model]
    # Every charge belongs to a run row, so without run-level filters the join
    # to the filtered runs only costs time (about 40% of a charge query).
    run_filtered = any(v is not None for v in (f.since, f.until, f.tenant, f.agent, f.agent_version, f.prompt_version))
    join = "SEMI JOIN fr USING (trace_id)" if run_filtered else ""
    sql = (
        f"WITH fr AS (SELECT * FROM runs WHERE {where}),\n"
        f"fc AS (SELECT c.*, {USD} AS usd FROM charges c {join} {model_clause})\n"
    )
    return sql, params


def cost_per_run(f: Filters = NO_FILTERS) -> Query:
    w, p = _with(f)
    return Query(
        w
        + """SELECT count(*) AS runs, coalesce(sum(usd_total), 0) AS total_usd,
       quantile_disc(usd_total, 0.5) AS median_usd, quantile_disc(usd_total, 0.95) AS p95_usd,
       quantile_disc(usd_total, 0.99) AS p99_usd, max(usd_total) AS max_usd, avg(usd_total) AS mean_usd
FROM fr""",
        p,
    )


def cost_per_successful_run(f: Filters = NO_FILTERS) -> Query:
    """All spend (failed runs included) divided by the runs that completed."""
    w, p = _with(f)
    return Query(
        w
        + """SELECT count(*) FILTER (WHERE stop_cause = 'completed') AS successful_runs, count(*) AS runs,
       coalesce(sum(usd_total), 0) AS total_usd,
       sum(usd_total) / nullif(count(*) FILTER (WHERE stop_cause = 'completed'), 0) AS usd_per_successful_run,
       quantile_disc(usd_total, 0.5) FILTER (WHERE stop_cause = 'completed') AS median_successful_usd
FROM fr""",
        p,
    )


_HIT = "sum(cache_read_tokens)::DOUBLE / nullif(sum(uncached_input_tokens + cache_write_tokens + cache_read_tokens), 0)"
_HIT_GROUPS = {"overall": None, "model": "model", "run": "trace_id", "tenant": "tenant", "call_site": "call_site"}


def cache_hit_rate(f: Filters = NO_FILTERS, by: str = "overall") -> Query:
    """Hit rate overall or per model / run / tenant / call site (see ``run_turns`` for per turn)."""
    if by not in _HIT_GROUPS:
        raise ValueError(f"by={by!r}: choose one of {sorted(_HIT_GROUPS)}")
    w, p = _with(f)
    group = _HIT_GROUPS[by]
    select = f"{group} AS {by}, " if group else ""
    tail = f" GROUP BY {group} ORDER BY hit_rate NULLS LAST" if group else ""
    return Query(
        w
        + f"""SELECT {select}{_HIT} AS hit_rate, sum(cache_read_tokens) AS cache_read_tokens,
       sum(cache_write_tokens) AS cache_write_tokens, sum(uncached_input_tokens) AS uncached_input_tokens,
       CASE WHEN {_HIT} IS NULL THEN 'no data' WHEN {_HIT} > {CACHE_HEALTHY} THEN 'healthy'
            WHEN {_HIT} > {CACHE_WEAK} THEN 'weak' ELSE 'broken' END AS verdict
FROM fc{tail}""",
        p,
    )


def where_the_money_went(f: Filters = NO_FILTERS) -> Query:
    w, p = _with(f)
    return Query(
        w
        + f"""SELECT coalesce(sum(usd), 0) AS total_usd,
       sum(usd_output) / nullif(sum(usd), 0) AS share_output,
       sum(usd_cache_write) / nullif(sum(usd), 0) AS share_cache_write,
       sum(usd_cache_read) / nullif(sum(usd), 0) AS share_cache_read,
       sum(usd_input) / nullif(sum(usd), 0) AS share_uncached_input,
       {_HIT} AS cache_hit_rate
FROM fc""",
        p,
    )


def _attribution(f: Filters, column: str) -> Query:
    w, p = _with(f)
    return Query(
        w
        + f"""SELECT {column}, count(*) AS calls, sum(usd_input) AS usd_input, sum(usd_output) AS usd_output,
       sum(usd_cache_write) AS usd_cache_write, sum(usd_cache_read) AS usd_cache_read, sum(usd) AS usd_total,
       sum(usd) / nullif(sum(sum(usd)) OVER (), 0) AS share, count(*) FILTER (WHERE unpriced) AS unpriced_calls
FROM fc GROUP BY {column} ORDER BY usd_total DESC, {column}""",
        p,
    )


def model_attribution(f: Filters = NO_FILTERS) -> Query:
    """Per model: calls and the four USD terms, with the share of total spend."""
    return _attribution(f, "model")


def call_site_attribution(f: Filters = NO_FILTERS) -> Query:
    """Per call-site label (the agent loop, a summarizer inside a tool, a router...)."""
    return _attribution(f, "call_site")


def retry_charges(f: Filters = NO_FILTERS) -> Query:
    """Attempts after the first, by retry cause, with their USD and share of all spend."""
    w, p = _with(f)
    return Query(
        w
        + """SELECT coalesce(nullif(retry_cause, ''), 'unknown') AS cause, count(*) AS attempts, sum(usd) AS usd,
       sum(usd) / nullif((SELECT sum(usd) FROM fc), 0) AS share_of_spend, count(DISTINCT trace_id) AS runs
FROM fc WHERE attempt > 1 GROUP BY 1 ORDER BY usd DESC""",
        p,
    )


def loop_trips(f: Filters = NO_FILTERS) -> Query:
    """Loop-detector trips by shape (nudges and halts), the runs they hit and those runs' whole spend."""
    w, p = _with(f)
    return Query(
        w
        + f"""SELECT g.shape, count(*) AS trips, count(*) FILTER (WHERE g.action = 'nudge') AS nudges,
       count(*) FILTER (WHERE g.action = 'halt') AS halts, count(DISTINCT g.trace_id) AS runs_affected,
       (SELECT sum(usd_total) FROM fr WHERE trace_id IN
           (SELECT trace_id FROM guard_events x WHERE x.name = '{c.EVENT_LOOP_TRIP}' AND x.shape IS NOT DISTINCT FROM g.shape)
       ) AS spend_in_affected_runs
FROM guard_events g SEMI JOIN fr USING (trace_id)
WHERE g.name = '{c.EVENT_LOOP_TRIP}' GROUP BY g.shape ORDER BY trips DESC, g.shape""",
        p,
    )


def guard_summary(f: Filters = NO_FILTERS) -> Query:
    """Run-level guard figures: loop trips and the runs they hit, step-cap and budget-stop rates."""
    w, p = _with(f)
    return Query(
        w
        + """SELECT coalesce(sum(loop_trips), 0) AS loop_trips,
       count(*) FILTER (WHERE loop_trips > 0) AS runs_with_loop_trips,
       coalesce(sum(usd_total) FILTER (WHERE loop_trips > 0), 0) AS spend_in_looping_runs,
       avg((stop_cause = 'max_steps')::INTEGER) AS step_cap_rate,
       avg((stop_cause = 'budget_exceeded')::INTEGER) AS budget_stop_rate,
       coalesce(sum(unpriced_calls), 0) AS unpriced_calls
FROM fr""",
        p,
    )


def stop_causes(f: Filters = NO_FILTERS) -> Query:
    w, p = _with(f)
    return Query(
        w
        + """SELECT coalesce(stop_cause, 'in progress') AS stop_cause, count(*) AS runs,
       count(*) / sum(count(*)) OVER () AS share, sum(usd_total) AS usd
FROM fr GROUP BY 1 ORDER BY runs DESC, stop_cause""",
        p,
    )


def long_tail(f: Filters = NO_FILTERS, limit: int = 20) -> Query:
    """The most expensive runs, with what made them expensive."""
    w, p = _with(f)
    return Query(
        w
        + """SELECT trace_id, agent_name, tenant, started_at, stop_cause, turns, model_calls, tool_calls,
       uncached_input_tokens + cache_write_tokens + cache_read_tokens AS input_tokens, output_tokens,
       cache_read_tokens::DOUBLE / nullif(uncached_input_tokens + cache_write_tokens + cache_read_tokens, 0) AS hit_rate,
       retry_attempts, loop_trips, models, usd_total,
       usd_total / nullif(quantile_disc(usd_total, 0.5) OVER (), 0) AS times_median
FROM fr ORDER BY usd_total DESC, trace_id LIMIT ?""",
        [*p, int(limit)],
    )


def runs_table(f: Filters = NO_FILTERS, limit: int = 500) -> Query:
    """Recent runs for finding one: id, tenant, cost, stop cause."""
    w, p = _with(f)
    return Query(
        w
        + """SELECT trace_id, started_at, agent_name, tenant, stop_cause, turns, tool_calls, loop_trips,
       retry_attempts, usd_total FROM fr ORDER BY started_at DESC, trace_id LIMIT ?""",
        [*p, int(limit)],
    )


def unpriced_models(f: Filters = NO_FILTERS) -> Query:
    w, p = _with(f)
    return Query(
        w
        + """SELECT provider, model, count(*) AS calls, count(DISTINCT trace_id) AS runs,
       sum(uncached_input_tokens + cache_write_tokens + cache_read_tokens) AS input_tokens,
       sum(output_tokens) AS output_tokens
FROM fc WHERE unpriced GROUP BY provider, model ORDER BY calls DESC""",
        p,
    )


_BUCKETS = {"minute", "hour", "day", "week", "month"}


def spend_over_time(f: Filters = NO_FILTERS, bucket: str = "day") -> Query:
    if bucket not in _BUCKETS:
        raise ValueError(f"bucket={bucket!r}: choose one of {sorted(_BUCKETS)}")
    w, p = _with(f)
    return Query(
        w + f"SELECT date_trunc('{bucket}', start_time) AS bucket, model, sum(usd) AS usd, count(*) AS calls "
        "FROM fc GROUP BY 1, 2 ORDER BY 1, 2",
        p,
    )


def run_summary(trace_id: str) -> Query:
    return Query("SELECT * FROM runs WHERE trace_id = ?", [trace_id])


def run_turns(trace_id: str) -> Query:
    """One row per model call (attempts folded in) in time order, with cumulative cost."""
    return Query(
        f"""WITH calls AS (
    SELECT call_id, min(start_time) AS start_time, arg_max(span_id, start_time) AS span_id,
           any_value(call_site) AS call_site, arg_max(model, start_time) AS model, count(*) AS attempts,
           sum(uncached_input_tokens) AS uncached_input_tokens, sum(cache_write_tokens) AS cache_write_tokens,
           sum(cache_read_tokens) AS cache_read_tokens, sum(output_tokens) AS output_tokens,
           sum(usd_input) AS usd_input, sum(usd_output) AS usd_output,
           sum(usd_cache_write) AS usd_cache_write, sum(usd_cache_read) AS usd_cache_read,
           sum({USD}) AS usd, bool_or(unpriced) AS unpriced
    FROM charges WHERE trace_id = ? GROUP BY call_id
)
SELECT row_number() OVER (ORDER BY start_time, call_id) AS turn, *,
       cache_read_tokens::DOUBLE / nullif(uncached_input_tokens + cache_write_tokens + cache_read_tokens, 0) AS hit_rate,
       sum(usd) OVER (ORDER BY start_time, call_id) AS cumulative_usd
FROM calls ORDER BY turn""",
        [trace_id],
    )


def run(con: duckdb.DuckDBPyConnection, query: Query) -> pd.DataFrame:
    """Execute for display: a DataFrame, USD as float."""
    return con.execute(query.sql, query.params).df()


def records(con: duckdb.DuckDBPyConnection, query: Query) -> list[dict[str, Any]]:
    """Execute for reports: a list of dicts with exact Decimal USD."""
    cur = con.execute(query.sql, query.params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


# The named-query registry: name -> builder. Builders take Filters and/or plain
# typed keyword arguments, never SQL, so exposing them over HTTP is safe.
QUERIES: dict[str, Callable[..., Query]] = {
    fn.__name__: fn
    for fn in (
        cost_per_run,
        cost_per_successful_run,
        cache_hit_rate,
        where_the_money_went,
        model_attribution,
        call_site_attribution,
        retry_charges,
        loop_trips,
        guard_summary,
        stop_causes,
        long_tail,
        runs_table,
        unpriced_models,
        spend_over_time,
        run_summary,
        run_turns,
    )
}


# --- Dashboard queries ---------------------------------------------------------------------
# Added for the dashboard (issue 5). Same rules as above: values bound, the only
# identifiers that vary come from the allow-lists right here.

_TOOL_NAME = f"json_extract_string(s.attributes, '$.\"{c.TOOL_NAME}\"')"
_TOOL_RESULT = "json_extract_string(s.attributes, '$.\"gen_ai.tool.call.result\"')"
_SOFT_FAILURE = f"coalesce(json_extract_string(s.attributes, '$.\"{c.TOOL_SOFT_FAILURE}\"') = 'true', FALSE)"
_DIMENSIONS = {
    "tenant": ("runs", "tenant"),
    "agent": ("runs", "agent_name"),
    "agent_version": ("runs", "agent_version"),
    "prompt_version": ("runs", "prompt_version"),
    "model": ("charges", "model"),
    "stop_cause": ("runs", "stop_cause"),
}
_FIND_ORDER = {"recent": "started_at DESC, trace_id", "cost": "usd_total DESC, trace_id"}
_BUDGET_EVENTS = f"('{c.EVENT_BUDGET_WARN}', '{c.EVENT_BUDGET_STOP}')"


def filter_values(dimension: str = "tenant") -> Query:
    """Distinct values of one filter dimension (tenant, agent, model, versions, stop cause)."""
    if dimension not in _DIMENSIONS:
        raise ValueError(f"dimension={dimension!r}: choose one of {sorted(_DIMENSIONS)}")
    table, column = _DIMENSIONS[dimension]
    return Query(f"SELECT DISTINCT {column} AS value FROM {table} WHERE {column} IS NOT NULL ORDER BY 1")


def time_bounds(f: Filters = NO_FILTERS) -> Query:
    """How many runs match and when the first and last of them started."""
    w, p = _with(f)
    return Query(w + "SELECT count(*) AS runs, min(started_at) AS first_run, max(started_at) AS last_run FROM fr", p)


def charge_totals(f: Filters = NO_FILTERS) -> Query:
    """One pass over the charges for the headline figures: cache hit rate (and verdict), retry
    attempts with their USD and share of all spend, unpriced calls."""
    w, p = _with(f)
    return Query(
        w
        + f"""SELECT coalesce(sum(usd), 0) AS total_usd, {_HIT} AS hit_rate,
       CASE WHEN {_HIT} IS NULL THEN 'no data' WHEN {_HIT} > {CACHE_HEALTHY} THEN 'healthy'
            WHEN {_HIT} > {CACHE_WEAK} THEN 'weak' ELSE 'broken' END AS verdict,
       count(*) FILTER (WHERE attempt > 1) AS retry_attempts,
       coalesce(sum(usd) FILTER (WHERE attempt > 1), 0) AS retry_usd,
       coalesce(sum(usd) FILTER (WHERE attempt > 1), 0) / nullif(sum(usd), 0) AS retry_share_of_spend,
       -- distinct over the few retried rows only: a FILTERed DISTINCT aggregate hashes every row
       (SELECT count(DISTINCT trace_id) FROM fc WHERE attempt > 1) AS runs_with_retries,
       count(*) FILTER (WHERE unpriced) AS unpriced_calls
FROM fc""",
        p,
    )


def cost_histogram(f: Filters = NO_FILTERS, bins_per_decade: int = 5) -> Query:
    """Runs per cost bin on a log scale; runs that cost $0 (unpriced) form one bin with lo = hi = 0."""
    n = int(bins_per_decade)
    if not 1 <= n <= 50:
        raise ValueError(f"bins_per_decade={bins_per_decade!r}: choose 1..50")
    w, p = _with(f)
    return Query(
        w
        + """, b AS (SELECT CASE WHEN usd_total > 0 THEN floor(log10(usd_total::DOUBLE) * ?) END AS bin, count(*) AS runs
           FROM fr GROUP BY 1)
SELECT coalesce(power(10, bin / ?), 0) AS lo_usd, coalesce(power(10, (bin + 1) / ?), 0) AS hi_usd, runs
FROM b ORDER BY bin NULLS FIRST""",
        [*p, n, n, n],
    )


def cost_by_turns(f: Filters = NO_FILTERS) -> Query:
    """Cost per run by number of turns (agent-loop model calls): the quadratic-growth view."""
    w, p = _with(f)
    return Query(
        w
        + """SELECT turns, count(*) AS runs, quantile_disc(usd_total, 0.5) AS median_usd,
       quantile_disc(usd_total, 0.95) AS p95_usd, max(usd_total) AS max_usd, avg(usd_total) AS mean_usd,
       quantile_disc(uncached_input_tokens + cache_write_tokens + cache_read_tokens, 0.5) AS median_input_tokens
FROM fr GROUP BY turns ORDER BY turns""",
        p,
    )


def typical_run(f: Filters = NO_FILTERS) -> Query:
    """The median run's shape, to say how an expensive run differs from it; and the tail's share (runs at or above p95)."""
    w, p = _with(f)
    return Query(
        w
        + """SELECT count(*) AS runs, quantile_disc(turns, 0.5) AS median_turns,
       quantile_disc(uncached_input_tokens + cache_write_tokens + cache_read_tokens, 0.5) AS median_input_tokens,
       quantile_disc(usd_total, 0.5) AS median_usd, quantile_disc(usd_total, 0.95) AS p95_usd,
       sum(usd_total) FILTER (WHERE usd_total >= (SELECT quantile_disc(usd_total, 0.95) FROM fr))
           / nullif(sum(usd_total), 0) AS share_of_spend_from_p95,
       count(*) FILTER (WHERE usd_total >= (SELECT quantile_disc(usd_total, 0.95) FROM fr)) AS runs_from_p95
FROM fr""",
        p,
    )


def find_runs(
    f: Filters = NO_FILTERS,
    trace_id: str | None = None,
    stop_cause: str | None = None,
    min_usd: float | None = None,
    max_usd: float | None = None,
    order: str = "recent",
    limit: int = 200,
) -> Query:
    """Runs matching a trace-id prefix, stop cause and cost range, most recent or most expensive first."""
    if order not in _FIND_ORDER:
        raise ValueError(f"order={order!r}: choose one of {sorted(_FIND_ORDER)}")
    w, p = _with(f)
    clauses: list[str] = ["TRUE"]
    params: list[Any] = []
    if trace_id:
        clauses.append("starts_with(trace_id, ?)")
        params.append(trace_id.strip().lower())
    if stop_cause:
        clauses.append("coalesce(stop_cause, 'in progress') = ?")
        params.append(stop_cause)
    if min_usd is not None:
        clauses.append("usd_total >= ?")
        params.append(float(min_usd))
    if max_usd is not None:
        clauses.append("usd_total <= ?")
        params.append(float(max_usd))
    return Query(
        w
        + f"""SELECT trace_id, started_at, agent_name, tenant, coalesce(stop_cause, 'in progress') AS stop_cause, turns,
       model_calls, tool_calls, soft_failures, loop_trips, retry_attempts, models, usd_total
FROM fr WHERE {" AND ".join(clauses)} ORDER BY {_FIND_ORDER[order]} LIMIT ?""",
        [*p, *params, int(limit)],
    )


def run_header(trace_id: str) -> Query:
    """One run's row with its cache hit rate and verdict (``run_summary`` plus the cache figure)."""
    hit = "cache_read_tokens::DOUBLE / nullif(uncached_input_tokens + cache_write_tokens + cache_read_tokens, 0)"
    return Query(
        f"""SELECT *, {hit} AS hit_rate,
       CASE WHEN {hit} IS NULL THEN 'no data' WHEN {hit} > {CACHE_HEALTHY} THEN 'healthy'
            WHEN {hit} > {CACHE_WEAK} THEN 'weak' ELSE 'broken' END AS verdict
FROM runs WHERE trace_id = ?""",
        [trace_id],
    )


def run_trace_tree(trace_id: str) -> Query:
    """Every span of a run for the trace tree: timing, status, tool outcome, tokens and cost.

    ``offset_ms`` is from the run's first span; durations come from nanosecond
    epochs (``epoch_ms`` on TIMESTAMP_NS fails on duckdb 2.0).
    """
    return Query(
        f"""SELECT s.span_id, s.parent_span_id, s.name, s.operation, s.kind,
       s.start_time, s.end_time,
       (epoch_ns(s.start_time) - min(epoch_ns(s.start_time)) OVER ()) / 1e6 AS offset_ms,
       (epoch_ns(s.end_time) - epoch_ns(s.start_time)) / 1e6 AS duration_ms,
       s.status_code, s.status_message, {_TOOL_NAME} AS tool, {_SOFT_FAILURE} AS soft_failure,
       {_TOOL_RESULT} AS tool_result, coalesce(json_array_length(s.events), 0) AS events,
       c.model, c.attempt, nullif(c.retry_cause, '') AS retry_cause, c.finish_reason, c.error_type,
       c.uncached_input_tokens, c.cache_write_tokens, c.cache_read_tokens, c.output_tokens, c.unpriced,
       {USD.replace("usd_", "c.usd_")} AS usd
FROM spans s LEFT JOIN charges c USING (trace_id, span_id)
WHERE s.trace_id = ? ORDER BY s.start_time, s.span_id""",
        [trace_id],
    )


def run_guard_events(trace_id: str) -> Query:
    """A run's guard events in time order, with the span they were recorded on."""
    return Query(
        """SELECT g.time, (epoch_ns(g.time) - epoch_ns(r.started_at)) / 1e6 AS offset_ms, g.name, g.shape, g.action,
       g.tool, g.cause, g.attributes, g.span_id, s.name AS span_name
FROM guard_events g LEFT JOIN spans s USING (trace_id, span_id) LEFT JOIN runs r USING (trace_id)
WHERE g.trace_id = ? ORDER BY g.time, g.span_id, g.seq""",
        [trace_id],
    )


def run_budget_limits(trace_id: str) -> Query:
    """USD limits that applied to one run: from its budget events, and per-run spend budgets in scope."""
    return Query(
        f"""SELECT 'event' AS source, replace(g.name, 'turnledger.', '') AS name,
       TRY_CAST(json_extract_string(g.attributes, '$.limit_usd') AS DOUBLE) AS limit_usd,
       TRY_CAST(json_extract_string(g.attributes, '$.fraction') AS DOUBLE) AS fraction
FROM guard_events g
WHERE g.trace_id = ? AND g.name IN {_BUDGET_EVENTS} AND json_extract_string(g.attributes, '$.limit_usd') IS NOT NULL
UNION ALL
SELECT 'budget' AS source, b.name, b.limit_value::DOUBLE AS limit_usd, b.soft_fraction AS fraction
FROM budgets b JOIN runs r ON r.trace_id = ?
WHERE b.time_window = 'run' AND b.metric = 'spend' AND b.limit_value IS NOT NULL
  AND (b.scope_kind IN ('global', 'run') OR (b.scope_kind = 'tenant' AND b.scope_value = r.tenant)
       OR (b.scope_kind = 'agent' AND b.scope_value = r.agent_name))""",
        [trace_id, trace_id],
    )


def _loop_windows(f: Filters) -> tuple[str, list[Any]]:
    """CTEs ``lt`` (loop trips of filtered runs) and ``lw`` (one loop window per run and tool).

    A window runs from the run's first call of the tripped tool to its last
    trip; ``loop_usd`` is every model call started inside it: the calls that
    kept choosing the repeated tool. Tools are matched by span name
    (``execute_tool {tool}``, the GenAI convention) rather than by parsing span
    attributes: at millions of spans, reading the attribute JSON is what
    would make this page slow. (A tool also used normally before the loop
    widens the window; the figure is then an upper bound.)
    """
    w, p = _with(f)
    return (
        w
        + f""", lt AS (
    SELECT g.trace_id, g.time, coalesce(g.shape, 'unknown') AS shape, g.action, coalesce(g.tool, 'unknown') AS tool
    FROM guard_events g SEMI JOIN fr USING (trace_id) WHERE g.name = '{c.EVENT_LOOP_TRIP}'
),
tripped AS (
    SELECT trace_id, tool, count(*) AS trips, max(time) AS last_trip,
           string_agg(DISTINCT shape, ', ' ORDER BY shape) AS shapes,
           string_agg(DISTINCT action, ', ' ORDER BY action) AS actions
    FROM lt GROUP BY trace_id, tool
),
repeats AS (
    SELECT t.trace_id, t.tool, min(s.start_time) AS loop_start, count(*) AS repeated_calls
    FROM tripped t JOIN spans s ON s.trace_id = t.trace_id AND s.name = 'execute_tool ' || t.tool
    WHERE s.operation = 'execute_tool' AND s.start_time <= t.last_trip
    GROUP BY t.trace_id, t.tool
),
lw AS (
    SELECT t.*, r.loop_start, coalesce(r.repeated_calls, 0) AS repeated_calls,
           (SELECT sum({USD}) FROM charges ch WHERE ch.trace_id = t.trace_id
              AND ch.start_time BETWEEN r.loop_start AND t.last_trip) AS loop_usd
    FROM tripped t LEFT JOIN repeats r USING (trace_id, tool)
)
""",
        p,
    )


def loop_trips_over_time(f: Filters = NO_FILTERS, bucket: str = "day") -> Query:
    """Loop-detector trips per time bucket, shape and tool, with the spend of the runs they hit."""
    if bucket not in _BUCKETS:
        raise ValueError(f"bucket={bucket!r}: choose one of {sorted(_BUCKETS)}")
    w, p = _with(f)
    return Query(
        w
        + f""", per_run AS (
    SELECT date_trunc('{bucket}', g.time) AS bucket, coalesce(g.shape, 'unknown') AS shape,
           coalesce(g.tool, 'unknown') AS tool, g.trace_id, count(*) AS trips
    FROM guard_events g SEMI JOIN fr USING (trace_id) WHERE g.name = '{c.EVENT_LOOP_TRIP}'
    GROUP BY ALL
)
SELECT p.bucket, p.shape, p.tool, sum(p.trips) AS trips, count(*) AS runs_affected,
       sum(fr.usd_total) AS spend_in_affected_runs
FROM per_run p JOIN fr USING (trace_id) GROUP BY 1, 2, 3 ORDER BY 1, 2, 3""",
        p,
    )


def loop_trip_runs(f: Filters = NO_FILTERS, limit: int = 100) -> Query:
    """Runs with loop trips, per tool: trips, the repeated calls, the spend inside the loop and overall."""
    w, p = _loop_windows(f)
    return Query(
        w
        + """SELECT lw.trace_id, fr.agent_name, fr.tenant, fr.started_at, lw.tool, lw.shapes, lw.actions, lw.trips,
       lw.repeated_calls, lw.loop_start, lw.last_trip, coalesce(lw.loop_usd, 0) AS loop_usd,
       fr.usd_total AS run_usd, coalesce(fr.stop_cause, 'in progress') AS stop_cause
FROM lw JOIN fr USING (trace_id) ORDER BY loop_usd DESC, run_usd DESC, lw.trace_id, lw.tool LIMIT ?""",
        [*p, int(limit)],
    )


def loop_spend(f: Filters = NO_FILTERS) -> Query:
    """Totals of ``loop_trip_runs``: money spent inside loops, and in the runs that looped."""
    w, p = _loop_windows(f)
    return Query(
        w
        + """SELECT count(DISTINCT lw.trace_id) AS runs_affected, coalesce(sum(lw.trips), 0) AS trips,
       coalesce(sum(lw.repeated_calls), 0) AS repeated_calls, coalesce(sum(lw.loop_usd), 0) AS loop_usd,
       (SELECT coalesce(sum(usd_total), 0) FROM fr WHERE trace_id IN (SELECT trace_id FROM lw)) AS spend_in_affected_runs
FROM lw""",
        p,
    )


def budget_events(f: Filters = NO_FILTERS, limit: int = 200) -> Query:
    """Budget warn/stop events the harness recorded on runs (before any budget rule exists)."""
    w, p = _with(f)
    return Query(
        w
        + f"""SELECT g.time, g.trace_id, fr.agent_name, fr.tenant, replace(g.name, 'turnledger.budget.', '') AS level,
       json_extract_string(g.attributes, '$.kind') AS kind,
       TRY_CAST(json_extract_string(g.attributes, '$.spent_usd') AS DOUBLE) AS spent_usd,
       TRY_CAST(json_extract_string(g.attributes, '$.limit_usd') AS DOUBLE) AS limit_usd,
       TRY_CAST(json_extract_string(g.attributes, '$.fraction') AS DOUBLE) AS fraction,
       fr.usd_total AS run_usd, coalesce(fr.stop_cause, 'in progress') AS stop_cause
FROM guard_events g JOIN fr USING (trace_id) WHERE g.name IN {_BUDGET_EVENTS}
ORDER BY g.time DESC, g.trace_id LIMIT ?""",
        [*p, int(limit)],
    )


def budget_status() -> Query:
    """Each budget rule with the spend in its current window (spend budgets) and its latest alert.

    Windows are evaluated at query time in UTC: ``day``/``month`` from the start
    of the calendar period, ``rolling_*`` back from now. Per-run budgets and
    non-spend metrics have no single current value here; their latest alert is.
    """
    return Query(
        f"""WITH b AS (
    SELECT *, CASE time_window
        WHEN 'rolling_hour' THEN (now() AT TIME ZONE 'UTC') - INTERVAL 1 HOUR
        WHEN 'rolling_day' THEN (now() AT TIME ZONE 'UTC') - INTERVAL 1 DAY
        WHEN 'day' THEN date_trunc('day', now() AT TIME ZONE 'UTC')
        WHEN 'month' THEN date_trunc('month', now() AT TIME ZONE 'UTC') END AS window_start
    FROM budgets
),
latest AS (
    SELECT budget_id, arg_max(level, fired_at) AS last_level, max(fired_at) AS last_alert_at,
           arg_max(value, fired_at) AS last_alert_value, count(*) AS alerts
    FROM alerts GROUP BY budget_id
)
SELECT b.id, b.name, b.scope_kind, b.scope_value, b.time_window, b.metric, b.limit_value AS limit_usd,
       b.soft_fraction, b.window_start,
       CASE WHEN b.metric = 'spend' AND b.window_start IS NOT NULL THEN (
           SELECT coalesce(sum({USD.replace("usd_", "ch.usd_")}), 0) FROM charges ch LEFT JOIN runs r USING (trace_id)
           WHERE ch.start_time >= b.window_start
             AND (b.scope_kind = 'global' OR (b.scope_kind = 'tenant' AND ch.tenant = b.scope_value)
                  OR (b.scope_kind = 'agent' AND r.agent_name = b.scope_value)
                  OR (b.scope_kind = 'model' AND ch.model = b.scope_value)
                  OR (b.scope_kind = 'call_site' AND ch.call_site = b.scope_value))) END AS current_usd,
       latest.last_level, latest.last_alert_at, latest.last_alert_value, coalesce(latest.alerts, 0) AS alerts
FROM b LEFT JOIN latest ON latest.budget_id = b.id ORDER BY b.name, b.id""",
    )


def alert_history(limit: int = 200) -> Query:
    """Alerts fired, newest first, with their budget and how delivery went."""
    return Query(
        """SELECT a.fired_at, a.level, b.name AS budget, b.scope_kind, b.scope_value, b.time_window,
       a.value, b.limit_value AS limit_usd, a.window_start, a.figures,
       (SELECT count(*) FROM alert_deliveries d WHERE d.alert_id = a.id) AS delivery_attempts,
       (SELECT arg_max(d.status, d.attempted_at) FROM alert_deliveries d WHERE d.alert_id = a.id) AS last_delivery
FROM alerts a LEFT JOIN budgets b ON b.id = a.budget_id ORDER BY a.fired_at DESC, a.id LIMIT ?""",
        [int(limit)],
    )


def price_sources(f: Filters = NO_FILTERS) -> Query:
    """Which price source and version priced each model's charges (what was actually applied)."""
    w, p = _with(f)
    return Query(
        w
        + """SELECT provider, model, price_source, price_version, count(*) AS calls, sum(usd) AS usd,
       min(start_time) AS first_call, max(start_time) AS last_call
FROM fc GROUP BY provider, model, price_source, price_version ORDER BY usd DESC, model, price_version""",
        p,
    )


QUERIES.update(
    {
        fn.__name__: fn
        for fn in (
            filter_values,
            time_bounds,
            charge_totals,
            cost_histogram,
            cost_by_turns,
            typical_run,
            find_runs,
            run_header,
            run_trace_tree,
            run_guard_events,
            run_budget_limits,
            loop_trips_over_time,
            loop_trip_runs,
            loop_spend,
            budget_events,
            budget_status,
            alert_history,
            price_sources,
        )
    }
)
