"""About the ledger itself: the values filters can take, the time it covers, the prices it applied."""

from __future__ import annotations

from .core import NO_FILTERS, Filters, Query, choose, filtered, query

__all__ = ["filter_values", "price_sources", "time_bounds"]

_DIMENSIONS = {
    "tenant": ("runs", "tenant"),
    "agent": ("runs", "agent_name"),
    "agent_version": ("runs", "agent_version"),
    "prompt_version": ("runs", "prompt_version"),
    "service_version": ("runs", "service_version"),
    "environment": ("runs", "environment"),
    "variant": ("runs", "variant"),
    "model": ("charges", "model"),
    "stop_cause": ("runs", "stop_cause"),
}


@query
def filter_values(dimension: str = "tenant") -> Query:
    """Distinct values of one filter dimension (tenant, agent, model, versions, stop cause)."""
    choose("dimension", dimension, _DIMENSIONS)
    table, column = _DIMENSIONS[dimension]
    return Query(f"SELECT DISTINCT {column} AS value FROM {table} WHERE {column} IS NOT NULL ORDER BY 1")


@query
def time_bounds(f: Filters = NO_FILTERS) -> Query:
    """How many runs match and when the first and last of them started."""
    w, p = filtered(f)
    return Query(w + "SELECT count(*) AS runs, min(started_at) AS first_run, max(started_at) AS last_run FROM fr", p)


@query
def price_sources(f: Filters = NO_FILTERS) -> Query:
    """Which price source and version priced each model's charges (what was actually applied)."""
    w, p = filtered(f)
    return Query(
        w
        + """SELECT provider, model, price_source, price_version, count(*) AS calls, sum(usd) AS usd,
       min(start_time) AS first_call, max(start_time) AS last_call
FROM fc GROUP BY provider, model, price_source, price_version ORDER BY usd DESC, model, price_version""",
        p,
    )
