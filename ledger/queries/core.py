"""What every named query shares: ``Query``, ``Filters`` (and its wire format), the registry.

A builder is a pure function returning SQL + bound parameters; it never
touches a connection. ``run`` executes one and returns a DataFrame (USD as
float, for display), ``records`` returns exact rows (USD as Decimal, for
reports). Values are always bound; the only identifiers that vary are chosen
from fixed allow-lists in this package.

``@query`` registers a builder once, under its function name. Callers hold the
function itself (``load(q.cost_per_run, f)``); the name is what travels over
HTTP, and ``QUERIES`` maps it back for the server's named-query API.

Definitions used throughout:
* cost of a run = sum of its charges' USD terms (every attempt included);
* percentiles are nearest-rank (``quantile_disc``): each is a real run's cost;
* cache hit rate = cache_read / (uncached_input + cache_write + cache_read);
* a successful run is one whose stop cause is ``completed``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb

from ledger.errors import InputError, NotFound, TurnledgerError
from ledger.terms import input_tokens_sum, usd_sum

if TYPE_CHECKING:  # pandas loads when a query is run for display, not with the builders (the collector builds)
    import pandas as pd

__all__ = [
    "BUCKETS",
    "CACHE_HEALTHY",
    "CACHE_WEAK",
    "FIRST_BOUND",
    "HIT_RATE",
    "INPUT_TOKENS",
    "LAST_BOUND",
    "NO_FILTERS",
    "QUERIES",
    "ROW_HIT_RATE",
    "TIME_FORMAT",
    "Filters",
    "Query",
    "UnknownQuery",
    "cache_verdict",
    "choose",
    "filtered",
    "parse_time",
    "query",
    "query_name",
    "records",
    "run",
    "run_filtered",
    "sums",
    "verdict_sql",
]

CACHE_HEALTHY = 0.7  # hit rate above this: healthy (seed ex. 7)
CACHE_WEAK = 0.1  # above this: weak; otherwise broken

# Input tokens of a charge or run, whatever the cache did with them.
INPUT_TOKENS = input_tokens_sum()  # every input-side term, cached or not
HIT_RATE = f"sum(cache_read_tokens)::DOUBLE / nullif(sum({INPUT_TOKENS}), 0)"  # over grouped rows
ROW_HIT_RATE = f"cache_read_tokens::DOUBLE / nullif({INPUT_TOKENS}, 0)"  # of one row
BUCKETS = frozenset({"minute", "hour", "day", "week", "month"})


@dataclass(frozen=True)
class Query:
    sql: str
    params: list[Any] = field(default_factory=list)


class UnknownQuery(NotFound, LookupError):
    """No registered query has that name, or the function given is not a registered query."""


TIME_FORMAT = (
    "give an ISO 8601 time from 0001-01-01 to 9999-12-31: a date, or a date and time, "
    "naive (UTC) or with Z or an offset such as +05:30"
)
# The range a bound may take against TIMESTAMP_NS, the type of every run, span and point time: DuckDB
# refuses to compare one with a time outside it ("Could not convert Timestamp(US) to Timestamp(NS)", a 500
# for since=9999-12-31). The door admits span times from 1970 to 2116 only (ledger.limits), so a bound
# clamped into this range selects the same rows as the bound asked for.
FIRST_BOUND = datetime(1677, 9, 22)  # DuckDB converts no earlier microsecond time to nanoseconds
LAST_BOUND = datetime(2262, 4, 11, 23, 47, 16, 854775)  # the last microsecond of an int64 of nanoseconds


def parse_time(raw: str) -> datetime:
    """An ISO 8601 time as the ledger stores it: naive UTC (an offset, or ``Z``, is converted).
    Every time a user gives is read here; a ``ValueError`` says what is wrong and the range."""
    try:
        when = datetime.fromisoformat(raw.strip().replace("Z", "+00:00").replace(" ", "T", 1))
    except ValueError as exc:
        raise ValueError(f"{exc}; {TIME_FORMAT}") from None
    return _naive_utc(when)


def _naive_utc(when: datetime) -> datetime:
    """``when`` in naive UTC; an offset that moves it past the calendar (0001-01-01T00:00+05:00 is in year 0)
    gives the calendar's end on that side, which every bound below clamps alike."""
    if when.tzinfo is None:
        return when
    try:
        return when.astimezone(UTC).replace(tzinfo=None)
    except OverflowError:
        return datetime.min if when.year == 1 else datetime.max


def _bound(when: datetime | None) -> datetime | None:
    return None if when is None else min(max(_naive_utc(when), FIRST_BOUND), LAST_BOUND)


@dataclass(frozen=True)
class Filters:
    """Narrows every query to runs started in [since, until) and matching the rest.

    Times are naive UTC, as the ledger stores them: an aware bound is converted
    on construction, so a filter means the same instant however it arrived
    (sidebar, CLI or query string) and survives the wire unchanged. A bound
    anywhere in the calendar is clamped into [FIRST_BOUND, LAST_BOUND]; a window
    whose ``since`` is after its ``until`` holds no run (an empty answer, not an error).
    """

    since: datetime | None = None
    until: datetime | None = None
    tenant: str | None = None
    agent: str | None = None
    model: str | None = None
    agent_version: str | None = None
    prompt_version: str | None = None
    service_version: str | None = None
    environment: str | None = None
    variant: str | None = None

    def __post_init__(self) -> None:
        for name in _TIME_FIELDS:
            object.__setattr__(self, name, _bound(getattr(self, name)))

    def to_params(self) -> dict[str, str]:
        """The set fields as query-string values (times in ISO 8601); unset fields are absent."""
        out: dict[str, str] = {}
        for name in _FIELDS:
            value = getattr(self, name)
            if value is not None:
                out[name] = value.isoformat() if name in _TIME_FIELDS else str(value)
        return out

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> Filters:
        """The inverse of ``to_params``. An unknown key or a bad time is an ``InputError`` naming it."""
        values: dict[str, Any] = {}
        for name, raw in params.items():
            if name not in _FIELDS:
                raise InputError(f"unknown filter {name!r}: choose one of {list(_FIELDS)}")
            if name in _TIME_FIELDS:
                try:
                    values[name] = parse_time(raw)
                except ValueError as exc:
                    raise InputError(f"parameter {name}={raw!r}: not a valid datetime ({exc})") from None
            else:
                values[name] = raw
        return cls(**values)


