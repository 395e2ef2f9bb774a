"""About the ledger itself: the values filters can take, the time it covers, the prices it applied."""

from __future__ import annotations

from .core import NO_FILTERS, Filters, Query, choose, filtered, query

__all__ = ["FILTER_DIMENSIONS", "filter_options", "filter_values", "price_sources", "time_bounds"]

# Each filter dimension -> the table and column its values are read from.
FILTER_DIMENSIONS = {
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
    choose("dimension", dimension, FILTER_DIMENSIONS)
    table, column = FILTER_DIMENSIONS[dimension]
    return Query(f"SELECT DISTINCT {column} AS value FROM {table} WHERE {column} IS NOT NULL ORDER BY 1")


@query
def filter_options() -> Query:
    """Every dimension's distinct values at once, as ``(dimension, value)`` rows ordered by both.

    The values ``filter_values`` gives one dimension at a time; the sidebar needs all of them on
    every page, and one query instead of one per dimension saves a round trip and a plan each.
    Each column is its own DISTINCT, the dimension's name added after it: DISTINCT over the column
    alone hashes one dictionary-coded column (about a third cheaper than over it and a constant).
    """
    parts = (
        f"SELECT '{dimension}' AS dimension, value FROM "
        f"(SELECT DISTINCT {column} AS value FROM {table} WHERE {column} IS NOT NULL)"
        for dimension, (table, column) in FILTER_DIMENSIONS.items()
    )
    return Query("\nUNION ALL ".join(f"({part})" for part in parts) + "\nORDER BY dimension, value")


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
