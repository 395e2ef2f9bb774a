"""The derived ``runs`` table: one row per run, rebuilt from its trace's spans, charges and guard events.

A run is an agent's invocation, not every trace that exists: a trace is a run when it holds a
span of its own (``OWN_SPAN``), and not when all it holds is copies of billed calls charged in
another trace (the anthropic SDK's span of a call a framework traced elsewhere) or a framework's
bookkeeping (OpenLLMetry's ``create_agent`` span: an agent was built, none ran). Such a trace has
no runs row (it would count as a run of $0); its spans stay, and its copies name the charged one.

``ledger.write`` rebuilds the runs an ingest touches in the same transaction,
or leaves them in ``runs_pending`` for a server under load to rebuild many
commits at once (``refresh_pending_runs``). The rebuild is one INSERT OR
REPLACE whose columns come from the runs declaration (``ledger.tables``), each
given by name; every price term's tokens and dollars are summed from ``TERMS``.
On a DuckLake (no keys: ``ledger.lake``) the touched rows are deleted and inserted
again, in the same transaction, and a pending trace is merged in (MERGE INTO).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

import duckdb
import pyarrow as pa

from . import conventions as c
from . import lake, loops, outcomes, terms
from .health_columns import SOFT_FAILURE
from .tables import table
from .terms import PriceTerm

__all__ = [
    "BOOKKEEPING_OPERATIONS",
    "OWN_SPAN",
    "STEP_CAP_SHAPE",
    "defer",
    "earliest",
    "refresh_pending_runs",
    "refresh_runs",
    "refresh_with_pending",
    "tools_used",
    "version_aggregates",
]

# The harness reports its step limit as a loop trip of this shape (a halt); runs count it as a
# step-cap halt, apart from the loop detector's own trips (repeat, cycle, stall).
STEP_CAP_SHAPE = "step_cap"


# Operations that record a framework's bookkeeping, not work: a trace of only these is no run.
BOOKKEEPING_OPERATIONS = ("create_agent",)
# A copy of a billed call charged in another trace (over ``call_copies cc``).
_FOREIGN_COPY = "cc.duplicate_of IS NOT NULL AND cc.duplicate_of_trace IS DISTINCT FROM cc.trace_id"
# A span that makes its trace a run (over ``spans s`` LEFT JOIN ``call_copies cc`` on the span): not
# bookkeeping, and not a copy of a billed call charged in another trace.
OWN_SPAN = f"s.operation IS DISTINCT FROM '{BOOKKEEPING_OPERATIONS[0]}' AND NOT coalesce({_FOREIGN_COPY}, FALSE)"


def _attr(alias: str, key: str) -> str:
    return f"json_extract_string({alias}.attributes, '$.\"{key}\"')"


# The version dimensions beside agent and prompt version (migration 16): each run's value is the
# root span's, else any span's (a resource is the same on every span one process sends).
_VERSION_KEYS = {
    "service_version": ((), (c.SERVICE_VERSION,)),
    "environment": ((), (c.DEPLOYMENT_ENVIRONMENT_NAME, c.DEPLOYMENT_ENVIRONMENT)),  # current name first
    "variant": ((c.VARIANT,), (c.VARIANT,)),
}


def _present(column: str, key: str) -> str:
    """``key``'s value in a JSON column, parsed only where its text names it: these keys are absent
    from most spans, and a substring search costs a fraction of a JSON parse (on every span of every
    run each commit touches)."""
    return f"CASE WHEN contains({column}, '\"{key}\"') THEN json_extract_string({column}, '$.\"{key}\"') END"


def version_aggregates(alias: str = "s") -> dict[str, str]:
    """Each version column -> its aggregate over a trace's spans (attributes first, then the resource)."""
    out = {}
    for column, (attribute_keys, resource_keys) in _VERSION_KEYS.items():
        paths = [_present(f"{alias}.attributes", k) for k in attribute_keys]
        paths += [_present(f"{alias}.resource", k) for k in resource_keys]
        value = paths[0] if len(paths) == 1 else f"coalesce({', '.join(paths)})"
        out[column] = f"arg_min({value}, {alias}.parent_span_id <> '') FILTER (WHERE {value} IS NOT NULL)"
    return out


