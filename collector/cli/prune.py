"""``turnledger prune --older-than 30d``: drop span detail and captured content past retention.

Every charge and every run stays (``report``'s money figures are unchanged); the
spans of runs started before the cutoff lose their attributes, events, links and
content (the root span and each span's skeleton stay: ``ledger.retention``). The
file is then rewritten without the freed space (DuckDB does not shrink a file on
its own), unless ``--no-compact``. The ledger must not be held by a running
``turnledger serve``.
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ledger.errors import InputError, TurnledgerError

from .args import add_db

__all__ = ["add_prune", "cmd_prune", "parse_age"]

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([dhm])\s*$")
_UNITS = {"d": "days", "h": "hours", "m": "minutes"}


def parse_age(text: str) -> timedelta:
    """``30d``, ``12h``, ``90m``."""
    m = _AGE.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r}: write a number and d, h or m, e.g. 30d")
    return timedelta(**{_UNITS[m.group(2)]: float(m.group(1))})


def add_prune(p: argparse.ArgumentParser) -> None:
    """Drop span detail and captured content of runs older than a retention age (charges and runs stay)."""
    p.add_argument(
        "--older-than", required=True, type=parse_age, metavar="AGE", help="runs started before now - AGE (30d, 12h)"
    )
    p.add_argument("--no-compact", action="store_true", help="leave the file its size (freed space is reused later)")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    add_db(p)


def cmd_prune(a: argparse.Namespace) -> int:
    import duckdb

    from ledger import lake
    from ledger.retention import compact, prune
    from ledger.settings import db_path
    from ledger.store import open_ledger

    target = a.db or db_path()
    cutoff = (datetime.now(UTC) - a.older_than).replace(tzinfo=None)
    out = None if a.quiet else sys.stderr

    def progress(done: int, total: int) -> None:
        if out is not None:
            print(f"\rdropping detail: {done:,}/{total:,} runs", end="" if done < total else "\n", file=out, flush=True)

    try:
        con = open_ledger(target)
    except duckdb.IOException as exc:
        raise TurnledgerError(f"cannot open {target} for writing (is `turnledger serve` holding it?): {exc}") from None
    try:
        report = prune(con, cutoff, progress=progress)
        if out is not None:
            print("checkpointing", file=out, flush=True)
        con.execute("CHECKPOINT")
    finally:
        con.close()
    print(
        f"pruned {report.runs:,} runs started before {cutoff:%Y-%m-%d %H:%M} UTC: {report.spans_thinned:,} spans "
        f"thinned, {report.contexts_deleted:,} captured contexts and {report.blocks_deleted:,} content blocks deleted"
    )
    if a.no_compact or lake.is_lake_target(str(target)):
        return 0
    path = Path(target)
    if not path.is_file():
        raise InputError(f"{path}: not a ledger file to compact")
    if out is not None:
        print("compacting (copy and swap)", file=out, flush=True)
    before, after = compact(path)
    print(f"file {before / 1e6:,.1f} MB -> {after / 1e6:,.1f} MB")
    return 0
