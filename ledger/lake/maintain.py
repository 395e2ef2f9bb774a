"""A lake's upkeep: small files compacted, old snapshots expired, unreferenced files deleted.

Every commit adds Parquet files (a collector commits many small batches), and every snapshot
keeps the files it saw. ``maintain`` runs DuckLake's three maintenance calls in order: merge
adjacent small files (with the lake's write lock held: the merge rewrites files that a
concurrent commit might delete rows from), expire snapshots older than ``keep_snapshots`` (the
time-travel horizon, and so the oldest state a restore can return to), delete the files only
expired snapshots referenced once they have been unreferenced for ``file_grace`` (a reader still
scanning an older snapshot keeps its files meanwhile).

``MaintenanceSchedule`` runs it every ``interval`` seconds in exactly one collector of the lake:
the one holding the lake-wide "maintain" lock (``ledger.lake.lock.leader``); the others keep
asking, so when the leader dies another takes over.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import timedelta

import duckdb

from .. import lake
from ..errors import InputError
from . import lock as lake_lock

__all__ = [
    "DEFAULT_FILE_GRACE",
    "DEFAULT_KEEP_SNAPSHOTS",
    "Maintained",
    "MaintenanceSchedule",
    "maintain",
    "start_maintenance",
]

log = logging.getLogger("turnledger.maintain")

DEFAULT_KEEP_SNAPSHOTS = timedelta(days=7)
DEFAULT_FILE_GRACE = timedelta(hours=1)


@dataclass(frozen=True)
class Maintained:
    merged: int  # tables whose files were merged
    expired: int  # snapshots expired
    deleted: int  # files deleted

    def summary(self) -> str:
        return (
            f"merged the files of {self.merged} tables, expired {self.expired} snapshots, deleted {self.deleted} files"
        )


def _rows(con: duckdb.DuckDBPyConnection, call: str) -> int:
    return con.execute(call).to_arrow_table().num_rows


def _interval(span: timedelta) -> str:
    return f"now() - INTERVAL '{int(span.total_seconds() * 1_000_000)} microseconds'"


def maintain(
    con: duckdb.DuckDBPyConnection,
    *,
    keep_snapshots: timedelta = DEFAULT_KEEP_SNAPSHOTS,
    file_grace: timedelta = DEFAULT_FILE_GRACE,
) -> Maintained:
    if not lake.is_lake(con):
        raise InputError("maintain works on a DuckLake (--db ducklake:…); a ledger file needs none")
    catalog = lake.literal(con.execute("SELECT current_database()").fetchone()[0])  # type: ignore[index]
    with lake_lock.exclusive(con):
        merged = _rows(con, f"CALL ducklake_merge_adjacent_files({catalog})")
    expired = _rows(con, f"CALL ducklake_expire_snapshots({catalog}, older_than => {_interval(keep_snapshots)})")
    deleted = _rows(con, f"CALL ducklake_cleanup_old_files({catalog}, older_than => {_interval(file_grace)})")
    return Maintained(merged, expired, deleted)


class MaintenanceSchedule:
    """``maintain`` every ``interval`` seconds while this collector is the lake's maintenance leader."""

    def __init__(self, con: duckdb.DuckDBPyConnection, interval: float) -> None:
        self.con = con.cursor()
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="turnledger-maintain", daemon=True)

    def start(self) -> MaintenanceSchedule:
        self._thread.start()
        return self

    def _run(self) -> None:
        led = False
        while not self._stop.wait(self.interval):
            try:
                if not lake_lock.leader(self.con, "maintain"):
                    continue
                if not led:
                    log.info("this collector maintains the lake (every %s s)", self.interval)
                    led = True
                log.info("lake maintenance: %s", maintain(self.con).summary())
            except Exception:
                log.exception("lake maintenance failed; it runs again in %s s", self.interval)

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
        self.con.close()


def start_maintenance(con: duckdb.DuckDBPyConnection, interval: float) -> MaintenanceSchedule | None:
    """A collector's schedule on a lake (None on a file, or with ``interval`` 0)."""
    if interval <= 0 or not lake.is_lake(con):
        return None
    return MaintenanceSchedule(con, interval).start()
