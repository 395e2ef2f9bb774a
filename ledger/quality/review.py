"""The review queue: runs to look at (``review_items``), and what a reviewer says about them.

A run enters once, with the first reason that applies (``ledger.quality.REVIEW_REASONS``):
automatically in the ingest transaction (``enqueue``, from ``ledger.write``) when its root span says
it errored, hit the step cap, was halted as a loop or stopped by a budget, or a judgment of it failed
(negative feedback, a failed evaluation); or by hand (``add``). A reviewer
tags it from the policy's list with a note (``tag``) and closes it (``close``). The same documents
come back on the file and through a server (``collector/receiver/review_routes.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import duckdb
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from .. import conventions as c
from ..errors import InputError, NotFound
from ..redact import Redactor, default_policy
from ..tables import table
from . import MAX_NAME_CHARS, MAX_TEXT_CHARS, QualityPolicy, policy

__all__ = ["STATUSES", "add", "close", "enqueue", "item", "items", "tag", "unseen_run"]

STATUSES = ("open", "closed")

# A run's outcome, read from its root span as it arrives (what ``ledger.runs`` derives its stop cause
# from): the harness's stop cause, else an ERROR status (any agent's).
_OUTCOME_REASON = f"""CASE json_extract_string(s.attributes, '$."{c.STOP_CAUSE}"')
    WHEN 'max_steps' THEN 'step_cap'
    WHEN 'loop_detected' THEN 'loop_halt'
    WHEN 'budget_exceeded' THEN 'budget_stop'
    WHEN 'error' THEN 'errored'
    ELSE CASE WHEN s.status_code = 'ERROR' THEN 'errored' END
