"""Named queries over the ledger: pure builders of SQL + bound parameters, registered once.

``from ledger import queries as q``; build with ``q.cost_per_run(f)``, execute
with ``q.run(con, ...)`` (DataFrame) or ``q.records(con, ...)`` (exact rows).
``core`` holds the machinery (see its docstring for the definitions every
builder shares); the other modules hold the builders, one subject each.
``QUERIES`` maps each registered builder's name to it, for the server's
named-query API; ``query_name(builder)`` is how a caller turns a builder into
that name, refusing anything not registered.
"""

from __future__ import annotations

from .budgets import alert_history, budget_events, run_budget_limits
from .core import (
    CACHE_HEALTHY,
    CACHE_WEAK,
    NO_FILTERS,
    QUERIES,
    Filters,
    Query,
    UnknownQuery,
    cache_verdict,
    parse_time,
    query_name,
    records,
    run,
)
from .guards import guard_summary, loop_spend, loop_trip_runs, loop_trips, loop_trips_over_time
from .meta import filter_values, price_sources, time_bounds
from .runs import (
    find_runs,
    run_guard_events,
    run_header,
    run_summary,
    run_trace_tree,
    run_turns,
    runs_table,
    stop_causes,
)
from .spend import (
    cache_hit_rate,
    call_site_attribution,
    charge_totals,
    cost_per_run,
    cost_per_successful_run,
    invalid_usage_charges,
    model_attribution,
    retry_charges,
    spend_over_time,
    unpriced_models,
    where_the_money_went,
)
from .tail import cost_by_turns, cost_histogram, long_tail, typical_run

__all__ = [
    "CACHE_HEALTHY",
    "CACHE_WEAK",
    "NO_FILTERS",
    "QUERIES",
    "Filters",
    "Query",
    "UnknownQuery",
    "alert_history",
    "budget_events",
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
    "invalid_usage_charges",
    "long_tail",
    "loop_spend",
    "loop_trip_runs",
    "loop_trips",
    "loop_trips_over_time",
    "model_attribution",
    "parse_time",
    "price_sources",
    "query_name",
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
