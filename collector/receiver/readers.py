"""Query cursors on the writer's database instance, shared by the read routes."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import duckdb

__all__ = ["ReaderBusy", "ReaderPool", "drop_pending_result"]


def drop_pending_result(con: duckdb.DuckDBPyConnection) -> None:
    """Release a half-read result (e.g. after fetchone) and the scan it holds open.

    DuckDB 1.5 has no ``abort()``: running any statement closes the connection's pending result.
    """
    with suppress(duckdb.Error):
        con.execute("SELECT NULL")


class ReaderBusy(Exception):
    """Every query cursor stayed in use for the whole wait: 503."""


class ReaderPool:
    """Cursors on the writer's database instance, one per concurrent query."""

    def __init__(self, con: duckdb.DuckDBPyConnection, size: int) -> None:
        self._pool: queue.LifoQueue[duckdb.DuckDBPyConnection] = queue.LifoQueue()
        self._all = [con.cursor() for _ in range(max(1, size))]
        for cur in self._all:
            self._pool.put(cur)

    @contextmanager
    def connection(self, timeout: float = 30.0) -> Iterator[duckdb.DuckDBPyConnection]:
        try:
            cur = self._pool.get(timeout=timeout)
        except queue.Empty:
            raise ReaderBusy("all query connections are busy") from None
        try:
            yield cur
        finally:
            drop_pending_result(cur)  # never hand a half-read result on
            self._pool.put(cur)

    def close(self) -> None:
        for cur in self._all:
            with suppress(duckdb.Error):
                cur.close()
