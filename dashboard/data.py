"""Where the dashboard's numbers come from: one small ``Source`` interface.

Two implementations, chosen once per session by ``source_spec``:

* ``ServerSource``: a running ``turnledger serve`` (``TURNLEDGER_SERVER``), read
  through its named-query API. The server owns the DuckDB file; we never open it.
* ``FileSource``: no server, so the ledger file is opened read-only. Opening
  costs tens of milliseconds, so queries share one connection per file; it is
  closed after ``idle_close_s`` without a query, which hands the file back to a
  writer (``turnledger ingest``) between page renders.

Either way a figure is a registered ``ledger.queries`` builder called with
the filters and arguments (``source.query(q.long_tail, f, limit=5)``): this
module holds no SQL. ``load`` / ``context`` are the cached entry points pages
call; the cache key is every input (source, refresh generation, query name,
filters, arguments) and entries live a few seconds, so data streaming in shows
up on the next refresh.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from ledger import queries as q
from ledger import settings

__all__ = [
    "CACHE_TTL_S",
    "FileSource",
    "ServerSource",
    "Source",
    "SourceSpec",
    "make_source",
    "parse_app_args",
    "source_spec",
]

CACHE_TTL_S = 5


class Source(Protocol):
    """What a page may ask for. ``filters`` is None for queries that take none (one run's rows)."""

    def query(self, builder: Callable[..., q.Query], filters: q.Filters | None = None, **kwargs: Any) -> pd.DataFrame:
        """Rows of a registered builder; any other function is an ``UnknownQuery``."""
        ...

    def context(self, trace_id: str, span_id: str) -> dict[str, Any] | None: ...

    def budgets(self) -> list[dict[str, Any]]:
        """Every budget rule as it stands now (``ledger.budgets.service.budget_statuses``)."""
        ...


@dataclass(frozen=True)
class SourceSpec:
    """Hashable description of a source (cache key material); ``make_source`` builds it."""

    kind: str  # "file" | "server"
    location: str  # ledger path or server base URL
    token: str | None = None

    def describe(self) -> str:
        return f"server {self.location}" if self.kind == "server" else f"file {self.location} (read-only)"


class _SharedConnection:
    """One read-only connection to a ledger file, shared by the queries in flight.

    Each query gets its own cursor (safe across Streamlit's session threads).
    When the last query finishes, a timer closes the connection after
    ``idle_close_s`` unless another query arrives first.
    """

    def __init__(self, path: Path, idle_close_s: float) -> None:
        self.path, self.idle_close_s = path, idle_close_s
        self._lock = threading.Lock()
        self._con: Any = None
        self._users = 0
        self._timer: threading.Timer | None = None

    @contextmanager
    def cursor(self) -> Iterator[Any]:
        from ledger.store import open_ledger

        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._con is None:
                self._con = open_ledger(self.path, read_only=True)
            self._users += 1
            cur = self._con.cursor()
        try:
            yield cur
        finally:
            cur.close()
            with self._lock:
                self._users -= 1
                if self._users == 0:
                    self._timer = threading.Timer(self.idle_close_s, self._close_if_idle)
                    self._timer.daemon = True
                    self._timer.start()

    def _close_if_idle(self) -> None:
        with self._lock:
            if self._users == 0:
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


class FileSource:
    """Reads the DuckDB ledger file directly (no server running)."""

    def __init__(self, path: str | Path, idle_close_s: float = 2.0) -> None:
        self.path = Path(path)
        key = (str(self.path.resolve()), idle_close_s)
        with _SHARED_LOCK:
            self._shared = _SHARED.setdefault(key, _SharedConnection(self.path, idle_close_s))

    def query(self, builder: Callable[..., q.Query], filters: q.Filters | None = None, **kwargs: Any) -> pd.DataFrame:
        q.query_name(builder)  # only registered builders, as through the server
        built = builder(filters, **kwargs) if filters is not None else builder(**kwargs)
        with self._shared.cursor() as cur:
            return q.run(cur, built)

    def context(self, trace_id: str, span_id: str) -> dict[str, Any] | None:
        from ledger.content import load_context

        with self._shared.cursor() as cur:
            return load_context(cur, trace_id, span_id)

    def budgets(self) -> list[dict[str, Any]]:
        from ledger.budgets.service import budget_statuses

        with self._shared.cursor() as cur:
            return budget_statuses(cur)

    def close(self) -> None:
        """Release the file now rather than after the idle delay."""
        with self._shared._lock:
            if self._shared._users == 0:
                self._shared.close_now()


class ServerSource:
    """Reads through ``turnledger serve``'s named-query API (Arrow IPC over HTTP)."""

    def __init__(self, base_url: str, token: str | None = None, client: Any = None) -> None:
        self.base_url = base_url
        if client is None:
            # Imported lazily: the dashboard must work without the server package.
            from collector.client import ServerClient

            client = ServerClient(base_url, token)
        self.client = client

    def query(self, builder: Callable[..., q.Query], filters: q.Filters | None = None, **kwargs: Any) -> pd.DataFrame:
        name = q.query_name(builder)  # fail here, with the list of names, rather than as an HTTP 404
        params = {
            **(filters.to_params() if filters is not None else {}),
            **{k: v for k, v in kwargs.items() if v is not None},
        }
        return self.client.query(name, **params)

    def context(self, trace_id: str, span_id: str) -> dict[str, Any] | None:
        return self.client.context(trace_id, span_id)

    def budgets(self) -> list[dict[str, Any]]:
        return self.client.budgets()


def make_source(spec: SourceSpec) -> Source:
    if spec.kind == "server":
        return ServerSource(spec.location, spec.token)
    return FileSource(spec.location)


def parse_app_args(argv: Sequence[str]) -> argparse.Namespace:
    """Arguments after ``streamlit run dashboard/app.py --``; unknown ones are ignored."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--db", type=Path, default=None)
    p.add_argument("--server", default=None)
    args, _ = p.parse_known_args(list(argv))
    return args


def source_spec(db: Path | str | None = None, server: str | None = None) -> SourceSpec:
    """Server if one is given (argument or TURNLEDGER_SERVER), else the ledger file."""
    url = server or settings.server_url()
    if url:
        return SourceSpec("server", url.rstrip("/"), settings.token())
    return SourceSpec("file", str(Path(db) if db else settings.db_path()))
