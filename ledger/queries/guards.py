"""Guards: loop-detector trips, the money spent inside loops, step-cap and budget-stop rates."""

from __future__ import annotations

from typing import Any

from ledger import conventions as c
from ledger.loops import DETECTED
from ledger.runs import STEP_CAP_SHAPE
from ledger.terms import usd_sum

from .core import BUCKETS, NO_FILTERS, Filters, Query, choose, filtered, query

__all__ = ["guard_summary", "loop_spend", "loop_trip_runs", "loop_trips", "loop_trips_over_time"]


@query
def loop_trips(f: Filters = NO_FILTERS) -> Query:
    """Loop-detector trips by shape (nudges and halts the agent reported, and the trips turnledger
    detected in the spans of runs that report none: ``ledger.loops``), the runs they hit and those
    runs' whole spend.

    Step-cap halts are the harness's step limit, not the loop detector: counted apart
    (``guard_summary.step_cap_halts``), as ``runs.loop_trips`` counts them."""
    w, p = filtered(f)
    return Query(
        w
        + f"""SELECT g.shape, count(*) AS trips, count(*) FILTER (WHERE g.action = 'nudge') AS nudges,
       count(*) FILTER (WHERE g.action = 'halt') AS halts,
       count(*) FILTER (WHERE g.action = '{DETECTED}') AS detected, count(DISTINCT g.trace_id) AS runs_affected,
       (SELECT sum(usd_total) FROM fr WHERE trace_id IN
           (SELECT trace_id FROM guard_events x WHERE x.name = '{c.EVENT_LOOP_TRIP}' AND x.shape IS NOT DISTINCT FROM g.shape)
       ) AS spend_in_affected_runs
FROM guard_events g SEMI JOIN fr USING (trace_id)
WHERE g.name = '{c.EVENT_LOOP_TRIP}' AND g.shape IS DISTINCT FROM '{STEP_CAP_SHAPE}'
GROUP BY g.shape ORDER BY trips DESC, g.shape""",
        p,
    )


@query
def guard_summary(f: Filters = NO_FILTERS) -> Query:
    """Run-level guard figures: loop trips and the runs they hit, step-cap and budget-stop rates."""
    w, p = filtered(f)
    return Query(
        w
        + """SELECT coalesce(sum(loop_trips), 0) AS loop_trips,
       count(*) FILTER (WHERE loop_trips > 0) AS runs_with_loop_trips,
       coalesce(sum(step_cap_halts), 0) AS step_cap_halts,
       coalesce(sum(usd_total) FILTER (WHERE loop_trips > 0), 0) AS spend_in_looping_runs,
       avg((stop_cause = 'max_steps')::INTEGER) AS step_cap_rate,
       avg((stop_cause = 'budget_exceeded')::INTEGER) AS budget_stop_rate,
       coalesce(sum(unpriced_calls), 0) AS unpriced_calls,
       coalesce(sum(invalid_usage_calls), 0) AS invalid_usage_calls,
       coalesce(sum(incomplete_usage_calls), 0) AS incomplete_usage_calls,
       coalesce(sum(unknown_usage_calls), 0) AS unknown_usage_calls
FROM fr""",
        p,
    )


def _loop_windows(f: Filters) -> tuple[str, list[Any]]:
    """CTEs ``lt`` (loop-detector trips of filtered runs; step-cap halts are not loops) and ``lw`` (one loop window per run and tool).

    A window runs from the run's first call of the tripped tool to its last
    trip (a detected trip sits at the last repeated call: nobody stopped the
    run); ``loop_usd`` is every model call started inside it: the calls that
    kept choosing the repeated tool. Tools are matched by span name
    (``execute_tool {tool}``, the GenAI convention) rather than by parsing span
    attributes: at millions of spans, reading the attribute JSON is what
    would make this page slow. (A tool also used normally before the loop
    widens the window; the figure is then an upper bound.)
    """
    w, p = filtered(f)
    return (
        w
        + f""", lt AS (
    SELECT g.trace_id, g.time, coalesce(g.shape, 'unknown') AS shape, g.action, coalesce(g.tool, 'unknown') AS tool
    FROM guard_events g SEMI JOIN fr USING (trace_id) WHERE g.name = '{c.EVENT_LOOP_TRIP}'
      AND g.shape IS DISTINCT FROM '{STEP_CAP_SHAPE}'
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
           (SELECT sum({usd_sum("ch")}) FROM charges ch WHERE ch.trace_id = t.trace_id
              AND ch.start_time BETWEEN r.loop_start AND t.last_trip) AS loop_usd
    FROM tripped t LEFT JOIN repeats r USING (trace_id, tool)
)
""",
        p,
    )


@query
def loop_trips_over_time(f: Filters = NO_FILTERS, bucket: str = "day") -> Query:
    """Loop-detector trips per time bucket, shape and tool, with the spend of the runs they hit."""
    choose("bucket", bucket, BUCKETS)
    w, p = filtered(f)
    return Query(
        w
        + f""", per_run AS (
    SELECT date_trunc('{bucket}', g.time) AS bucket, coalesce(g.shape, 'unknown') AS shape,
           coalesce(g.tool, 'unknown') AS tool, g.trace_id, count(*) AS trips
    FROM guard_events g SEMI JOIN fr USING (trace_id)
    WHERE g.name = '{c.EVENT_LOOP_TRIP}' AND g.shape IS DISTINCT FROM '{STEP_CAP_SHAPE}'
    GROUP BY ALL
)
SELECT p.bucket, p.shape, p.tool, sum(p.trips) AS trips, count(*) AS runs_affected,
       sum(fr.usd_total) AS spend_in_affected_runs
FROM per_run p JOIN fr USING (trace_id) GROUP BY 1, 2, 3 ORDER BY 1, 2, 3""",
        p,
    )


@query
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


@query
def loop_spend(f: Filters = NO_FILTERS) -> Query:
    """Totals of ``loop_trip_runs``: money spent inside loops, and in the runs that looped."""
    w, p = _loop_windows(f)
    return Query(
        w
        + f"""SELECT count(DISTINCT lw.trace_id) AS runs_affected, coalesce(sum(lw.trips), 0) AS trips,
       coalesce(sum(lw.trips) FILTER (WHERE lw.actions = '{DETECTED}'), 0) AS detected_trips,
       coalesce(sum(lw.repeated_calls), 0) AS repeated_calls, coalesce(sum(lw.loop_usd), 0) AS loop_usd,
       (SELECT coalesce(sum(usd_total), 0) FROM fr WHERE trace_id IN (SELECT trace_id FROM lw)) AS spend_in_affected_runs
FROM lw""",
        p,
    )
