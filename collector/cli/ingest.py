"""``turnledger ingest``: load OTLP trace files into the ledger."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ledger.errors import MalformedInput, TurnledgerError
from ledger.settings import db_path, prices_file

from .args import add_db

__all__ = ["OTLP_SUFFIXES", "add_ingest", "cmd_ingest", "expand_paths"]

OTLP_SUFFIXES = {".json", ".jsonl", ".pb", ".bin", ".protobuf", ".gz"}


def expand_paths(paths: Sequence[Path]) -> list[Path]:
    """Files as given, and OTLP files inside folders (sorted, recursive)."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            out += sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in OTLP_SUFFIXES)
        elif path.exists():
            out.append(path)
        else:
            raise TurnledgerError(f"{path}: no such file or folder")
    return out


def add_ingest(p: argparse.ArgumentParser) -> None:
    """Load OTLP trace files into the ledger."""
    p.add_argument(
        "paths", nargs="+", type=Path, metavar="PATH", help="OTLP/JSON or OTLP protobuf files, or folders of them"
    )
    p.add_argument("--prices", type=Path, default=None, help="price override TOML (default: $TURNLEDGER_PRICES)")
    add_db(p)


def cmd_ingest(a: argparse.Namespace) -> int:
    from collector.otlp import read_file
    from ledger.ingest import ingest
    from ledger.pricing import PriceBook
    from ledger.spans import SpanRecord
    from ledger.store import open_ledger

    files = expand_paths(a.paths)
    if not files:
        raise TurnledgerError(f"no OTLP files (*.json, *.jsonl, *.pb) under {', '.join(map(str, a.paths))}")
    # Decode everything before writing anything: one malformed file aborts the
    # whole command with nothing half-written.
    decoded: list[tuple[Path, list[SpanRecord]]] = []
    problems = []
    for path in files:
        try:
            decoded.append((path, read_file(path)))
        except MalformedInput as exc:
            problems.append(str(exc))
    if problems:
        raise MalformedInput("nothing was ingested; fix or remove these files:\n  " + "\n  ".join(problems))
    prices = PriceBook.default(a.prices or prices_file())
    con = open_ledger(a.db)
    totals = {"spans": 0, "charges": 0, "duplicates": 0, "rejected": 0}
    unpriced: set[str] = set()
    for n, (path, spans) in enumerate(decoded, 1):
        r = ingest(con, spans, prices)
        totals["spans"] += r.spans_written
        totals["charges"] += r.charges_written
        totals["duplicates"] += r.duplicates
        totals["rejected"] += len(r.rejected)
        unpriced |= r.unpriced_models
        print(f"[{n}/{len(decoded)}] {path}: {r.spans_written} spans, {r.charges_written} charges"
              + (f", {r.duplicates} already in the ledger" if r.duplicates else "")
              + (f", {len(r.rejected)} rejected" if r.rejected else ""), file=sys.stderr)  # fmt: skip
        for reason in r.rejected[:5]:
            print(f"    rejected {reason}", file=sys.stderr)
    print(
        f"ingested {totals['spans']} spans and {totals['charges']} charges into {a.db or db_path()}"
        + (f" ({totals['duplicates']} duplicate spans skipped)" if totals["duplicates"] else "")
        + (f" ({totals['rejected']} invalid spans rejected)" if totals["rejected"] else "")
    )
    if unpriced:
        print(f"warning: unpriced models (charged $0 until priced): {', '.join(sorted(unpriced))}", file=sys.stderr)
    return 0