_FIELDS = tuple(f.name for f in dataclasses.fields(Filters))
_TIME_FIELDS = frozenset({"since", "until"})
NO_FILTERS = Filters()


# --- the registry ----------------------------------------------------------------------------
_REGISTRY: dict[str, Callable[..., Query]] = {}
# name -> builder, read-only: builders take Filters and/or plain typed keyword
# arguments, never SQL, so exposing them over HTTP is safe.
QUERIES: Mapping[str, Callable[..., Query]] = MappingProxyType(_REGISTRY)

Builder = TypeVar("Builder", bound=Callable[..., Query])


def query(builder: Builder) -> Builder:
    """Register ``builder`` under its function name; a name registered twice is an error."""
    name = builder.__name__
    if name in _REGISTRY:
        raise TurnledgerError(
            f"query {name!r} is registered twice ({_REGISTRY[name].__module__} and {builder.__module__})"
        )
    _REGISTRY[name] = builder
    return builder


def query_name(builder: Callable[..., Query]) -> str:
    """The name ``builder`` is registered under; any other function is an ``UnknownQuery``."""
    name = getattr(builder, "__name__", repr(builder))
    if _REGISTRY.get(name) is not builder:
        raise UnknownQuery(f"unknown query {name!r}: not a registered ledger query; choose one of {sorted(_REGISTRY)}")
    return name


def run(con: duckdb.DuckDBPyConnection, query: Query) -> pd.DataFrame:
    """Execute for display: a DataFrame, USD as float."""
    return con.execute(query.sql, query.params).df()


def records(con: duckdb.DuckDBPyConnection, query: Query) -> list[dict[str, Any]]:
    """Execute for reports: a list of dicts with exact Decimal USD."""
    cur = con.execute(query.sql, query.params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


# --- pieces of SQL the builders share ----------------------------------------------------------
def cache_verdict(rate: float | None) -> str:
    if rate is None:
        return "no data"
    return "healthy" if rate > CACHE_HEALTHY else "weak" if rate > CACHE_WEAK else "broken"


def verdict_sql(hit_rate: str) -> str:
    """``cache_verdict`` in SQL, over a hit-rate expression."""
    return (
        f"CASE WHEN {hit_rate} IS NULL THEN 'no data' WHEN {hit_rate} > {CACHE_HEALTHY} THEN 'healthy'\n"
        f"            WHEN {hit_rate} > {CACHE_WEAK} THEN 'weak' ELSE 'broken' END"
    )


def sums(columns: Iterable[str]) -> str:
    """``sum(x) AS x`` for each column, comma-separated (per-term figures keep their column names)."""
    return ", ".join(f"sum({c}) AS {c}" for c in columns)


def choose(name: str, value: str, allowed: Collection[str]) -> None:
    """Refuse a value outside an allow-list (it is about to become an identifier or a keyword)."""
    if value not in allowed:
        raise ValueError(f"{name}={value!r}: choose one of {sorted(allowed)}")


def _runs_where(f: Filters) -> tuple[str, list[Any]]:
    clauses: list[str] = ["TRUE"]
    params: list[Any] = []
    for column, value in (
        ("tenant", f.tenant),
        ("agent_name", f.agent),
        ("agent_version", f.agent_version),
        ("prompt_version", f.prompt_version),
        ("service_version", f.service_version),
        ("environment", f.environment),
        ("variant", f.variant),
    ):
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    if f.since is not None:
        clauses.append("started_at >= ?")
        params.append(f.since)
    if f.until is not None:
        clauses.append("started_at < ?")
        params.append(f.until)
    if f.model is not None:
        clauses.append("EXISTS (SELECT 1 FROM charges m WHERE m.trace_id = runs.trace_id AND m.model = ?)")
        params.append(f.model)
    return " AND ".join(clauses), params


def run_filtered(f: Filters) -> bool:
    """Do the filters narrow the runs? Every charge and span belongs to a run row, so without
    run-level filters a join to the filtered runs only costs time (about 40% of a charge query)."""
    return any(getattr(f, name) is not None for name in _FIELDS if name != "model")


def filtered(f: Filters, *, inline_charges: bool = False) -> tuple[str, list[Any]]:
    """CTEs ``fr`` (filtered runs) and ``fc`` (their charges, model-filtered too, with ``usd``).

    ``inline_charges``: ``fc`` is inlined wherever it is read. DuckDB materializes a CTE read
    more than once, every column of a million charges; a query that reads a few columns of
    ``fc`` a few times, each narrowed by its own filter, is cheaper reading the table each time.
    """
    where, params = _runs_where(f)
    model_clause = ""
    if f.model is not None:
        model_clause = "WHERE c.model = ?"
        params = [*params, f.model]
    join = "SEMI JOIN fr USING (trace_id)" if run_filtered(f) else ""
    sql = (
        f"WITH fr AS (SELECT * FROM runs WHERE {where}),\n"
        f"fc AS {'NOT MATERIALIZED ' if inline_charges else ''}"
        f"(SELECT c.*, {usd_sum('c')} AS usd FROM charges c {join} {model_clause})\n"
    )
    return sql, params
