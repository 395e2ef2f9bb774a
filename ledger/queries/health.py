"""Operations health: how long runs and model calls take, how often calls fail and why, how tools fare.

Percentiles are nearest-rank (``quantile_disc``), as for cost: each is a real
run's, call's or tool call's duration. Durations come from nanosecond epochs.

* a run's duration is its root span's wall time (first span start to last span
  end, the runs rollup's ``started_at``/``ended_at``); runs whose root span has
  not arrived yet are still in progress and left out;
* a model call's latency is each charged attempt's span duration; failed attempts
  count in the error figures, not in the latency (a 429 answered in 5 ms is not
  a fast call);
* time to first token is ``gen_ai.response.time_to_first_chunk`` (seconds, on
  streamed chat spans; ``TIME_TO_FIRST_CHUNK``), kept in ms on the charge at ingest (``ttft_ms``);
* an errored run is a trace with any ERROR span (the seed's error rate), split by
  its root's ``error.type`` (``max_steps``, ``budget_exceeded``, a model call's
  cause), or ``span error`` when only a child span (a tool, an attempt) failed;
* a failed attempt is a charge whose span has ERROR status; its cause is its
  ``error.type`` (``429``, ``529``, ``5xx``, ``connection``/timeouts, else as
  reported); it *recovered* when a later attempt of the same call succeeded;
* a tool call fails hard when its span has ERROR status (an exception, an
  ``is_error`` result, a denial) and softly when it ran and said "nothing
  found" (``turnledger.tool.soft_failure``, status left UNSET); the tool's name and
  that flag are span columns decided at ingest (``ledger.health_columns``).
"""

from __future__ import annotations

from ledger.health_columns import SOFT_FAILURE

from .core import NO_FILTERS, Filters, Query, filtered, query, run_filtered

__all__ = ["error_causes", "error_rates", "model_call_latency", "run_errors", "run_latency", "tool_health"]

LEVELS = (50, 95, 99)  # the percentiles every health figure reports

DURATION_MS = "(epoch_ns({end}) - epoch_ns({start})) / 1e6"
_RUN_MS = DURATION_MS.format(start="started_at", end="ended_at")
_SPAN_NS = "epoch_ns(s.end_time) - epoch_ns(s.start_time)"  # ranked as integers, made ms once picked: the same values
# A charge's ms figure ranked as whole microseconds, made ms again once picked: the same order and,
# to the microsecond, the same value, and integers rank in about half the time of doubles.
_AS_US = "round({} * 1000)::BIGINT"
_FAILED = "coalesce(status_code = 'ERROR', FALSE)"  # a failed attempt
# An error type as the cause a reader acts on (rate limit, overload, server error, timeout).
_CAUSE = """CASE WHEN error_type = '429' THEN 'rate limited (429)'
            WHEN error_type = '529' THEN 'overloaded (529)'
            WHEN regexp_full_match(error_type, '5[0-9][0-9]') THEN 'server error (5xx)'
            WHEN error_type = 'connection' OR lower(error_type) LIKE '%timeout%' THEN 'timeout / connection'
            ELSE coalesce(error_type, 'unknown') END"""


def _quantiles(expr: str, name: str, levels: tuple[int, ...] = LEVELS) -> str:
    """Nearest-rank percentiles of ``expr`` as one list ``name`` (one sort for all levels, as for cost)."""
    return f"quantile_disc({expr}, [{', '.join(str(level / 100) for level in levels)}]) AS {name}"


def _unpack(name: str, suffix: str = "_ms", levels: tuple[int, ...] = LEVELS, scale: str = "") -> str:
    """``name[1] AS p50_ms, ...``: the list ``_quantiles`` made, one column per level (``scale``: e.g. `` / 1e6``)."""
    return ", ".join(f"{name}[{i}]{scale} AS p{level}{suffix}" for i, level in enumerate(levels, 1))


@query
def run_latency(f: Filters = NO_FILTERS) -> Query:
    """Runs' wall time (their root span), in ms: how many, p50/p95/p99 and the slowest."""
    w, p = filtered(f)
    return Query(
        w
        + f"""SELECT runs, {_unpack("q")}, max_ms FROM (
    SELECT count(*) AS runs, {_quantiles(_RUN_MS, "q")}, max({_RUN_MS}) AS max_ms
    FROM fr WHERE root_span_id IS NOT NULL AND ended_at IS NOT NULL
)""",
        p,
    )


@query
def model_call_latency(f: Filters = NO_FILTERS) -> Query:
    """Successful model-call attempts' latency and, for streamed calls, time to first token, in ms.

    One row for all calls (``overall``, first), then one per provider and model.
    """
    w, p = filtered(f, inline_charges=True)
    return Query(
        w
        + f""", ttft AS (SELECT provider, model, ttft_ms FROM fc WHERE ttft_ms IS NOT NULL AND NOT {_FAILED}),
lat AS (
    SELECT grouping(provider, model) > 0 AS overall, provider, model, count(*) AS calls,
           {_quantiles(_AS_US.format("latency_ms"), "q")}
    FROM fc WHERE NOT {_FAILED} GROUP BY GROUPING SETS ((), (provider, model))
), first AS (  -- aggregated apart: the streamed calls are few, joining them to every call is not
    SELECT grouping(provider, model) > 0 AS overall, provider, model, count(*) AS streamed_calls,
           {_quantiles(_AS_US.format("ttft_ms"), "t")}
    FROM ttft GROUP BY GROUPING SETS ((), (provider, model))
)
SELECT lat.overall, lat.provider, lat.model, calls, {_unpack("q", scale=" / 1e3")},
       coalesce(streamed_calls, 0) AS streamed_calls, {_unpack("t", "_ttft_ms", scale=" / 1e3")}
FROM lat LEFT JOIN first ON first.overall = lat.overall AND first.provider IS NOT DISTINCT FROM lat.provider
     AND first.model IS NOT DISTINCT FROM lat.model
ORDER BY lat.overall DESC, calls DESC, lat.provider, lat.model""",
        p,
    )


