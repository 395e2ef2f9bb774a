"""Tagged review items as replayable cases (``turnledger cases export``): one JSON document per run.

A case is a run a reviewer tagged (``ledger.quality.review``) with **the failing turn**'s exact request and
response, as captured and redacted at ingest (``ledger.content.load_turn``). The failing turn is
the model call a failed judgment was attached to (the judged span is a model call); otherwise the
run's last model call with captured content (the last one before the run ended, errored or halted).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import duckdb

from ..content import load_turn
from .review import items

__all__ = ["CASE_FIELDS", "cases", "failing_turn"]

CASE_FIELDS = (
    "trace_id", "span_id", "turn", "request", "response", "tags", "note", "reason", "outcome", "judgments",
)  # fmt: skip

# The run's model calls, the judged ones first (earliest failed judgment), then newest first.
_CANDIDATES = """
SELECT c.span_id, min(e.time) AS judged_at, any_value(c.start_time) AS started
FROM charges c LEFT JOIN evaluations e ON e.trace_id = c.trace_id AND e.span_id = c.span_id AND e.failed
WHERE c.trace_id = ?
GROUP BY c.span_id
ORDER BY judged_at NULLS LAST, started DESC, c.span_id
"""
_JUDGMENTS = """
SELECT kind, name, score, label, explanation, source, span_id FROM evaluations
WHERE trace_id = ? AND failed ORDER BY time, eval_id
"""


def failing_turn(con: duckdb.DuckDBPyConnection, trace_id: str) -> tuple[str, str, Any] | None:
    """(span id, which rule chose it: ``judged`` or ``last_call``, the captured turn), or None."""
    for span_id, judged_at, _ in con.execute(_CANDIDATES, [trace_id]).fetchall():
        captured = load_turn(con, trace_id, span_id)
        if captured is not None and captured.request is not None:
            return span_id, "judged" if judged_at is not None else "last_call", captured
    return None


def cases(con: duckdb.DuckDBPyConnection, tag: str | None) -> Iterator[dict[str, Any]]:
    """Every review item tagged ``tag`` (any tag when None), open or closed, as a case."""
    for it in items(con, tag=tag, limit=100_000):
        if not it["tags"]:
            continue
        trace = it["trace_id"]
        found = failing_turn(con, trace)
        cur = con.execute(_JUDGMENTS, [trace])
        names = [d[0] for d in cur.description]
        yield {
            "trace_id": trace,
            "span_id": found[0] if found else None,
            "turn": found[1] if found else None,
            "request": found[2].request if found else None,
            "response": found[2].response if found else None,
            "tags": it["tags"],
            "note": it["note"],
            "reason": it["reason"],
            "outcome": {
                key: it[key]
                for key in ("stop_cause", "status_code", "error_type", "agent_name", "agent_version", "prompt_version")
            },
            "judgments": [dict(zip(names, row, strict=True)) for row in cur.fetchall()],
        }
