"""``turnledger review list|add|tag|close``: the review queue, on the file or through a server.

Runs enter the queue on their own at ingest (errored, step cap, loop halt, budget stop, negative
feedback, a failed evaluation: ``ledger.quality.review``); ``add`` queues one by hand. ``tag`` takes tags
from the fixed list (``ledger.quality.REVIEW_TAGS``, more with ``TURNLEDGER_QUALITY``) and a note.
Like ``turnledger budget``: with ``--server URL`` (or TURNLEDGER_SERVER and no ``--db``) through the
running collector, else on the file (which must be free to write).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ledger.quality import REVIEW_TAGS

from .args import add_source

if TYPE_CHECKING:
    import duckdb

    from collector.client import ServerClient

__all__ = ["add_review", "cmd_review", "print_json", "target"]


@contextmanager
def target(a: argparse.Namespace) -> Iterator[ServerClient | duckdb.DuckDBPyConnection]:
    """The running server ``--server``/TURNLEDGER_SERVER names, else the ledger file opened to write."""
    from ledger.sources import source_spec

    spec = source_spec(a.db, a.server)
    print(f"turnledger: writing {spec.describe(reading=False)}", file=sys.stderr)
    if spec.kind == "server":
        from collector.client import ServerClient

        yield ServerClient(spec.location, spec.token)
        return
    from ledger.store import open_ledger

    con = open_ledger(spec.location)  # a held file: LedgerBusy, saying how to go through the server
    try:
        yield con
    finally:
        con.close()


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str, ensure_ascii=False))


def add_review(p: argparse.ArgumentParser) -> None:
    """List, queue, tag and close runs in the review queue."""
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    ls = sub.add_parser("list", help="queued runs, newest first, with why they entered and their outcome")
    ls.add_argument("--status", choices=("open", "closed"), default=None, help="only open or closed items")
    ls.add_argument("--tag", default=None, help="only items tagged so")
    ls.add_argument("--limit", type=int, default=200, help="newest N (default 200)")
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    add_source(ls, read_only=False)

    ad = sub.add_parser("add", help="queue a run by hand (reason: manual)")
    ad.add_argument("trace", metavar="TRACE_ID")
    ad.add_argument("--note", default=None)
    add_source(ad, read_only=False)

    tg = sub.add_parser(
        "tag",
        help="tag a run (queued by hand if it was not) with a note",
        description=f"Tag a run. Tags: {', '.join(REVIEW_TAGS)} (more with TURNLEDGER_QUALITY's review_tags).",
    )
    tg.add_argument("trace", metavar="TRACE_ID")
    tg.add_argument("tags", nargs="+", metavar="TAG")
    tg.add_argument("--note", default=None)
    tg.add_argument("--reviewer", default=None)
    add_source(tg, read_only=False)

    cl = sub.add_parser("close", help="close a run's item (its tags stay, for cases export)")
    cl.add_argument("trace", metavar="TRACE_ID")
    cl.add_argument("--reviewer", default=None)
    add_source(cl, read_only=False)


def _listing(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "the review queue is empty"
    lines = []
    for r in rows:
        tags = ",".join(r["tags"]) or "-"
        outcome = r["stop_cause"] or r["status_code"] or "?"
        lines.append(f"{r['trace_id']}  {r['status']:<6}  {r['reason']:<17}  {outcome:<16}  {tags}")
    return "\n".join(lines)


def cmd_review(a: argparse.Namespace) -> int:
    from collector.client import ServerClient
    from ledger.quality import review

    with target(a) as where:
        if isinstance(where, ServerClient):
            if a.action == "list":
                doc: Any = where.review_items(status=a.status, tag=a.tag, limit=a.limit)
            elif a.action == "add":
                doc = where.review_add(a.trace, note=a.note)
            elif a.action == "tag":
                doc = where.review_tag(a.trace, a.tags, note=a.note, reviewer=a.reviewer)
            else:
                doc = where.review_close(a.trace, reviewer=a.reviewer)
        elif a.action == "list":
            doc = review.items(where, status=a.status, tag=a.tag, limit=a.limit)
        elif a.action == "add":
            doc = review.add(where, a.trace, note=a.note)
        elif a.action == "tag":
            doc = review.tag(where, a.trace, a.tags, note=a.note, reviewer=a.reviewer)
        else:
            doc = review.close(where, a.trace, reviewer=a.reviewer)
    if a.action == "list" and not a.json:
        print(_listing(doc))
    else:
        print_json(doc)
    if isinstance(doc, dict) and "warning" in doc:
        print(f"warning: {doc['warning']}", file=sys.stderr)
    return 0