def tools_used(alias: str = "s") -> str:
    """The distinct tools a trace's spans called, sorted (NULL: none), as an aggregate over its spans.

    ``runs.tools`` (migration 18) holds it, so the runs using a tool are counted over runs rows
    instead of distinct trace ids over every tool span (the Health page's costliest step)."""
    return f"list(DISTINCT {alias}.tool ORDER BY {alias}.tool) FILTER (WHERE {alias}.operation = 'execute_tool')"


# Over the rule's columns of ``root`` (``ledger.outcomes``): two columns read it.
_STOP_CAUSE = outcomes.stop_cause_sql("root.span_id IS NOT NULL", "root.stop_by_root", "ch.last_finish_reason")


def _run_values() -> dict[str, str]:
    """Each runs column -> its SQL over the CTEs of ``_REFRESH`` (``t``, ``root``, ``sp``, ``ch``, ``ge``)."""
    values = {
        "trace_id": "t.trace_id",
        "root_span_id": "root.span_id",
        "name": "root.name",
        "service_name": "sp.service_name",
        "agent_name": f"coalesce({_attr('root', c.AGENT_NAME)}, root.name, sp.service_name)",
        "agent_version": (
            f"coalesce({_attr('root', c.AGENT_VERSION)}, json_extract_string(root.resource, '$.\"service.version\"'))"
        ),
        "prompt_version": _attr("root", c.PROMPT_VERSION),
        "tool_schema_version": _attr("root", c.TOOL_SCHEMA_VERSION),
        "tenant": "coalesce(root.tenant, sp.tenant)",
        "conversation_id": _attr("root", c.CONVERSATION_ID),
        "started_at": "sp.started_at",
        "ended_at": "sp.ended_at",
        "status_code": "root.status_code",
        "error_type": _attr("root", c.ERROR_TYPE),
        "stop_cause": _STOP_CAUSE,
        "stop_detail": _attr("root", c.STOP_DETAIL),
        "model_calls": "coalesce(ch.model_calls, 0)",
        "turns": "coalesce(ch.turns, 0)",
        "tool_calls": "sp.tool_calls",
        "soft_failures": "sp.soft_failures",
        "error_spans": "sp.error_spans",
        "tools": "sp.tools",
        "loop_trips": "coalesce(ge.loop_trips, 0)",
        # a step cap the agent did not report as a guard event still halted the run (ledger.outcomes)
        "step_cap_halts": (
            f"greatest(coalesce(ge.step_cap_halts, 0), ({_STOP_CAUSE} IS NOT DISTINCT FROM 'max_steps')::INTEGER)"
        ),
        "retry_attempts": "coalesce(ch.retry_attempts, 0)",
        "unpriced_calls": "coalesce(ch.unpriced_calls, 0)",
        "invalid_usage_calls": "coalesce(ch.invalid_usage_calls, 0)",
        "incomplete_usage_calls": "coalesce(ch.incomplete_usage_calls, 0)",
        "usd_total": f"coalesce({terms.usd_sum('ch')}, 0)",
        "models": "ch.models",
        **{column: f"sp.{column}" for column in _VERSION_KEYS},
    }
    for t in terms.TERMS:
        values[t.tokens_column] = f"coalesce(ch.{t.tokens_column}, 0)"
        values[t.usd_column] = f"coalesce(ch.{t.usd_column}, 0)"
    return values


