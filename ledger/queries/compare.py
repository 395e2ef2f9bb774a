"""Two versions side by side: the per-run rows and tool calls ``ledger.compare_stats`` compares.

A version is a value of one dimension of a run (``COMPARE_DIMENSIONS``). For
``model`` it is the run's models (``runs.models``: comma-joined when a run used
several), so the two groups never share a run and a run that mixed models is
its own group rather than counted twice.
"""

from __future__ import annotations

from .core import BUCKETS, INPUT_TOKENS, NO_FILTERS, Filters, Query, choose, filtered, query
from .health import _RUN_MS  # a run's duration, as the Health page's latency figures take it

__all__ = [
    "COMPARE_DIMENSIONS",
    "MARKED_DIMENSIONS",
    "compare_runs",
    "compare_tools",
    "compare_versions",
    "outcomes_over_time",
    "version_changes",
]

# dimension -> its runs column
COMPARE_DIMENSIONS = {
    "prompt_version": "prompt_version",
    "agent_version": "agent_version",
    "model": "models",
    "tool_schema_version": "tool_schema_version",
    "service_version": "service_version",
    "environment": "environment",
    "variant": "variant",
}
# The dimensions whose changes the time charts mark (a deployment changes them), and each one's short label.
MARKED_DIMENSIONS = {
    "prompt_version": "prompt",
    "agent_version": "agent",
    "service_version": "service",
    "tool_schema_version": "tools",
}
_TOOL_PREFIX = "execute_tool "  # the GenAI span name of a tool call: ``execute_tool {tool}``


def _column(by: str) -> str:
    choose("by", by, COMPARE_DIMENSIONS)
    return COMPARE_DIMENSIONS[by]


@query
def compare_versions(f: Filters = NO_FILTERS, by: str = "prompt_version") -> Query:
    """The values a dimension takes, with their runs (finished: with a stop cause, as compared) and when each
    was first and last seen (newest first)."""
    column = _column(by)
    w, p = filtered(f)
    return Query(
        w
        + f"""SELECT {column} AS version, count(*) AS runs, count(*) FILTER (WHERE stop_cause IS NOT NULL) AS finished_runs,
       min(started_at) AS first_seen, max(started_at) AS last_seen
FROM fr WHERE {column} IS NOT NULL GROUP BY 1 ORDER BY first_seen DESC, version""",
        p,
    )


@query
def compare_runs(f: Filters = NO_FILTERS, by: str = "prompt_version", a: str = "", b: str = "") -> Query:
    """One row per finished run of version ``a`` or ``b``: what each compared metric is computed from."""
    column = _column(by)
    w, p = filtered(f)
    return Query(
        w
        + f"""SELECT {column} AS version, trace_id, usd_total, stop_cause, status_code, model_calls,
       epoch_ns(ended_at - started_at) / 1e9 AS duration_s, cache_read_tokens, {INPUT_TOKENS} AS input_tokens,
       tool_calls, soft_failures AS tool_errors
FROM fr WHERE {column} IN (?, ?) AND stop_cause IS NOT NULL ORDER BY version, started_at, trace_id""",
        [*p, a, b],
    )


@query
def compare_tools(f: Filters = NO_FILTERS, by: str = "prompt_version", a: str = "", b: str = "") -> Query:
    """Tool calls per tool for the finished runs of version ``a`` or ``b`` (the tool-selection distribution)."""
    column = _column(by)
    w, p = filtered(f)
    return Query(
        w
        + f""", v AS (SELECT trace_id, {column} AS version FROM fr WHERE {column} IN (?, ?) AND stop_cause IS NOT NULL)
SELECT v.version, substr(s.name, {len(_TOOL_PREFIX) + 1}) AS tool, count(*) AS calls
FROM spans s JOIN v USING (trace_id)
WHERE s.operation = 'execute_tool' AND starts_with(s.name, ?)
GROUP BY ALL ORDER BY v.version, calls DESC, tool""",
        [*p, a, b, _TOOL_PREFIX],
    )


@query
def version_changes(f: Filters = NO_FILTERS, limit: int = 12) -> Query:
    """When each version of a ``MARKED_DIMENSIONS`` dimension first appeared in the selection, newest first.

    The first version of each dimension is left out: it is where the selection starts, not a change.
    """
    w, p = filtered(f)
    firsts = " UNION ALL ".join(
        f"SELECT '{d}' AS dimension, {d} AS version, min(started_at) AS first_seen FROM fr "
        f"WHERE {d} IS NOT NULL GROUP BY {d}"
        for d in MARKED_DIMENSIONS
    )
    return Query(
        w
        + f""", v AS ({firsts})
SELECT dimension, version, first_seen FROM v
QUALIFY first_seen > min(first_seen) OVER (PARTITION BY dimension)
ORDER BY first_seen DESC, dimension, version LIMIT ?""",
        [*p, int(limit)],
    )


@query
def outcomes_over_time(f: Filters = NO_FILTERS, bucket: str = "day") -> Query:
    """Finished runs per time bucket: how many, the share that succeeded, and their p95 duration (ms)."""
    choose("bucket", bucket, BUCKETS)
    w, p = filtered(f)
    return Query(
        w
        + f"""SELECT date_trunc('{bucket}', started_at) AS bucket, count(*) AS runs,
       count(*) FILTER (WHERE stop_cause = 'completed')::DOUBLE / count(*) AS success_rate,
       quantile_disc({_RUN_MS}, 0.95) AS p95_run_ms
FROM fr WHERE stop_cause IS NOT NULL AND ended_at IS NOT NULL GROUP BY 1 ORDER BY 1""",
        p,
    )
