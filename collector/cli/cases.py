"""``turnledger cases export --tag T --out cases.jsonl``: tagged runs as cases an eval harness replays.

One JSON line per tagged review item (``ledger.quality.cases``): its trace id, the failing turn's exact
(redacted) request and response, the tags, the note, the run's outcome and its failed judgments.
The failing turn is the model call a failed judgment was attached to, else the run's last model
call with captured content.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .args import add_source

__all__ = ["add_cases", "cmd_cases"]


def add_cases(p: argparse.ArgumentParser) -> None:
    """Export tagged review items as replayable cases (JSON lines)."""
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    ex = sub.add_parser("export", help="one JSON line per tagged run: the failing turn's request and response")
    ex.add_argument("--tag", default=None, help="only runs tagged so (default: every tagged run)")
    ex.add_argument("--out", type=Path, default=None, help="write here (default: stdout)")
    add_source(ex)


def cmd_cases(a: argparse.Namespace) -> int:
    import orjson

    from ledger.quality.cases import cases
    from ledger.sources import source_spec

    spec = source_spec(a.db, a.server)
    print(f"turnledger: reading {spec.describe()}", file=sys.stderr)
    if spec.kind == "server":
        from collector.client import ServerClient

        found = ServerClient(spec.location, spec.token).cases(a.tag)
    else:
        from ledger.store import open_ledger

        con = open_ledger(spec.location, read_only=True)
        try:
            found = list(cases(con, a.tag))
        finally:
            con.close()
    text = b"".join(orjson.dumps(case, default=str) + b"\n" for case in found)
    if a.out is None:
        sys.stdout.buffer.write(text)
    else:
        a.out.write_bytes(text)
        print(f"turnledger cases: {len(found)} case(s) -> {a.out}", file=sys.stderr)
    return 0
