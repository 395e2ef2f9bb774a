"""One writer at a time across every process on a lake: PostgreSQL advisory locks (team mode).

DuckLake has no unique constraints, and a transaction reads the snapshot it began on, so two
collectors committing the same span at once would both pass the anti-join of ``lake.insert_new``
and the stored-copies lookup of ``ledger.dedup``, and both charge it. So every write transaction
on a lake runs inside ``exclusive(con)``: an advisory lock of the catalog's PostgreSQL database,
taken before BEGIN and released after COMMIT or ROLLBACK. The transaction then begins on a
snapshot holding every other collector's commits, and what holds for one writer holds for all of
them unchanged: a span stored once, one charge per billed call, a run rebuilt from all of its
trace's spans whichever collectors received them, one alert per rule, level and window.

Only the commit is serialized: decoding, validation, pricing and redaction (most of a span's CPU)
run in every collector at once, outside the lock, and DuckLake commits one snapshot after another
anyway. A holder that dies (kill -9, a lost machine) loses its PostgreSQL session and the lock
with it; a commit it had not finished was never acknowledged. A holder that hangs holds the others
up to ``LOCK_TIMEOUT_S``, after which their commits fail as retryable (503), never half written.

``leader(con, role)`` is the same kind of lock, held for as long as a collector lives: the one
collector holding it runs the lake's maintenance (``ledger.lake.maintain``).

On a DuckDB file everything here is a no-op: the file has one writing process.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

import duckdb

from .. import lake
from ..errors import Unavailable

if TYPE_CHECKING:
    import psycopg

__all__ = ["LOCK_TIMEOUT_S", "catalog_dsn", "exclusive", "leader", "retrying_conflicts"]

T = TypeVar("T")

# Advisory lock keys (bigints, per database): "turnledger write", "turnledger maintain".
_WRITE_KEY = 0x746C5F7772697465
_ROLE_KEYS = {"maintain": 0x746C5F6D61696E74}
LOCK_TIMEOUT_S = 60
# DuckLake's commit conflicts (a compaction or a rule edit beside an ingest): the transaction is retried.
_CONFLICT_ATTEMPTS = 5

_DSNS: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, str] = weakref.WeakKeyDictionary()


def catalog_dsn(con: duckdb.DuckDBPyConnection) -> str:
    """The libpq connection string of the PostgreSQL catalog behind a lake connection."""
    dsn = _DSNS.get(con)
    if dsn is None:
        row = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchone()
        path = str(row[0]) if row else ""
        if not path.startswith("postgres:"):
            raise Unavailable(f"this lake's catalog is not PostgreSQL ({lake.shown(path)!r}): team mode needs it")
        dsn = _DSNS[con] = path.removeprefix("postgres:")
    return dsn


class _Session:
    """One PostgreSQL session of this process per catalog, holding its advisory locks (reentrant per thread)."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.mutex = threading.RLock()
        self.depth = 0
        self._pg: psycopg.Connection | None = None

    def _connection(self) -> psycopg.Connection:
        import psycopg  # here: only team mode needs it

        pg = self._pg
        if pg is None or pg.closed or pg.broken:
            # Named by process, so an operator (and the tests) can see in pg_locks who holds what.
            pg = psycopg.connect(
                self.dsn, autocommit=True, connect_timeout=10, application_name=f"turnledger-{os.getpid()}"
            )
            pg.execute(f"SET lock_timeout = '{LOCK_TIMEOUT_S}s'")
            self._pg = pg
        return pg

    def lock(self, key: int) -> None:
        import psycopg

        try:
            self._connection().execute("SELECT pg_advisory_lock(%s)", [key])
        except psycopg.Error as exc:
            self.drop()
            raise Unavailable(f"the lake's write lock cannot be taken: {lake.shown(str(exc)).strip()}") from None

    def try_lock(self, key: int) -> bool:
        import psycopg

        try:
            row = self._connection().execute("SELECT pg_try_advisory_lock(%s)", [key]).fetchone()
        except psycopg.Error:
            self.drop()
            return False
        return bool(row and row[0])

    def unlock(self, key: int) -> None:
        import psycopg

        try:
            self._connection().execute("SELECT pg_advisory_unlock(%s)", [key])
        except psycopg.Error:
            self.drop()  # a closed session holds no lock

    def alive(self) -> bool:
        pg = self._pg
        return pg is not None and not pg.closed and not pg.broken

    def drop(self) -> None:
        pg, self._pg = self._pg, None
        if pg is not None:
            with contextlib.suppress(Exception):
                pg.close()


_SESSIONS: dict[tuple[str, str], _Session] = {}
_SESSIONS_LOCK = threading.Lock()


def _session(dsn: str, purpose: str) -> _Session:
    with _SESSIONS_LOCK:
        return _SESSIONS.setdefault((dsn, purpose), _Session(dsn))


@contextlib.contextmanager
def exclusive(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Hold the lake's write lock (every process, every thread) for the block; a no-op on a file.

    Reentrant within a thread: only the outermost block takes and releases the lock.
    """
    if not lake.is_lake(con):
        yield
        return
    session = _session(catalog_dsn(con), "write")
    with session.mutex:
        if session.depth == 0:
            session.lock(_WRITE_KEY)
        session.depth += 1
        try:
            yield
        finally:
            session.depth -= 1
            if session.depth == 0:
                session.unlock(_WRITE_KEY)


def _is_conflict(exc: duckdb.Error) -> bool:
    return isinstance(exc, duckdb.TransactionException) and "conflict" in str(exc).lower()


def retrying_conflicts(con: duckdb.DuckDBPyConnection, work: Callable[[], T]) -> T:
    """``work()`` (one whole transaction) under ``exclusive``, run again after a DuckLake commit conflict."""
    if not lake.is_lake(con):
        return work()
    with exclusive(con):
        for _ in range(_CONFLICT_ATTEMPTS - 1):
            try:
                return work()
            except duckdb.Error as exc:
                if not _is_conflict(exc):
                    raise
        return work()


def leader(con: duckdb.DuckDBPyConnection, role: str) -> bool:
    """Whether this process holds (now takes, if free) the lake-wide ``role``; kept until it exits."""
    session = _session(catalog_dsn(con), role)
    with session.mutex:
        if session.depth and session.alive():
            return True
        session.depth = 0  # never held, or its session was lost (and the lock with it)
        if session.try_lock(_ROLE_KEYS[role]):
            session.depth = 1
            return True
        return False
