"""Opening the ledger: a DuckDB file, or a DuckLake (``ledger.lake``), behind one call.

DuckDB allows one writing process per file. The collector server is that
writer; without a server, the CLI and dashboard open the file themselves.
A target ``ducklake:postgres:<dsn>`` opens a lake instead (team mode), migrated the same way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import duckdb

from . import lake
from .errors import LedgerBusy, TurnledgerError
from .lake import lock as lake_lock
from .schema import MIGRATIONS, migrate, pending_migrations, schema_version
from .settings import data_path as default_data_path
from .settings import db_path

__all__ = ["NEW_FILES", "announce_server", "open_ledger"]

# DuckDB checkpoints (moves the write-ahead log into the file) inside the commit
# that takes the log past this size. At the 16 MiB default a busy writer spent a
# third of its CPU checkpointing (benchmarks/ingest_throughput.py prints the writer's
# cost at both). A crash leaves at most this much log, which
# the next open replays (about 0.25 s for 42 MB).
CHECKPOINT_THRESHOLD = "64MiB"
# A new file is written in the newest storage format: DuckDB 1.5 keeps the default at an old one
# (for older readers) where ``USING COMPRESSION zstd`` silently stores the content store's bodies
# uncompressed (content took 2,647 B/span instead of 1,088 in benchmarks/content_store.py). Every
# connection that creates a ledger file passes it (``ledger.retention.compact`` too).
NEW_FILES: dict[str, str | bool | int | float | list[str]] = {"storage_compatibility_version": "latest"}
_CONFIG: dict[str, str | bool | int | float | list[str]] = {"checkpoint_threshold": CHECKPOINT_THRESHOLD, **NEW_FILES}


def open_ledger(
    path: str | Path | None = None, *, read_only: bool = False, data_path: str | None = None
) -> duckdb.DuckDBPyConnection:
    """A migrated connection. ``":memory:"`` gives a throwaway ledger (tests).

    ``data_path``: where a lake target's Parquet files go (default ``$TURNLEDGER_DATA_PATH``).
    """
    target = str(path if path is not None else db_path())
    if lake.is_lake_target(target):
        data_path = data_path or default_data_path()
        con = lake.connect(target, data_path=data_path, read_only=read_only)
        if read_only and schema_version(con) and pending_migrations(con):
            con.close()  # written by an older turnledger: upgraded once by a short-lived writer, as a file is
            con = lake.connect(target, data_path=data_path, read_only=False)
            _migrate_lake(con)
            con.close()
            con = lake.connect(target, data_path=data_path, read_only=True)
        if not read_only:
            _migrate_lake(con)
        return con
    if read_only and target != ":memory:" and not Path(target).exists():
        raise TurnledgerError(
            f"no ledger at {target!r}: run `turnledger ingest sample_traces/` or `turnledger up` first"
        )
    con = _connect(target, read_only)
    # (A DuckDB file turnledger never wrote, schema 0, is left as it is.)
    if read_only and target != ":memory:" and schema_version(con) and pending_migrations(con):
        con.close()
        _upgrade(target)
        con = _connect(target, read_only)
    if not read_only:
        migrate(con)
    return con


def _migrate_lake(con: duckdb.DuckDBPyConnection) -> None:
    """Collectors (and readers finding an older lake) starting together: one migrates, the others find it done."""
    with lake_lock.exclusive(con):
        migrate(con)


def _upgrade(target: str) -> None:
    """Migrate a file a reader found written by an older turnledger: once, with a short-lived writer
    (nobody holds the file, or the read-only open would have failed), so a dashboard or report opened
    after an upgrade reads the schema this version expects instead of failing on a missing column."""
    try:
        writer = duckdb.connect(target, config=_CONFIG)
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            return  # a writer took it meanwhile: it migrates the file as it opens it
        raise TurnledgerError(
            f"ledger {target!r} was written by an older turnledger and needs migrations "
            f"(up to {MIGRATIONS[-1][0]}) this process cannot apply ({exc}): open it once as a user who can "
            "write it (`turnledger serve --db …` or `turnledger ingest --db …`)"
        ) from None
    try:
        migrate(writer)
    finally:
        writer.close()


SERVING_SUFFIX = ".serving"  # beside a ledger file a collector holds: the address it serves it at


@contextlib.contextmanager
def announce_server(db: str | Path, url: str) -> Iterator[None]:
    """While a collector serves a ledger file, say where beside it, so a command refused the file's lock
    names the collector's real address (not the default port)."""
    note = Path(f"{db}{SERVING_SUFFIX}")
    try:
        note.write_text(url)
    except OSError:  # a read-only directory: the refusal then names the default
        yield
        return
    try:
        yield
    finally:
        note.unlink(missing_ok=True)


def _served_at(target: str) -> str:
    try:
        return Path(f"{target}{SERVING_SUFFIX}").read_text().strip()[:200]
    except OSError:
        return ""


def _connect(target: str, read_only: bool) -> duckdb.DuckDBPyConnection:
    try:
        return duckdb.connect(target, read_only=read_only, config=_CONFIG)
    except duckdb.IOException as exc:
        if "lock" not in str(exc).lower():
            raise TurnledgerError(f"cannot open ledger {target!r}: {exc}") from None
        url = _served_at(target)
        where = (
            f"`--server {url}` or TURNLEDGER_SERVER={url} (where it serves this ledger)"
            if url
            else "`--server URL` or TURNLEDGER_SERVER=URL (the address it printed as it started; "
            "http://127.0.0.1:4318 unless given --port)"
        )
        raise LedgerBusy(
            f"cannot open ledger {target!r}: another process holds it ({exc}). If that is `turnledger serve` "
            f"or `turnledger up`, it owns the file: read through it instead, with {where}, plus TURNLEDGER_TOKEN "
            "if it needs a token."
        ) from None
    except duckdb.Error as exc:  # a path DuckDB reads as something else (good.json: "in-memory ... read-only")
        raise TurnledgerError(
            f"cannot open ledger {target!r}: it is not a DuckDB ledger file ({str(exc).splitlines()[0]}); "
            "give a .duckdb file written by turnledger, or a DuckLake (ducklake:…)"
        ) from None
