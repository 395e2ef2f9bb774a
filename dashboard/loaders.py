"""Cached loaders the pages call: ``load(q.cost_per_run, filters, **kwargs)`` and ``context(...)``.

Every input is a parameter of the cached function (source, refresh generation,
query name, filters, arguments), so two sessions or two filter settings never
share a result they should not. ``refresh()`` bumps this session's generation:
the next call misses the cache and reads fresh rows.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import streamlit as st

from collector.client import make_source
from ledger import queries as q
from ledger.errors import TurnledgerError
from ledger.sources import SourceSpec
from ledger.wire_request import WireRequest

from .data import CACHE_TTL_S

__all__ = [
    "SourceError",
    "budgets",
    "context",
    "generation",
    "load",
    "refresh",
    "refreshed_at",
    "response",
    "set_spec",
    "spec",
    "wire_request",
]

_SPEC_KEY = "tl_source_spec"
_GEN_KEY = "tl_generation"
_GEN_AT_KEY = "tl_generation_at"


class SourceError(TurnledgerError):
    """The ledger could not be read; the message says what to do."""


def set_spec(value: SourceSpec) -> None:
    st.session_state[_SPEC_KEY] = value


def spec() -> SourceSpec:
    value = st.session_state.get(_SPEC_KEY)
    if value is None:
        from ledger.sources import source_spec

        value = source_spec()
        set_spec(value)
    return value


def generation() -> int:
    return int(st.session_state.get(_GEN_KEY, 0))


def refresh() -> None:
    st.session_state[_GEN_KEY] = generation() + 1
    st.session_state[_GEN_AT_KEY] = _now()


def refreshed_at() -> datetime:
    """When this session last asked for fresh data (its start, or the last refresh)."""
    return st.session_state.setdefault(_GEN_AT_KEY, _now())


def _now() -> datetime:
    return datetime.now(UTC)


def _explain(exc: Exception, where: SourceSpec) -> SourceError:
    text = str(exc) or type(exc).__name__
    if where.kind == "server":
        return SourceError(
            f"Cannot read from the turnledger server at {where.location}: {text}. "
            "Is `turnledger serve` (or `turnledger up`) running? Unset TURNLEDGER_SERVER to read the file instead."
        )
    return SourceError(f"Cannot read the ledger {where.location}: {text}")


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False, max_entries=512)
def _load(
    where: SourceSpec, gen: int, name: str, filters: q.Filters | None, kwargs: tuple[tuple[str, Any], ...]
) -> pd.DataFrame:
    del gen  # part of the cache key only
    return make_source(where).query(q.QUERIES[name], filters, **dict(kwargs))


@st.cache_data(ttl=60, show_spinner=False, max_entries=256)
def _context(where: SourceSpec, gen: int, trace_id: str, span_id: str) -> dict[str, Any] | None:
    del gen
    return make_source(where).context(trace_id, span_id)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False, max_entries=64)
def _turn(where: SourceSpec, gen: int, trace_id: str, span_id: str) -> tuple[Any, WireRequest | None]:
    del gen
    turn = make_source(where).turn(trace_id, span_id)
    return (turn.response, turn.wire) if turn is not None else (None, None)


def response(trace_id: str, span_id: str) -> Any:
    """What the model answered on one model-call span (its output messages), or None."""
    where = spec()
    try:
        return _turn(where, generation(), trace_id, span_id)[0]
    except Exception as exc:
        raise _explain(exc, where) from exc


def wire_request(trace_id: str, span_id: str) -> WireRequest | None:
    """One model-call span's request in its provider's wire format (``ledger.wire_request``), or None."""
    where = spec()
    try:
        return _turn(where, generation(), trace_id, span_id)[1]
    except Exception as exc:
        raise _explain(exc, where) from exc


def load(builder: Callable[..., q.Query], filters: q.Filters | None = None, **kwargs: Any) -> pd.DataFrame:
    """Rows of a registered ledger query (a copy: callers may modify it)."""
    name = q.query_name(builder)  # the cache key holds its name, cheaper to hash than its code
    where = spec()
    try:
        df = _load(where, generation(), name, filters, tuple(sorted(kwargs.items())))
    except SourceError:
        raise
    except Exception as exc:  # any backend failure becomes one actionable message
        raise _explain(exc, where) from exc
    return df.copy()


def context(trace_id: str, span_id: str) -> dict[str, Any] | None:
    """The exact captured request payload of one model-call span, or None."""
    where = spec()
    try:
        return _context(where, generation(), trace_id, span_id)
    except Exception as exc:
        raise _explain(exc, where) from exc


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False, max_entries=64)
def _budgets(where: SourceSpec, gen: int) -> list[dict[str, Any]]:
    del gen
    return make_source(where).budgets()


def budgets() -> list[dict[str, Any]]:
    """Every budget rule as it stands now: the documents ``turnledger budget list`` prints."""
    where = spec()
    try:
        return _budgets(where, generation())
    except Exception as exc:
        raise _explain(exc, where) from exc
