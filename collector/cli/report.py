"""``turnledger report`` and ``turnledger context``: read the ledger from the command line."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ledger.errors import ContextNotCaptured, UnknownRun

from .args import add_db, add_filters, filters_of

__all__ = ["add_context", "add_report", "cmd_context", "cmd_report", "resolve_trace"]


def add_report(p: argparse.ArgumentParser) -> None:
    """Cost, cache, guard and long-tail figures."""
    p.add_argument(
        "--json", action="store_true", help="machine-readable output (schema in README: 'Report JSON schema')"
    )
    p.add_argument("--top", type=int, default=10, help="rows in the most-expensive-runs table (default 10)")
    add_filters(p)
    add_db(p)


def cmd_report(a: argparse.Namespace) -> int:
    from ledger.report import build_report, format_report
    from ledger.store import open_ledger

    con = open_ledger(a.db, read_only=True)
    report = build_report(con, filters_of(a), top=a.top)
    print(json.dumps(report, indent=2) if a.json else format_report(report))
    return 0


# --- context -----------------------------------------------------------------------------
def add_context(p: argparse.ArgumentParser) -> None:
    """Print the exact request payload of a run's turn."""
    p.add_argument("trace_id", metavar="TRACE_ID", help="the run's trace id (a unique prefix of 8+ characters works)")
    p.add_argument("--turn", type=int, default=None, help="model call number, 1-based (default: list the turns)")
    add_db(p)


def resolve_trace(con: Any, prefix: str) -> str:
    prefix = prefix.strip().lower()
    rows = con.execute("SELECT trace_id FROM runs WHERE starts_with(trace_id, ?) LIMIT 2", [prefix]).fetchall()
    if len(prefix) < 8 and not (rows and rows[0][0] == prefix):
        raise UnknownRun(f"trace id {prefix!r} is too short: give at least 8 characters")
    if not rows:
        raise UnknownRun(f"no run with trace id {prefix!r} in the ledger (see `turnledger report` for ids)")
    if len(rows) > 1:
        raise UnknownRun(f"trace id prefix {prefix!r} matches several runs: give more characters")
    return str(rows[0][0])


def cmd_context(a: argparse.Namespace) -> int:
    from ledger import queries as q
    from ledger.content import load_context
    from ledger.store import open_ledger

    con = open_ledger(a.db, read_only=True)
    trace_id = resolve_trace(con, a.trace_id)
    turns = q.run(con, q.run_turns(trace_id))
    if turns.empty:
        raise UnknownRun(f"run {trace_id} has no model calls")
    if a.turn is None:
        for row in turns.itertuples():
            print(f"turn {row.turn}: {row.model} ({row.call_site}), {row.attempts} attempt(s), ${row.usd:.4f}")
        return 0
    if not 1 <= a.turn <= len(turns):
        raise UnknownRun(f"run {trace_id} has turns 1..{len(turns)}; --turn {a.turn} is out of range")
    span_id = str(turns.iloc[a.turn - 1]["span_id"])
    payload = load_context(con, trace_id, span_id)
    if payload is None:
        raise ContextNotCaptured(
            f"turn {a.turn} of run {trace_id} was recorded without its request payload: content capture was off. "
            "Turn it on in the producer (TURNLEDGER_CAPTURE=redacted, the default) and run again."
        )
    print(json.dumps(payload, indent=2, ensure_ascii=False))
    return 0