_REFRESH = """
{verb} INTO runs ({columns})
WITH t AS (SELECT DISTINCT trace_id FROM _touched),
-- The spans that are copies of calls charged in another trace: few or none, so joining every span
-- to them (instead of to every copy) keeps the run rule's join cheap.
foreign_copies AS (
    SELECT cc.* FROM call_copies cc JOIN t USING (trace_id) WHERE cc.start_time >= $since AND {foreign_copy}
),
first_root AS (
    SELECT s.* FROM spans s JOIN t USING (trace_id) WHERE s.parent_span_id = '' AND s.start_time >= $since
    QUALIFY row_number() OVER (PARTITION BY s.trace_id ORDER BY s.start_time) = 1
),
root AS (  -- with what it says of why the run stopped, read once per run (ledger.outcomes)
    SELECT *, {root_stop} AS stop_by_root FROM (SELECT *, {stop_signals} FROM first_root)
),
sp AS (
    SELECT s.trace_id, min(s.start_time) AS started_at, max(s.end_time) AS ended_at,
           any_value(s.tenant) FILTER (WHERE s.tenant IS NOT NULL) AS tenant,
           count(*) FILTER (WHERE s.operation = 'execute_tool') AS tool_calls,
           count(*) FILTER (WHERE s.operation = 'execute_tool' AND (s.status_code = 'ERROR'
               OR {soft_failure})) AS soft_failures,
           count(*) FILTER (WHERE s.status_code = 'ERROR') AS error_spans,
           {tools} AS tools,
           any_value(json_extract_string(s.resource, '$."service.name"')) AS service_name,
           count(*) FILTER (WHERE {own_span}) AS own_spans,
           {versions}
    FROM spans s JOIN t USING (trace_id)
    LEFT JOIN foreign_copies cc ON cc.trace_id = s.trace_id AND cc.span_id = s.span_id
    WHERE s.start_time >= $since GROUP BY s.trace_id
),
ch AS (
    SELECT c.trace_id, count(*) AS model_calls,
           count(DISTINCT c.call_id) FILTER (WHERE c.call_site = 'agent') AS turns,
           count(*) FILTER (WHERE c.attempt > 1) AS retry_attempts,
           count(*) FILTER (WHERE c.unpriced) AS unpriced_calls,
           count(*) FILTER (WHERE c.invalid_usage) AS invalid_usage_calls,
           count(*) FILTER (WHERE c.incomplete_usage) AS incomplete_usage_calls,
           {term_sums},
           string_agg(DISTINCT c.model, ',' ORDER BY c.model) AS models,
           arg_max(nullif(c.finish_reason, ''), c.start_time) AS last_finish_reason
    FROM charges c JOIN t USING (trace_id) WHERE c.start_time >= $since GROUP BY c.trace_id
),
ge AS (
    SELECT g.trace_id,
           count(*) FILTER (WHERE g.name = '{loop_trip}' AND g.shape IS DISTINCT FROM '{step_cap}') AS loop_trips,
           count(*) FILTER (WHERE g.name = '{loop_trip}' AND g.shape = '{step_cap}') AS step_cap_halts
    FROM guard_events g JOIN t USING (trace_id) GROUP BY g.trace_id
)
SELECT {values}
FROM t JOIN sp USING (trace_id)
LEFT JOIN root USING (trace_id) LEFT JOIN ch USING (trace_id) LEFT JOIN ge USING (trace_id)
WHERE sp.own_spans > 0
"""
# The touched traces that are no run (any more): their rows go (the INSERT above leaves them be). A
# runs row's spans all start at or after its started_at, so $since (no later than it) bounds the read.
# Spans are never taken back and their operation never changes: a trace that was a run stops being
# one only when a copy of its became foreign, so only traces holding a foreign copy are looked at.
_FOREIGN_HOLDERS = f"""SELECT DISTINCT cc.trace_id FROM call_copies cc JOIN _touched USING (trace_id)
    WHERE cc.start_time >= $since AND {_FOREIGN_COPY}"""
_NOT_RUNS = f"""
DELETE FROM runs WHERE trace_id IN ({_FOREIGN_HOLDERS}) AND trace_id NOT IN (
    SELECT s.trace_id FROM spans s JOIN ({_FOREIGN_HOLDERS}) h USING (trace_id)
    LEFT JOIN call_copies cc ON cc.trace_id = s.trace_id AND cc.span_id = s.span_id AND cc.start_time >= $since
    WHERE s.start_time >= $since AND {OWN_SPAN})
"""


# Keyed by the terms, so a test can add one; ``verb``: INSERT OR REPLACE, or INSERT on a lake.
@cache
def _refresh_sql(_terms: tuple[PriceTerm, ...], verb: str = "INSERT OR REPLACE") -> str:
    runs = table("runs")
    sums = (f"sum(c.{col}) AS {col}" for t in terms.TERMS for col in (t.tokens_column, t.usd_column))
    return _REFRESH.format(
        verb=verb,
        columns=", ".join(runs.names),
        soft_failure=SOFT_FAILURE,
        tools=tools_used("s"),
        own_span=OWN_SPAN,
        foreign_copy=_FOREIGN_COPY,
        root_stop=outcomes.ROOT_STOP,
        stop_signals=", ".join(f"{sql} AS {name}" for name, sql in outcomes.stop_signals("first_root").items()),
        term_sums=",\n           ".join(sums),
        loop_trip=c.EVENT_LOOP_TRIP,
        step_cap=STEP_CAP_SHAPE,
        values=",\n    ".join(runs.in_order(_run_values())),
        versions=",\n           ".join(f"{v} AS {k}" for k, v in version_aggregates().items()),
    )


