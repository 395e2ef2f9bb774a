"""Runs: finding them, how they ended, and one run in detail (turns, trace tree, guard events)."""

from __future__ import annotations

from typing import Any

from ledger import conventions as c
from ledger.health_columns import SOFT_FAILURE
from ledger.terms import token_columns, usd_columns, usd_sum

from .core import NO_FILTERS, ROW_HIT_RATE, Filters, Query, choose, filtered, query, sums, verdict_sql

__all__ = [
    "FIND_ORDER",
    "find_runs",
    "run_guard_events",
    "run_header",
    "run_summary",
    "run_trace_tree",
    "run_turns",
    "runs_table",
    "stop_causes",
]

_TOOL_NAME = f"json_extract_string(s.attributes, '$.\"{c.TOOL_NAME}\"')"


def _tool_content(key: str) -> str:
    """A tool span's argument or result text, wherever ingest keeps it (``ledger.content``): inline
    among the attributes (older ledgers), inline in its references, or in one of its run's blocks
    (``rb``: the query's run's, read through the trace index)."""
    path = f"'$.\"{key}\"'"
    block_key = f"unhex(CASE json_type(s.content_refs, {path}) WHEN 'VARCHAR' THEN s.content_refs ->> {path} END)"
    block = f"(SELECT json_extract_string(b.body, '$') FROM rb b WHERE b.hash = {block_key})"
    return (
        f"coalesce(json_extract_string(s.attributes, {path}), "
        f"json_extract_string(s.content_refs, '$.\"{key}\".v'), {block})"
    )


_TOOL_RESULT = _tool_content(c.TOOL_CALL_RESULT)
_TOOL_ARGUMENTS = _tool_content(c.TOOL_CALL_ARGUMENTS)
# find_runs' orders: the newest first, the most expensive first, the longest first.
FIND_ORDER = {
    "recent": "started_at DESC, trace_id",
    "cost": "usd_total DESC, trace_id",
    "turns": "turns DESC, trace_id",
}


@query
def runs_table(f: Filters = NO_FILTERS, limit: int = 500) -> Query:
    """Recent runs for finding one: id, tenant, cost, stop cause."""
    w, p = filtered(f)
    return Query(
        w
        + """SELECT trace_id, started_at, agent_name, tenant, stop_cause, turns, tool_calls, loop_trips,
       retry_attempts, usd_total FROM fr ORDER BY started_at DESC, trace_id LIMIT ?""",
        [*p, int(limit)],
    )


@query
def find_runs(
    f: Filters = NO_FILTERS,
    trace_id: str | None = None,
    stop_cause: str | None = None,
    min_usd: float | None = None,
    max_usd: float | None = None,
    order: str = "recent",
    limit: int = 200,
) -> Query:
    """Runs matching an id, stop cause and cost range, most recent or most expensive first.

    ``trace_id`` is a trace-id prefix or, exactly, a conversation id
    (``gen_ai.conversation.id``: the harness's run id), both case-insensitive.
    """
    choose("order", order, FIND_ORDER)
    w, p = filtered(f)
    clauses: list[str] = ["TRUE"]
    params: list[Any] = []
    if trace_id:
        clauses.append("(starts_with(trace_id, ?) OR lower(conversation_id) = ?)")
        params += [trace_id.strip().lower()] * 2
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
        + f"""SELECT trace_id, conversation_id, started_at, agent_name, tenant, coalesce(stop_cause, 'in progress') AS stop_cause, turns,
       model_calls, tool_calls, soft_failures, loop_trips, retry_attempts, models, usd_total
FROM fr WHERE {" AND ".join(clauses)} ORDER BY {FIND_ORDER[order]} LIMIT ?""",
        [*p, *params, int(limit)],
    )


@query
def stop_causes(f: Filters = NO_FILTERS) -> Query:
    w, p = filtered(f)
    return Query(
        w
        + """SELECT coalesce(stop_cause, 'in progress') AS stop_cause, count(*) AS runs,
       count(*) / sum(count(*)) OVER () AS share, sum(usd_total) AS usd
FROM fr GROUP BY 1 ORDER BY runs DESC, stop_cause""",
        p,
    )


