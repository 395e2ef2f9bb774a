"""About the ledger itself: the values filters can take, the time it covers, the prices it applied."""

from __future__ import annotations

from .core import NO_FILTERS, Filters, Query, choose, filtered, query

__all__ = ["filter_options", "filter_values", "price_sources", "time_bounds"]

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
def filter_options() -> Query:
    """Every dimension's distinct values at once, as ``(dimension, value)`` rows ordered by both.

    The values ``filter_values`` gives one dimension at a time, in one scan per table: each
    column's distinct values are gathered side by side (``list(DISTINCT ...)``), then unpivoted
    and unnested. The sidebar asks for all of them on every page; one query instead of one per
    dimension saves a round trip, a plan and a scan each.
    """
    by_table: dict[str, list[str]] = {}
    for dimension, (table, column) in _DIMENSIONS.items():
        by_table.setdefault(table, []).append(
            f"list(DISTINCT {column}) FILTER (WHERE {column} IS NOT NULL) AS {dimension}"
        )
    scans = ", ".join(f"(SELECT {', '.join(lists)} FROM {table})" for table, lists in by_table.items())
    return Query(
        f"""SELECT dimension, unnest(vals) AS value
FROM (UNPIVOT (SELECT * FROM {scans}) ON COLUMNS(*) INTO NAME dimension VALUE vals)
ORDER BY dimension, value"""
    )


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
