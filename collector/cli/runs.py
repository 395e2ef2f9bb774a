"""``turnledger runs``: find a run from the command line, as the Run explorer's search does.

The same filters as ``report``, the same query as the dashboard (``ledger.queries.find_runs``);
a run's id from here goes to ``context ID`` and ``diff ID``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from .args import add_filters, add_source, filters_of, reading

__all__ = ["add_runs", "cmd_runs"]


def add_runs(p: argparse.ArgumentParser) -> None:
    """List runs: id, start, agent, tenant, stop cause, turns, tool calls, loop trips, retries and cost."""
    p.add_argument(
        "--sort",
        default="recent",
        metavar="ORDER",
        help="recent (newest first, the default), cost (most expensive first) or turns (longest first)",
    )
    p.add_argument("--id", dest="trace_id", metavar="ID", help="a trace id prefix, or a conversation id")
    p.add_argument(
        "--stop-cause", help="only runs that stopped so: completed, max_steps, loop_detected, error, … or 'in progress'"
    )
    p.add_argument("--min-usd", type=float, metavar="USD", help="only runs that cost at least this")
    p.add_argument("--max-usd", type=float, metavar="USD", help="only runs that cost at most this")
    p.add_argument("--limit", type=int, default=50, help="at most this many runs (default 50)")
    p.add_argument("--json", action="store_true", help="one JSON object per run, in a list (USD as exact strings)")
    add_filters(p)
    add_source(p)


def cmd_runs(a: argparse.Namespace) -> int:
    from ledger import queries as q
    from ledger.errors import InputError

    if a.limit < 1:
        raise InputError(f"--limit {a.limit}: give 1 or more")
    if a.sort not in q.FIND_ORDER:
        raise InputError(f"--sort {a.sort!r}: choose one of {', '.join(q.FIND_ORDER)}")
    with reading(a) as source:
        rows = source.records(
            q.find_runs,
            filters_of(a, source),
            trace_id=a.trace_id,
            stop_cause=a.stop_cause,
            min_usd=a.min_usd,
            max_usd=a.max_usd,
            order=a.sort,
            limit=a.limit,
        )
    if a.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0
    if not rows:
        print("no run matches these filters (every filter value exists: the combination matches nothing)")
        return 0
    print(_table(rows))
    return 0


_COLUMNS = (  # heading, field, width (negative: left-aligned)
    ("trace id", "trace_id", -32),
    ("started (UTC)", "started_at", -19),
    ("agent", "agent_name", -16),
    ("tenant", "tenant", -12),
    ("stop cause", "stop_cause", -15),
    ("turns", "turns", 5),
    ("tools", "tool_calls", 5),
    ("loops", "loop_trips", 5),
    ("retries", "retry_attempts", 7),
    ("cost", "usd_total", 10),
)


def _cell(field: str, value: Any) -> str:
    if value is None:
        return "-"
    if field == "usd_total":
        return f"${value:,.4f}"
    if field == "started_at":
        return str(value)[:19]
    return str(value)


def _table(rows: list[dict[str, Any]]) -> str:
    def line(cells: list[str]) -> str:
        return "  ".join(f"{c:<{-w}}" if w < 0 else f"{c:>{w}}" for c, (_, _, w) in zip(cells, _COLUMNS, strict=True))

    lines = [line([heading for heading, _, _ in _COLUMNS])]
    lines += [line([_cell(field, row[field]) for _, field, _ in _COLUMNS]) for row in rows]
    return "\n".join(lines)