END"""

_ENQUEUE = f"""
INSERT INTO review_items (trace_id, reason, entered_at, status, tags)
SELECT trace_id, reason, now()::TIMESTAMP, 'open', '[]' FROM (
    SELECT trace_id, reason FROM (
        SELECT s.trace_id, {_OUTCOME_REASON} AS reason, 0 AS preference, s.end_time AS seen_at
        FROM _roots s WHERE s.parent_span_id = ''
        UNION ALL
        SELECT e.trace_id, CASE e.kind WHEN 'feedback' THEN 'negative_feedback' ELSE 'failed_evaluation' END,
               1, e.time
        FROM _judged e WHERE e.failed
    ) WHERE reason IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY trace_id ORDER BY preference, seen_at) = 1
) x
WHERE NOT EXISTS (SELECT 1 FROM review_items q WHERE q.trace_id = x.trace_id)
"""


def enqueue(con: duckdb.DuckDBPyConnection, spans: pa.Table | None, judged: pa.Table | None) -> None:
    """Queue (in the caller's transaction) the runs whose root span in ``spans`` says they went wrong and
    the runs of the failed judgments in ``judged`` (a batch's rows); a run already queued keeps its item
    and first reason. Only the batch is read, never the ledger's spans or runs: a commit pays for its rows,
    and one with nothing that could enter the queue (the common case) runs no SQL at all."""
    _roots = _suspect_roots(spans)  # read by name in _ENQUEUE
    _judged = (judged if judged is not None else table("evaluations").to_arrow([])).select(
        ["trace_id", "kind", "failed", "time"]
    )  # read by name in _ENQUEUE
    if _roots.num_rows or pc.any(_judged["failed"]).as_py():
        con.execute(_ENQUEUE)


def _suspect_roots(spans: pa.Table | None) -> pa.Table:
    """The batch's root spans that errored or stopped other than completed (the JSON is compact: orjson)."""
    columns = ["trace_id", "parent_span_id", "attributes", "status_code", "end_time"]
    if spans is None:
        return table("spans").to_arrow([]).select(columns)
    roots = spans.select(columns).filter(pc.equal(spans["parent_span_id"], ""))
    attrs = roots["attributes"]
    stopped = pc.and_(
        pc.match_substring(attrs, f'"{c.STOP_CAUSE}":'),
        pc.invert(pc.match_substring(attrs, f'"{c.STOP_CAUSE}":"completed"')),
    )
    return roots.filter(pc.or_(pc.equal(roots["status_code"], "ERROR"), stopped))


# --- by hand -----------------------------------------------------------------------------------
_ITEMS = """
SELECT q.trace_id, q.reason, q.entered_at, q.status, q.tags, q.note, q.reviewer, q.closed_at,
       r.agent_name, r.agent_version, r.prompt_version, r.tenant, r.stop_cause, r.status_code, r.error_type,
       r.usd_total, r.started_at,
       (SELECT count(*) FROM evaluations e WHERE e.trace_id = q.trace_id AND e.failed) AS failed_judgments
FROM review_items q LEFT JOIN runs r USING (trace_id)
WHERE ($status IS NULL OR q.status = $status)
  AND ($tag IS NULL OR list_contains(CAST(q.tags AS VARCHAR[]), $tag))
  AND ($trace IS NULL OR q.trace_id = $trace)
ORDER BY q.entered_at DESC, q.trace_id
LIMIT $limit
"""


def _doc(row: tuple[Any, ...], names: Sequence[str]) -> dict[str, Any]:
    doc = dict(zip(names, row, strict=True))
    doc["tags"] = orjson.loads(doc["tags"] or "[]")
    for key in ("entered_at", "closed_at", "started_at"):
        if isinstance(doc[key], datetime):
            doc[key] = doc[key].isoformat()
    if doc["usd_total"] is not None:
        doc["usd_total"] = str(doc["usd_total"])
    return doc


def items(
    con: duckdb.DuckDBPyConnection,
    *,
    status: str | None = None,
    tag: str | None = None,
    trace_id: str | None = None,
    limit: int = 200,
) -> list[dict[str, Any]]:
    """Queue items, newest first, with their run's outcome (``status``: open/closed; ``tag``: tagged so)."""
    if status is not None and status not in STATUSES:
        raise InputError(f"status {status!r}: choose {' or '.join(STATUSES)}")
    if not 1 <= limit <= 100_000:
        raise InputError(f"limit {limit}: give 1..100000")
    cur = con.execute(_ITEMS, {"status": status, "tag": tag, "trace": trace_id, "limit": limit})
    names = [d[0] for d in cur.description]
    return [_doc(row, names) for row in cur.fetchall()]


def item(con: duckdb.DuckDBPyConnection, trace_id: str) -> dict[str, Any]:
    found = items(con, trace_id=_trace(trace_id), limit=1)
    if not found:
        raise NotFound(f"run {trace_id!r} is not in the review queue (add it: turnledger review add TRACE)")
    return found[0]


def _trace(trace_id: str) -> str:
    text = trace_id.strip().lower()
    if len(text) != 32 or any(ch not in "0123456789abcdef" for ch in text):
        raise InputError(f"trace_id {trace_id[:80]!r} is not 32 hex digits")
    return text


def unseen_run(con: duckdb.DuckDBPyConnection, trace_id: str) -> str:
    """Why feedback or a review item names no run seen ("" when the run is in the ledger).

    Accepted all the same (feedback may come before the run's spans are exported), but a typo is the
    likelier case: the runs whose id starts as this one does are named."""
    trace = trace_id.strip().lower()
    if con.execute("SELECT 1 FROM runs WHERE trace_id = ?", [trace]).fetchone():
        return ""
    near = [r[0] for r in con.execute(
        "SELECT trace_id FROM runs WHERE starts_with(trace_id, ?) ORDER BY started_at DESC LIMIT 3", [trace[:6]]
    ).fetchall()]  # fmt: skip
    hint = f"did you mean {' or '.join(near)}?" if near else "`turnledger runs` lists the runs"
    return f"no run with trace id {trace} in the ledger yet: kept, it attaches when its spans arrive; {hint}"


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def add(con: duckdb.DuckDBPyConnection, trace_id: str, *, note: str | None = None) -> dict[str, Any]:
    """Queue a run by hand (reason ``manual``); a run already queued keeps its item (reopened if closed)."""
    trace = _trace(trace_id)
    text = _note(note)
    existing = items(con, trace_id=trace, limit=1)
    if existing:
        sql = "UPDATE review_items SET status = 'open', closed_at = NULL, note = coalesce(?, note) WHERE trace_id = ?"
        con.execute(sql, [text, trace])
    else:
        sql = "INSERT INTO review_items (trace_id, reason, entered_at, status, tags, note) VALUES (?, 'manual', ?, 'open', '[]', ?)"
        con.execute(sql, [trace, _now(), text])
    doc = item(con, trace)
    if unseen := unseen_run(con, trace):
        doc["warning"] = unseen
    return doc


def _note(note: str | None, redactor: Redactor | None = None) -> str | None:
    if note is None:
        return None
    if len(note) > MAX_TEXT_CHARS:
        raise InputError(f"note: {len(note)} characters; at most {MAX_TEXT_CHARS}")
    return (redactor or default_policy()).text(note.replace("\0", ""))


def _reviewer(reviewer: str | None) -> str | None:
    if reviewer is not None and len(reviewer) > MAX_NAME_CHARS:
        raise InputError(f"reviewer: at most {MAX_NAME_CHARS} characters")
    return _note(reviewer)


def tag(
    con: duckdb.DuckDBPyConnection,
    trace_id: str,
    tags: Sequence[str],
    *,
    note: str | None = None,
    reviewer: str | None = None,
    chosen: QualityPolicy | None = None,
) -> dict[str, Any]:
    """Add tags (from the policy's list) and a note to a run's item; a run not queued yet is queued by hand."""
    allowed = (chosen or policy()).review_tags
    unknown = [t for t in tags if t not in allowed]
    if unknown or not tags:
        raise InputError(f"tag {unknown[0] if unknown else ''!r}: choose from {', '.join(allowed)}")
    current = items(con, trace_id=_trace(trace_id), limit=1)
    if not current:
        add(con, trace_id)
        current = items(con, trace_id=_trace(trace_id), limit=1)
    merged = list(dict.fromkeys((*current[0]["tags"], *tags)))
    sql = "UPDATE review_items SET tags = ?, note = coalesce(?, note), reviewer = coalesce(?, reviewer) WHERE trace_id = ?"
    con.execute(sql, [orjson.dumps(merged).decode(), _note(note), _reviewer(reviewer), _trace(trace_id)])
    return item(con, trace_id)


def close(con: duckdb.DuckDBPyConnection, trace_id: str, *, reviewer: str | None = None) -> dict[str, Any]:
    """Close a run's item (it stays, with its tags: ``cases export`` reads closed items too)."""
    item(con, trace_id)  # NotFound when it is not queued
    sql = (
        "UPDATE review_items SET status = 'closed', closed_at = ?, reviewer = coalesce(?, reviewer) WHERE trace_id = ?"
    )
    con.execute(sql, [_now(), _reviewer(reviewer), _trace(trace_id)])
    return item(con, trace_id)
