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

# Each subject module's __all__ is exactly its builders, so the package re-exports them whole.
from . import anomaly, budgets, compare, crosscheck, guards, health, meta, quality, runs, spend, tail
from .anomaly import *  # noqa: F403
from .budgets import *  # noqa: F403
from .compare import *  # noqa: F403
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
from .crosscheck import *  # noqa: F403
from .guards import *  # noqa: F403
from .health import *  # noqa: F403
from .meta import *  # noqa: F403
from .quality import *  # noqa: F403
from .runs import *  # noqa: F403
from .spend import *  # noqa: F403
from .tail import *  # noqa: F403

__all__ = [
    "CACHE_HEALTHY",
    "CACHE_WEAK",
    "NO_FILTERS",
    "QUERIES",
    "Filters",
    "Query",
    "UnknownQuery",
    "cache_verdict",
    "parse_time",
    "query_name",
    "records",
    "run",
]
__all__ += anomaly.__all__
__all__ += budgets.__all__
__all__ += compare.__all__
__all__ += crosscheck.__all__
__all__ += guards.__all__
__all__ += health.__all__
__all__ += meta.__all__
__all__ += quality.__all__
__all__ += runs.__all__
__all__ += spend.__all__
__all__ += tail.__all__