@query
def run_errors(f: Filters = NO_FILTERS) -> Query:
    """Errored runs (any ERROR span) over all runs: overall (``error_type`` NULL) and per error type."""
    w, p = filtered(f)
    return Query(
        w
        + """, errored AS (
    SELECT fr.trace_id, coalesce(fr.error_type, 'span error') AS error_type FROM fr
    WHERE fr.status_code = 'ERROR' OR fr.error_spans > 0
)
SELECT error_type, count(*) AS runs, count(*) / nullif((SELECT count(*) FROM fr), 0) AS share_of_runs
FROM errored GROUP BY GROUPING SETS ((), (error_type)) ORDER BY error_type NULLS FIRST""",
        p,
    )


@query
def error_rates(f: Filters = NO_FILTERS) -> Query:
    """Failed model-call attempts over all attempts: overall (the ``overall`` row first) and per provider and model."""
    w, p = filtered(f)
    return Query(
        w
        + f"""SELECT grouping(provider, model) > 0 AS overall, provider, model, count(*) AS attempts,
       count(*) FILTER (WHERE {_FAILED}) AS failed, count(*) FILTER (WHERE {_FAILED}) / nullif(count(*), 0) AS error_rate
FROM fc GROUP BY GROUPING SETS ((), (provider, model))
ORDER BY overall DESC, provider NULLS FIRST, model NULLS FIRST""",
        p,
    )


@query
def error_causes(f: Filters = NO_FILTERS) -> Query:
    """Failed attempts by provider, model and cause, with the retry outcome: recovered by a later attempt or not."""
    w, p = filtered(f, inline_charges=True)
    return Query(
        w
        + f""", tried AS MATERIALIZED (  -- one scan for both sides: the failed attempts and the retries (attempt > 1)
    SELECT trace_id, call_id, provider, model, error_type, attempt, {_FAILED} AS failed FROM fc
    WHERE status_code = 'ERROR' OR attempt > 1
), recovered AS (SELECT DISTINCT trace_id, call_id FROM tried WHERE attempt > 1 AND NOT failed)
SELECT provider, model, {_CAUSE} AS cause, coalesce(error_type, 'unknown') AS error_type, count(*) AS failed,
       count(r.call_id) AS recovered, count(*) - count(r.call_id) AS not_recovered,
       count(*) / (SELECT count(*) FROM fc) AS share_of_attempts
FROM tried LEFT JOIN recovered r USING (trace_id, call_id) WHERE failed
GROUP BY ALL ORDER BY failed DESC, provider, model, cause, error_type""",
        p,
    )


@query
def tool_health(f: Filters = NO_FILTERS) -> Query:
    """Per tool: calls, hard and soft failures, failure rate, p50/p95 duration, runs using it and their share of runs.

    The runs using a tool come from the filtered runs' lists of the tools they called (``runs.tools``);
    the tool spans are narrowed to those runs only when the filters narrow them (a join otherwise
    costs time). A tool span has no model, so a model filter narrows the tool spans to the runs that called it.
    """
    w, p = filtered(f)
    scoped = run_filtered(f) or f.model is not None
    return Query(
        w
        + f""", tc AS (
    SELECT s.tool, {_SPAN_NS} AS ns, s.status_code = 'ERROR' AS hard,
           s.status_code IS DISTINCT FROM 'ERROR' AND {SOFT_FAILURE} AS soft
    FROM spans s {"SEMI JOIN fr USING (trace_id)" if scoped else ""} WHERE s.operation = 'execute_tool'
), per_tool AS (
    SELECT tool, count(*) AS calls, count(*) FILTER (WHERE hard) AS hard_failures,
           count(*) FILTER (WHERE soft) AS soft_failures, {_quantiles("ns", "q", (50, 95))}
    FROM tc GROUP BY tool
), used AS (SELECT tool, count(*) AS runs FROM (SELECT unnest(tools) AS tool FROM fr) GROUP BY tool)
SELECT per_tool.tool, calls, hard_failures, soft_failures, hard_failures + soft_failures AS failures,
       (hard_failures + soft_failures) / calls AS failure_rate, {_unpack("q", "_ms", (50, 95), " / 1e6")},
       coalesce(used.runs, 0) AS runs, coalesce(used.runs, 0) / nullif((SELECT count(*) FROM fr), 0) AS share_of_runs
FROM per_tool LEFT JOIN used ON used.tool IS NOT DISTINCT FROM per_tool.tool
ORDER BY calls DESC, per_tool.tool""",
        p,
    )