def refresh_runs(con: duckdb.DuckDBPyConnection, trace_ids: list[str], *, since_ns: int | None = None) -> None:
    """Rebuild the derived ``runs`` rows of these traces from spans and charges.

    ``since_ns``: no span of these traces added since their last rebuild starts
    earlier. With each run's own ``started_at`` it bounds the spans to read, so
    DuckDB skips older row groups by their min/max and the cost follows the
    recent data, not the size of the ledger (without it, every span is read).
    """
    on_lake = lake.is_lake(con)
    sql = _refresh_sql(terms.TERMS, "INSERT" if on_lake else "INSERT OR REPLACE")
    _touched = pa.table({"trace_id": trace_ids})  # read by name (a replacement scan, as ledger.write._insert)
    since = None
    if since_ns is not None:
        (earliest_run,) = con.execute(
            "SELECT epoch_ns(min(started_at)) FROM runs WHERE trace_id IN (SELECT trace_id FROM _touched)"
        ).fetchone() or (None,)
        since = since_ns if earliest_run is None else min(since_ns, earliest_run)
    # A literal, not a parameter, so the filter is a constant the scan can prune row groups with.
    bound = f"make_timestamp_ns({int(since)})" if since is not None else "TIMESTAMP_NS '1970-01-01'"
    # One small query first says which of the statements before the rebuild can change anything:
    # planning each costs a commit milliseconds, and most commits need neither.
    loops_may_change, holds_foreign_copy = con.execute(
        f"SELECT {loops.REBUILD_NEEDED}, EXISTS ({_FOREIGN_HOLDERS})".replace("$since", bound)
    ).fetchone() or (True, True)
    if loops_may_change:  # the loops seen in the spans, before the runs count them
        for statement in loops.rebuild_detected_sql():
            con.execute(statement.replace("$since", bound))
    if on_lake:  # what INSERT OR REPLACE does by the key
        con.execute("DELETE FROM runs WHERE trace_id IN (SELECT trace_id FROM _touched)")
    elif holds_foreign_copy:  # a trace that stopped being a run (its call's charge moved to another trace's copy)
        con.execute(_NOT_RUNS.replace("$since", bound))
    con.execute(sql.replace("$since", bound))


def earliest(starts: Iterable[dict[str, int]]) -> dict[str, int]:
    """Trace id -> earliest start, over several such maps."""
    out: dict[str, int] = {}
    for part in starts:
        for trace, start in part.items():
            out[trace] = min(start, out.get(trace, start))
    return out


def defer(con: duckdb.DuckDBPyConnection, firsts: dict[str, int]) -> None:
    """Leave these traces' runs pending (in the caller's transaction), keeping each one's earliest new start."""
    starts = pa.array(firsts.values(), pa.timestamp("ns"))
    _deferred = pa.table({"trace_id": list(firsts), "first_start": starts})  # read by name, as in refresh_runs
    if lake.is_lake(con):
        con.execute(
            "MERGE INTO runs_pending USING _deferred d ON runs_pending.trace_id = d.trace_id "
            "WHEN MATCHED THEN UPDATE SET first_start = least(runs_pending.first_start, d.first_start) "
            "WHEN NOT MATCHED THEN INSERT (trace_id, first_start) VALUES (d.trace_id, d.first_start)"
        )
        return
    con.execute(
        "INSERT INTO runs_pending SELECT trace_id, first_start FROM _deferred ON CONFLICT (trace_id) "
        "DO UPDATE SET first_start = least(runs_pending.first_start, excluded.first_start)"
    )


def refresh_with_pending(con: duckdb.DuckDBPyConnection, firsts: dict[str, int]) -> set[str]:
    """Rebuild the runs of these traces and of every pending one; returns the pending ones."""
    pending = dict(con.execute("SELECT trace_id, epoch_ns(first_start) FROM runs_pending").fetchall())
    touched = earliest((pending, firsts))
    if touched:
        refresh_runs(con, sorted(touched), since_ns=min(touched.values()))
    if pending:
        con.execute("DELETE FROM runs_pending")
    return set(pending)


def refresh_pending_runs(con: duckdb.DuckDBPyConnection) -> set[str]:
    """Rebuild the runs that ``write(defer_runs=True)`` left pending; returns their trace ids."""
    con.execute("BEGIN TRANSACTION")
    try:
        pending = refresh_with_pending(con, {})
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    return pending
