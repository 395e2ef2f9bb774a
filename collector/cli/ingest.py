"""``turnledger ingest``: load OTLP trace files into the ledger."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.errors import MalformedInput, TurnledgerError
from ledger.settings import db_path, prices_file

from .args import add_db

if TYPE_CHECKING:
    from ledger.rows import PreparedBatch

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
    from collector.otlp import read_file_parts
    from ledger.ingest import prepare, write
    from ledger.pricing import PriceBook
    from ledger.spans import SpanRecord
    from ledger.store import open_ledger

    files = expand_paths(a.paths)
    if not files:
        raise TurnledgerError(f"no OTLP files (*.json, *.jsonl, *.pb) under {', '.join(map(str, a.paths))}")
    # Decode everything before writing anything: one malformed file aborts the
    # whole command with nothing half-written.
    decoded: list[tuple[Path, list[tuple[int | None, list[SpanRecord]]]]] = []
    problems = []
    for path in files:
        try:
            decoded.append((path, read_file_parts(path)))
        except MalformedInput as exc:
            problems.append(str(exc))
    if problems:
        raise MalformedInput("nothing was ingested; fix or remove these files:\n  " + "\n  ".join(problems))
    prices = PriceBook.default(a.prices or prices_file())
    con = open_ledger(a.db)
    totals = {"spans": 0, "charges": 0, "duplicates": 0, "rejected": 0, "flagged": 0}
    unpriced: set[str] = set()
    failed: list[str] = []
    for n, (path, parts) in enumerate(decoded, 1):
        # One request (a line of a .jsonl file) at a time: each rejected span is named with its line.
        batches = [(line, prepare(spans, prices)) for line, spans in parts]
        try:
            r = write(con, [b for _, b in batches])
        except Exception as exc:  # the validation at the door should leave none; never a traceback
            failed.append(f"{path}: not ingested, nothing of it was written: {type(exc).__name__}: {exc}")
            print(f"[{n}/{len(decoded)}] {failed[-1]}", file=sys.stderr)
            continue
        flagged = sum(len(b.flagged) for _, b in batches)
        totals["spans"] += r.spans_written
        totals["charges"] += r.charges_written
        totals["duplicates"] += r.duplicates
        totals["rejected"] += len(r.rejected)
        totals["flagged"] += flagged
        unpriced |= r.unpriced_models
        print(f"[{n}/{len(decoded)}] {path}: {r.spans_written} spans, {r.charges_written} charges"
              + (f", {r.duplicates} already in the ledger" if r.duplicates else "")
              + (f", {len(r.rejected)} rejected" if r.rejected else "")
              + (f", {flagged} kept with a problem" if flagged else ""), file=sys.stderr)  # fmt: skip
        _print_notes(batches)
    print(
        f"ingested {totals['spans']} spans and {totals['charges']} charges into {a.db or db_path()}"
        + (f" ({totals['duplicates']} duplicate spans skipped)" if totals["duplicates"] else "")
        + (f" ({totals['rejected']} invalid spans rejected)" if totals["rejected"] else "")
        + (f" ({totals['flagged']} spans kept with a problem, e.g. invalid usage)" if totals["flagged"] else "")
    )
    if unpriced:
        print(f"warning: unpriced models (charged $0 until priced): {', '.join(sorted(unpriced))}", file=sys.stderr)
    if failed:
        print(f"error: {len(failed)} file(s) not ingested (see above)", file=sys.stderr)
        return 1
    return 0


_NOTES_PER_FILE = 20


def _print_notes(batches: list[tuple[int | None, PreparedBatch]]) -> None:
    """Each rejected or flagged span of a file, with its line for JSON-lines files (the first few)."""
    notes = [
        (line, verb, reason)
        for line, b in batches
        for verb, reasons in (("rejected", b.rejected), ("kept, flagged", b.flagged))
        for reason in reasons
    ]
    for line, verb, reason in notes[:_NOTES_PER_FILE]:
        print(f"    {f'line {line}: ' if line is not None else ''}{verb} {reason}", file=sys.stderr)
    if len(notes) > _NOTES_PER_FILE:
        print(f"    ... and {len(notes) - _NOTES_PER_FILE} more", file=sys.stderr)
