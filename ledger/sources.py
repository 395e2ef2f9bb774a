"""Where the read commands and the dashboard get their rows: one ``Source`` interface.

A figure is a registered ``ledger.queries`` builder called with the filters and
its arguments (``source.query(q.long_tail, f, limit=5)``), so the same request
can be answered by any source and no caller holds SQL:

* ``ConnectionSource``: an open DuckDB connection (a test's ledger, a report
  built inside a running server);
* ``FileSource``: the ledger file opened read-only, its connection shared and
  handed back to a writer when idle;
* ``collector.client.ServerSource``: a running ``turnledger serve``, read through
  its named-query API (Arrow IPC keeps money exact); the server owns the file.

``source_spec`` chooses between the file and a server once; ``SourceSpec`` is
the hashable description the dashboard's caches key on.
"""

from __future__ import annotations

import atexit
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from . import queries as q
from . import settings

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

    from .content import CapturedTurn

__all__ = ["ConnectionSource", "FileSource", "Source", "SourceSpec", "source_spec"]


class Source(Protocol):
    """What a reader may ask for. ``filters`` is None for queries that take none (one run's rows)."""

    def describe(self) -> str:
        """Where the rows come from, in words ("file x.duckdb (read-only)")."""
        ...

    def query(self, builder: Callable[..., q.Query], filters: q.Filters | None = None, **kwargs: Any) -> pd.DataFrame:
        """Rows of a registered builder for display (USD as float); any other function is an ``UnknownQuery``."""
        ...

    def records(
        self, builder: Callable[..., q.Query], filters: q.Filters | None = None, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """The same rows as dicts with exact types (USD as Decimal), for reports."""
        ...

    def context(self, trace_id: str, span_id: str) -> dict[str, Any] | None: ...

    def turn(self, trace_id: str, span_id: str) -> CapturedTurn | None:
        """One model call's captured request and response (``ledger.content.load_turn``)."""
        ...

    def budgets(self) -> list[dict[str, Any]]:
        """Every budget rule as it stands now (``ledger.budgets.service.budget_statuses``)."""
        ...


def _build(builder: Callable[..., q.Query], filters: q.Filters | None, kwargs: dict[str, Any]) -> q.Query:
    """The query a source runs: only registered builders, exactly as the server would run them."""
    q.query_name(builder)
    return builder(filters, **kwargs) if filters is not None else builder(**kwargs)


class _CursorSource(ABC):
    """The queries of every source that holds a DuckDB connection; subclasses say how a cursor is had."""

    @abstractmethod
    def cursor(self) -> Any:
        """A context manager giving a cursor of its own."""

    @abstractmethod
    def describe(self) -> str: ...

    def query(self, builder: Callable[..., q.Query], filters: q.Filters | None = None, **kwargs: Any) -> pd.DataFrame:
        built = _build(builder, filters, kwargs)  # an unknown builder fails before the file is opened
        with self.cursor() as cur:
            return q.run(cur, built)

    def records(
        self, builder: Callable[..., q.Query], filters: q.Filters | None = None, **kwargs: Any
    ) -> list[dict[str, Any]]:
        built = _build(builder, filters, kwargs)
        with self.cursor() as cur:
            return q.records(cur, built)

    def context(self, trace_id: str, span_id: str) -> dict[str, Any] | None:
        from .content import load_context

        with self.cursor() as cur:
            return load_context(cur, trace_id, span_id)

    def turn(self, trace_id: str, span_id: str) -> CapturedTurn | None:
        from .content import load_turn

        with self.cursor() as cur:
            return load_turn(cur, trace_id, span_id)

    def budgets(self) -> list[dict[str, Any]]:
        from .budgets.service import budget_statuses

        with self.cursor() as cur:
            return budget_statuses(cur)


class ConnectionSource(_CursorSource):
    """Reads an open connection (each call on a cursor of its own); the caller owns the connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection, where: str = "an open ledger connection") -> None:
        self.con, self.where = con, where

    def describe(self) -> str:
        return self.where

    @contextmanager
    def cursor(self) -> Iterator[Any]:
        cur = self.con.cursor()
        try:
            yield cur
        finally:
            cur.close()


class _SharedConnection:
    """One read-only connection to a ledger file, shared by the queries in flight.

    Each query gets its own cursor (safe across Streamlit's session threads).
    When the last query finishes, a timer closes the connection after
    ``idle_close_s`` unless another query arrives first.
    """

    def __init__(self, path: Path, idle_close_s: float) -> None:
        self.path, self.idle_close_s = path, idle_close_s
        self.lock = threading.Lock()
        self._con: Any = None
        self.users = 0
        self._timer: threading.Timer | None = None

    @contextmanager
    def cursor(self) -> Iterator[Any]:
        from .store import open_ledger

        with self.lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._con is None:
                self._con = open_ledger(self.path, read_only=True)
            self.users += 1
            cur = self._con.cursor()
        try:
            yield cur
        finally:
            cur.close()
            with self.lock:
                self.users -= 1
                if self.users == 0:
                    self._timer = threading.Timer(self.idle_close_s, self._close_if_idle)
                    self._timer.daemon = True
                    self._timer.start()

    def _close_if_idle(self) -> None:
        with self.lock:
            if self.users == 0:
                self.close_now()

    def close_now(self) -> None:
        """Close if open (callers hold the lock or know no query runs)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._con is not None:
            self._con.close()
            self._con = None


_SHARED: dict[tuple[str, float], _SharedConnection] = {}
_SHARED_LOCK = threading.Lock()


@atexit.register
def _close_shared() -> None:
    # A DuckDB connection still open when the interpreter tears its modules down can abort the
    # process in its destructor ("terminate called after throwing..."): close them first.
    with _SHARED_LOCK:
        for shared in _SHARED.values():
            with shared.lock:
                shared.close_now()


# A file's connection is closed soon after its last query, so a writer waiting for the file gets
# it; a lake has no such writer, and opening one costs catalog reads (0.24 s quiet, ~1 s under load).
FILE_IDLE_CLOSE_S = 2.0
LAKE_IDLE_CLOSE_S = 300.0


class FileSource(_CursorSource):
    """Reads the ledger straight from storage (a DuckDB file or a DuckLake; no server running).
    Opening costs tens of milliseconds (a second on a lake), so the queries of one process share
    a connection per ledger, closed ``idle_close_s`` after the last (by default ``FILE_IDLE_CLOSE_S``
    for a file, ``LAKE_IDLE_CLOSE_S`` for a lake)."""

    def __init__(self, path: str | Path, idle_close_s: float | None = None) -> None:
        from . import lake  # here: it loads DuckDB, which a server source never needs

        on_lake = lake.is_lake_target(str(path))
        self.path = Path(path)
        if idle_close_s is None:
            idle_close_s = LAKE_IDLE_CLOSE_S if on_lake else FILE_IDLE_CLOSE_S
        key = (lake.resolved(path), idle_close_s)
        with _SHARED_LOCK:
            self._shared = _SHARED.setdefault(key, _SharedConnection(self.path, idle_close_s))

    def describe(self) -> str:
        return f"{_stored_at(str(self.path))} (read-only)"

    def cursor(self) -> Any:
        return self._shared.cursor()

    def close(self) -> None:
        """Release the file now rather than after the idle delay."""
        with self._shared.lock:
            if self._shared.users == 0:
                self._shared.close_now()


@dataclass(frozen=True)
class SourceSpec:
    """Hashable description of a source (cache key material); ``collector.client.make_source`` builds it."""

    kind: str  # "file" | "server"
    location: str  # ledger path or server base URL
    token: str | None = None

    def describe(self, *, reading: bool = True) -> str:
        """Where it is, in words for a status line: "server URL", "file PATH" or "lake TARGET"
        (without its password), marked read-only when read straight from storage."""
        if self.kind == "server":
            return f"server {self.location}"
        where = _stored_at(self.location)
        return f"{where} (read-only)" if reading else where


def _stored_at(location: str) -> str:
    """A ledger in storage, in words: "file PATH", or "lake TARGET" without its password."""
    from . import lake  # here: it loads DuckDB, which a server source never needs

    return f"lake {lake.shown(location)}" if lake.is_lake_target(location) else f"file {location}"


def source_spec(db: Path | str | None = None, server: str | None = None) -> SourceSpec:
    """Where to read: a server given as an argument, else a file given as one, else
    TURNLEDGER_SERVER, else the ledger file (TURNLEDGER_DB or ./turnledger.duckdb).

    What the user typed beats the environment, so ``--db x.duckdb`` reads that file even
    in a shell where TURNLEDGER_SERVER is set.
    """
    url = server or (None if db else settings.server_url())
    if url:
        return SourceSpec("server", url.rstrip("/"), settings.token())
    return SourceSpec("file", str(Path(db) if db else settings.db_path()))
