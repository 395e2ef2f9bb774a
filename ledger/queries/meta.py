"""About the ledger itself: the values filters can take, the time it covers, the prices it applied."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from ledger.errors import NotFound

from .core import NO_FILTERS, Filters, Query, choose, filtered, query

__all__ = [
    "FILTER_DIMENSIONS",
    "UnknownFilterValue",
    "check_filters",
    "check_values",
    "filter_options",
    "filter_values",
    "price_sources",
    "time_bounds",
]

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


class UnknownFilterValue(NotFound):
    """A filter names a tenant, agent, model or version that no run in the ledger has."""


def check_filters(f: Filters, options: Iterable[Mapping[str, Any]]) -> None:
    """Raise ``UnknownFilterValue`` when a set filter's value is in no run (``options``: ``filter_options``'
    rows), naming the nearest known values: a typo says so instead of showing an empty result. When every
    value exists, an empty result means the combination matches nothing, which is a finding."""
    # stop_cause is a dimension, not a Filters field
    check_values({d: v for d in FILTER_DIMENSIONS if (v := getattr(f, d, None)) is not None}, options)


def check_values(named: Mapping[str, str], options: Iterable[Mapping[str, Any]]) -> None:
    """``check_filters`` for values given by dimension (a version to compare, a budget's scope)."""
    known: dict[str, list[str]] = {}
    for row in options:
        known.setdefault(str(row["dimension"]), []).append(str(row["value"]))
    problems = []
    for dimension, value in named.items():
        values = known.get(dimension, [])
        if value is None or value in values:
            continue
        near = [v for v in values if v.casefold() == value.casefold()]  # ACME for acme: difflib is case-sensitive
        near = near or difflib.get_close_matches(value, values, n=3, cutoff=0.6)
        if near:
            hint = "did you mean " + " or ".join(map(repr, near)) + "?"
        elif values:
            hint = (
                "the ledger has "
                + ", ".join(map(repr, values[:8]))
                + (f" and {len(values) - 8} more" if len(values) > 8 else "")
            )
        else:
            hint = f"no run in the ledger records a {dimension.replace('_', ' ')}"
        problems.append(f"{dimension.replace('_', ' ')} {value!r} is in no run: {hint}")
    if problems:
        raise UnknownFilterValue("; ".join(problems))