@query
def run_summary(trace_id: str) -> Query:
    return Query("SELECT * FROM runs WHERE trace_id = ?", [trace_id])


@query
def run_header(trace_id: str) -> Query:
    """One run's row with its cache hit rate and verdict (``run_summary`` plus the cache figure)."""
    return Query(
        f"""SELECT *, {ROW_HIT_RATE} AS hit_rate,
       {verdict_sql(ROW_HIT_RATE)} AS verdict
FROM runs WHERE trace_id = ?""",
        [trace_id],
    )


@query
def run_turns(trace_id: str) -> Query:
    """One row per model call (attempts folded in) in time order, with cumulative cost."""
    return Query(
        f"""WITH calls AS (
    SELECT call_id, min(start_time) AS start_time, arg_max(span_id, start_time) AS span_id,
           any_value(call_site) AS call_site, arg_max(model, start_time) AS model, count(*) AS attempts,
           {sums(token_columns())},
           {sums(usd_columns())},
           sum({usd_sum()}) AS usd, bool_or(unpriced) AS unpriced,
           bool_or(incomplete_usage) AS incomplete_usage,
           CASE WHEN bool_or(cache_split = 'unknown') THEN 'unknown' END AS cache_split
    FROM charges WHERE trace_id = ? GROUP BY call_id
)
SELECT row_number() OVER (ORDER BY start_time, call_id) AS turn, *, {ROW_HIT_RATE} AS hit_rate,
       sum(usd) OVER (ORDER BY start_time, call_id) AS cumulative_usd
FROM calls ORDER BY turn""",
        [trace_id],
    )


@query
def run_trace_tree(trace_id: str) -> Query:
    """Every span of a run for the trace waterfall: timing, status, tool arguments and outcome, tokens and cost.

    ``offset_ms`` is from the run's first span; durations come from nanosecond
    epochs (``epoch_ms`` on TIMESTAMP_NS fails on duckdb 2.0). A model-call span
    that reports a billed call charged on another span (``ledger.billed``) has no
    charge; ``duplicate_of`` names the charged one (``duplicate_of_trace`` its trace, when another).
    """
    tokens = ", ".join(f"c.{column}" for column in token_columns())
    return Query(
        f"""WITH rb AS (SELECT hash, body FROM run_blocks WHERE trace_id = ?)
SELECT s.span_id, s.parent_span_id, s.name, s.operation, s.kind,
       s.start_time, s.end_time,
       (epoch_ns(s.start_time) - min(epoch_ns(s.start_time)) OVER ()) / 1e6 AS offset_ms,
       (epoch_ns(s.end_time) - epoch_ns(s.start_time)) / 1e6 AS duration_ms,
       s.status_code, s.status_message, {_TOOL_NAME} AS tool, {SOFT_FAILURE} AS soft_failure,
       {_TOOL_ARGUMENTS} AS tool_arguments, {_TOOL_RESULT} AS tool_result, coalesce(json_array_length(s.events), 0) AS events,
       c.model, c.attempt, nullif(c.retry_cause, '') AS retry_cause, c.finish_reason, c.error_type,
       {tokens}, c.unpriced, {usd_sum("c")} AS usd, d.duplicate_of,
       nullif(d.duplicate_of_trace, s.trace_id) AS duplicate_of_trace
FROM spans s LEFT JOIN charges c USING (trace_id, span_id)
LEFT JOIN call_copies d ON d.trace_id = s.trace_id AND d.span_id = s.span_id AND d.duplicate_of IS NOT NULL
WHERE s.trace_id = ? ORDER BY s.start_time, s.span_id""",
        [trace_id, trace_id],
    )


@query
def run_guard_events(trace_id: str) -> Query:
    """A run's guard events in time order, with the span they were recorded on."""
    return Query(
        """SELECT g.time, (epoch_ns(g.time) - epoch_ns(r.started_at)) / 1e6 AS offset_ms, g.name, g.shape, g.action,
       g.tool, g.cause, g.attributes, g.span_id, s.name AS span_name
FROM guard_events g LEFT JOIN spans s USING (trace_id, span_id) LEFT JOIN runs r USING (trace_id)
WHERE g.trace_id = ? ORDER BY g.time, g.span_id, g.seq""",
        [trace_id],
    )
