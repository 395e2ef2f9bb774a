"""``turnledger migrate`` and ``turnledger maintain``: a file ledger into a DuckLake, and a lake's upkeep."""

from __future__ import annotations

import argparse
from datetime import timedelta
from pathlib import Path

from .args import add_data_path

__all__ = ["add_maintain", "add_migrate", "cmd_maintain", "cmd_migrate"]


def add_migrate(p: argparse.ArgumentParser) -> None:
    """Copy a ledger file into an empty DuckLake, every table exactly (team mode)."""
    p.add_argument("--from", dest="source", type=Path, required=True, metavar="FILE", help="the ledger file")
    p.add_argument(
        "--to", dest="target", required=True, metavar="LAKE", help="the lake: 'ducklake:postgres:dbname=… host=…'"
    )
    add_data_path(p)
    p.epilog = "Stop the collector that holds the file first: the file is brought to the current schema."


def cmd_migrate(a: argparse.Namespace) -> int:
    from ledger import lake
    from ledger.lake.migrate import migrate_to_lake

    copied = migrate_to_lake(a.source, a.target)
    total = sum(copied.rows.values())
    print(f"copied {total:,} rows of {len(copied.rows)} tables from {a.source} into {lake.shown(a.target)}")
    return 0


def add_maintain(p: argparse.ArgumentParser) -> None:
    """Compact a DuckLake's small files, expire its old snapshots, delete the files none references."""
    p.add_argument("--db", required=True, metavar="LAKE", help="the lake: 'ducklake:postgres:dbname=… host=…'")
    p.add_argument(
        "--keep-days",
        type=float,
        default=7.0,
        help="snapshots younger than this are kept (time travel, restores; default 7)",
    )
    p.add_argument(
        "--grace-hours",
        type=float,
        default=1.0,
        help="a file no snapshot references is deleted this long after (running readers; default 1)",
    )
    p.epilog = "`turnledger serve` on a lake runs this itself in one of its collectors (--maintain-every)."


def cmd_maintain(a: argparse.Namespace) -> int:
    from ledger.lake.maintain import maintain
    from ledger.store import open_ledger

    con = open_ledger(a.db)
    try:
        done = maintain(con, keep_snapshots=timedelta(days=a.keep_days), file_grace=timedelta(hours=a.grace_hours))
    finally:
        con.close()
    print(done.summary())
    return 0
