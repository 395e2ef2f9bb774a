"""Dropping span detail and captured content while every charge and run stays.

"Detail" is what a run's spans carry beyond their skeleton: attribute JSON,
events and links of every span but the root, the content references, and the
captured content itself (``contexts`` with their message lists, the run's own
blocks, the shared blocks no run references any more). What stays of each span
(ids, name, times, status, operation, tenant, resource, ``tool``,
``soft_failure``) and the root span whole is what ``ledger.runs`` rebuilds a run
from and what the Health figures read, so a late span or a rebuild gives the
same run row, and charges are never touched: the money is the same to the cent
after any drop.

Used by sampling (``ledger.retention.sampling``: runs sampled out after their grace period)
and by ``turnledger prune --older-than`` (runs started before the cutoff).
DuckDB does not shrink a file on UPDATE or DELETE (freed blocks are reused by
later writes), so :func:`compact` rewrites the file (copy and swap) to give the
space back.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import duckdb

from ..store import NEW_FILES

__all__ = ["DropReport", "collect_unreferenced_blocks", "compact", "drop_detail", "prune", "traces_before"]

_BATCH = 5_000  # traces per statement: bounded parameter lists, steady progress output
_IDS = "(SELECT unnest(?::VARCHAR[]))"
# Every shared block still referenced: a run's other blocks go with its detail (``run_blocks``).
_REFERENCED = "SELECT system_block AS hash FROM contexts UNION SELECT tools_block FROM contexts"


@dataclass
class DropReport:
    runs: int = 0
    spans_thinned: int = 0
    contexts_deleted: int = 0
    blocks_deleted: int = 0


def _count(con: duckdb.DuckDBPyConnection, sql: str, params: list[object]) -> int:
    row = con.execute(sql, params).fetchone()
    return int(row[0]) if row else 0


def drop_detail(con: duckdb.DuckDBPyConnection, trace_ids: Sequence[str], *, collect_blocks: bool = True) -> DropReport:
    """Thin these runs' spans and delete their captured content, in the caller's transaction."""
    report = DropReport(runs=len(trace_ids))
    ids = list(trace_ids)
    if not ids:
        return report
    report.spans_thinned = _count(
        con,
        f"""UPDATE spans SET attributes = CASE WHEN parent_span_id = '' THEN attributes ELSE '{{}}' END,
               events = CASE WHEN parent_span_id = '' THEN events ELSE '[]' END,
               links = CASE WHEN parent_span_id = '' THEN links ELSE '[]' END, content_refs = NULL
        WHERE trace_id IN {_IDS} AND (content_refs IS NOT NULL OR (parent_span_id <> '' AND (
            attributes::VARCHAR <> '{{}}' OR events::VARCHAR <> '[]' OR links::VARCHAR <> '[]')))""",
        [ids],
    )
    report.contexts_deleted = _count(con, f"DELETE FROM contexts WHERE trace_id IN {_IDS}", [ids])
    report.blocks_deleted = _count(con, f"DELETE FROM run_blocks WHERE trace_id IN {_IDS}", [ids])
    if collect_blocks:
        report.blocks_deleted += collect_unreferenced_blocks(con)
    return report


def collect_unreferenced_blocks(con: duckdb.DuckDBPyConnection) -> int:
    """Delete the shared content blocks (system prompts, tool lists) no captured call references any more."""
    return _count(
        con,
        f"DELETE FROM content_blocks b WHERE NOT EXISTS (SELECT 1 FROM ({_REFERENCED}) r WHERE r.hash = b.hash)",
        [],
    )


def traces_before(con: duckdb.DuckDBPyConnection, cutoff: datetime) -> list[str]:
    """Runs started before ``cutoff`` (naive UTC), oldest first (dropping twice changes nothing), then the
    traces before it that are no run (only copies charged elsewhere, or bookkeeping: ``ledger.runs``)."""
    rows = con.execute(
        """SELECT trace_id FROM (
    SELECT trace_id, started_at, 0 AS apart FROM runs WHERE started_at < $cutoff
    UNION ALL
    SELECT trace_id, min(start_time), 1 FROM spans WHERE start_time < $cutoff
        AND trace_id NOT IN (SELECT trace_id FROM runs) GROUP BY trace_id
) ORDER BY apart, started_at, trace_id""",
        {"cutoff": cutoff},
    )
    return [str(t) for (t,) in rows.fetchall()]


def prune(
    con: duckdb.DuckDBPyConnection, cutoff: datetime, *, progress: Callable[[int, int], None] | None = None
) -> DropReport:
    """Drop the detail of every run started before ``cutoff``, batch by batch (one transaction each)."""
    traces = traces_before(con, cutoff)
    total = DropReport()
    for start in range(0, len(traces), _BATCH):
        batch = traces[start : start + _BATCH]
        con.execute("BEGIN TRANSACTION")
        try:
            done = drop_detail(con, batch, collect_blocks=False)
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
        total.runs += done.runs
        total.spans_thinned += done.spans_thinned
        total.contexts_deleted += done.contexts_deleted
        total.blocks_deleted += done.blocks_deleted
        if progress is not None:
            progress(start + len(batch), len(traces))
    total.blocks_deleted += collect_unreferenced_blocks(con)
    return total


def _literal(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def compact(path: Path) -> tuple[int, int]:
    """Rewrite a closed ledger file without its free blocks (copy, then swap); returns (bytes before, after).

    The copy is written beside the file and renamed over it only once complete, so a
    crash leaves the old file as it was. Nothing may hold the file meanwhile.
    """
    before = path.stat().st_size
    copy = path.with_name(path.name + ".compact")
    for leftover in (copy, Path(f"{copy}.wal")):
        leftover.unlink(missing_ok=True)
    con = duckdb.connect(config=NEW_FILES)  # the copy in the ledger's storage format: zstd bodies stay compressed
    try:
        con.execute(f"ATTACH {_literal(path)} AS src (READ_ONLY)")
        con.execute(f"ATTACH {_literal(copy)} AS dst")
        con.execute("COPY FROM DATABASE src TO dst")
        con.execute("DETACH dst")
        con.execute("DETACH src")
    finally:
        con.close()
    os.replace(copy, path)
    return before, path.stat().st_size
