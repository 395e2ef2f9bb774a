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
    "cache_hit_rate",
    "cache_verdict",
    "call_site_attribution",
    "cost_per_run",
    "cost_per_successful_run",
    "guard_summary",
    "long_tail",
    "loop_trips",
    "model_attribution",
    "records",
    "retry_charges",
    "run",
    "run_spans",
    "run_summary",
    "run_turns",
    "runs_table",
    "spend_over_time",
    "stop_causes",
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
    clauses, params = ["TRUE"], []
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
    sql = (
        f"WITH fr AS (SELECT * FROM runs WHERE {where}),\n"
        f"fc AS (SELECT c.*, {USD} AS usd FROM charges c SEMI JOIN fr USING (trace_id) {model_clause})\n"
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
    """Loop-detector trips by shape and action, the runs they hit and those runs' whole spend."""
    w, p = _with(f)
    return Query(
        w
        + f"""SELECT g.shape, g.action, count(*) AS trips, count(DISTINCT g.trace_id) AS runs_affected,
       (SELECT sum(usd_total) FROM fr WHERE trace_id IN
           (SELECT trace_id FROM guard_events x WHERE x.name = '{c.EVENT_LOOP_TRIP}' AND x.shape IS NOT DISTINCT FROM g.shape)
       ) AS spend_in_affected_runs
FROM guard_events g SEMI JOIN fr USING (trace_id)
WHERE g.name = '{c.EVENT_LOOP_TRIP}' GROUP BY g.shape, g.action ORDER BY trips DESC""",
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


def run_spans(trace_id: str) -> Query:
    """Every span of a run with its charge (if a model call), for the trace tree."""
    return Query(
        f"""SELECT s.span_id, s.parent_span_id, s.name, s.operation, s.kind, s.start_time, s.end_time,
       epoch_ms(s.end_time) - epoch_ms(s.start_time) AS duration_ms, s.status_code, s.status_message,
       s.attributes, s.events, c.model, c.attempt, c.uncached_input_tokens, c.cache_write_tokens,
       c.cache_read_tokens, c.output_tokens, {USD.replace("usd_", "c.usd_")} AS usd
FROM spans s LEFT JOIN charges c USING (trace_id, span_id)
WHERE s.trace_id = ? ORDER BY s.start_time, s.span_id""",
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
        run_spans,
    )
}
