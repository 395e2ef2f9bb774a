"""Insert prepared batches (``ledger.rows``) into the ledger, atomically and idempotently.

``write`` inserts any number of prepared batches in one transaction (DuckDB
work, which runs outside the GIL) and rebuilds the runs they touch
(``ledger.runs``). Either everything from one ``write`` lands or nothing
does. Every table is keyed by (trace_id, span_id[, seq]) (content by hash, a
run's own blocks by trace and hash), so a batch delivered twice (OTLP exporters
retry) changes nothing the second time: a plain INSERT is tried first, and a key
conflict replays the transaction with INSERT OR IGNORE (which costs about 10 µs
more per span, so only redeliveries pay it). A DuckLake has no keys: there every row goes in by an
anti-join on its table's key (``ledger.lake.insert_new``), first time and every time, with
the lake's write lock held (``ledger.lake.lock``), so that it holds across collectors.

A billed call reported by several spans (the anthropic SDK's own and an
instrumentation's) is charged once: ``ledger.dedup`` keeps the charge rows of
the charged copies only, in the same transaction, and takes back a stored
charge when a better copy arrives later (both traces' runs are rebuilt). The
ledger's one writer passes its ``dedup.CopyIndex``, so that a commit sharing
nothing with the stored copies does not query them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from . import dedup, lake, runs
from .lake import lock as lake_lock
from .quality import review
from .rows import PreparedBatch
from .tables import WRITTEN, table

__all__ = ["IngestReport", "write"]


@dataclass
class _Written:
    rows: dict[str, int] = field(default_factory=dict)  # inserted, per table
    uncharged: dict[str, int] = field(default_factory=dict)  # trace -> earliest start of a charge taken back


@dataclass
class IngestReport:
    received: int = 0
    spans_written: int = 0
    charges_written: int = 0
    judgments_written: int = 0  # feedback and evaluations (``evaluations`` rows): rules on them are measured anew
    points_written: int = 0  # producers' metric points (``metric_points`` rows)
    rejected: list[str] = field(default_factory=list)  # "trace/span: reason"
    unpriced_models: set[str] = field(default_factory=set)
    traces: set[str] = field(default_factory=set)

    @property
    def duplicates(self) -> int:
        """Spans or points received again (stored already), not counting what was rejected."""
        return self.received - len(self.rejected) - self.spans_written - self.points_written


# The ledger's shared blocks (system prompts, tool lists) repeat between spans and batches by
# design; rows of the other keyed tables repeat only when a batch is redelivered.
_SHARED_ROWS = frozenset({"content_blocks"})
# Tables without a primary key (an index costs every insert), one row per span: a batch
# whose spans are all new holds none stored; a replay inserts only the missing ones.
_UNKEYED = frozenset({"call_copies", "contexts"})
_NOT_STORED = "WHERE NOT EXISTS (SELECT 1 FROM {name} s WHERE s.trace_id = b.trace_id AND s.span_id = b.span_id)"
# A run's blocks repeat across its batches by design (each turn re-sends its history): only the
# ones its stored rows lack go in, those rows found through the trace index (a NOT EXISTS over the
# whole table would read every run's keys at every commit).
_NEW_RUN_BLOCKS = """
INSERT INTO run_blocks ({cols}) SELECT {cols} FROM (SELECT DISTINCT ON (trace_id, hash) * FROM _batch) b
WHERE NOT EXISTS (SELECT 1 FROM (SELECT trace_id, hash FROM run_blocks WHERE trace_id IN (SELECT unnest($traces))) s
                  WHERE s.trace_id = b.trace_id AND s.hash = b.hash)
"""


def _insert(con: duckdb.DuckDBPyConnection, name: str, data: pa.Table, *, ignore_existing: bool = False) -> int:
    # The Arrow table is read through DuckDB's replacement scan of the local name ``_batch``:
    # registering it instead adds and drops a view in the transaction's catalog, a fixed
    # cost per table and commit that made every insert ~20% dearer.
    _batch = data  # the SQL below reads this local by its name
    cols = ", ".join(f'"{n}"' for n in data.column_names)
    if lake.is_lake(con):
        row = con.execute(lake.insert_new(name, cols, "_batch")).fetchone()
    elif name == "run_blocks":
        traces = pc.unique(data["trace_id"]).to_pylist()
        row = con.execute(_NEW_RUN_BLOCKS.format(cols=cols), {"traces": traces}).fetchone()
    elif name in _UNKEYED:
        source = "_batch"
        if ignore_existing:  # its spans' keys guard it: only a replay can hold copies already stored
            source = f"(SELECT DISTINCT ON (trace_id, span_id) * FROM _batch b {_NOT_STORED.format(name=name)})"
        row = con.execute(f"INSERT INTO {name} ({cols}) SELECT {cols} FROM {source}").fetchone()
    else:
        verb = "INSERT OR IGNORE" if ignore_existing or name in _SHARED_ROWS else "INSERT"
        row = con.execute(f"{verb} INTO {name} ({cols}) SELECT {cols} FROM _batch").fetchone()
    return int(row[0]) if row else 0


def write(
    con: duckdb.DuckDBPyConnection,
    batches: Sequence[PreparedBatch],
    *,
    defer_runs: bool = False,
    copy_index: dedup.CopyIndex | None = None,
) -> IngestReport:
    """Insert prepared batches in ONE transaction (one commit however many there are).

    The touched traces' ``runs`` rows are rebuilt in the same transaction, with
    any left pending before. ``defer_runs`` leaves them pending instead (in
    ``runs_pending``, committed with the spans): a server under load rebuilds
    the runs of many commits at once. ``copy_index``: the single writer's index
    of stored copies (``ledger.dedup.CopyIndex``), kept up to date here.
    """
    report = IngestReport(
        received=sum(b.received for b in batches),
        rejected=[r for b in batches for r in b.rejected],
        unpriced_models=set().union(*(b.unpriced_models for b in batches)),
        traces=set().union(*(b.first_starts for b in batches)),
    )
    if not report.traces and not any(b.rows.get("metric_points") or "metric_points" in b.tables for b in batches):
        return report  # nothing to write (metric points belong to no trace: ledger.metrics)
    tables = {name: _concat(name, batches) for name in WRITTEN}
    firsts = runs.earliest(b.first_starts for b in batches)
    try:  # on a lake, one collector at a time (ledger.lake.lock): what makes the anti-joins exact there
        written = lake_lock.retrying_conflicts(
            con, lambda: _write_tables(con, tables, firsts, defer_runs, copy_index, ignore_existing=False)
        )
    except duckdb.ConstraintException:  # a redelivered span: replay, skipping rows already stored
        written = _write_tables(con, tables, firsts, defer_runs, copy_index, ignore_existing=True)
    report.spans_written = written.rows.get("spans", 0)
    report.charges_written = written.rows.get("charges", 0)
    report.judgments_written = written.rows.get("evaluations", 0)
    report.points_written = written.rows.get("metric_points", 0)
    report.traces |= written.uncharged.keys()
    return report


def _concat(name: str, batches: Sequence[PreparedBatch]) -> pa.Table | None:
    parts = [t for b in batches if (t := b.tables.get(name)) is not None and t.num_rows]
    rows = [r for b in batches for r in b.rows.get(name, ())]
    if rows:
        parts.append(table(name).to_arrow(rows))
    if not parts:
        return None
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def _write_tables(
    con: duckdb.DuckDBPyConnection,
    tables: dict[str, pa.Table | None],
    firsts: dict[str, int],
    defer_runs: bool,
    copy_index: dedup.CopyIndex | None,
    *,
    ignore_existing: bool,
) -> _Written:
    """One transaction: rows inserted per table, and the touched runs rebuilt or left pending."""
    written = _Written()
    con.execute("BEGIN TRANSACTION")
    try:
        tables = dict(tables)
        copies, charges = tables.get("call_copies"), tables.get("charges")
        if copies is not None and charges is not None:  # one charge per billed call, decided before either goes in
            charged = dedup.charge_once(con, copies, charges, copy_index)
            tables["call_copies"], tables["charges"], written.uncharged = (
                charged.copies,
                charged.charges,
                charged.uncharged,
            )
        for name, data in tables.items():
            if data is not None:
                written.rows[name] = _insert(con, name, data, ignore_existing=ignore_existing)
        if written.rows.get("spans") or written.uncharged:
            touched = runs.earliest((firsts, written.uncharged))
            if defer_runs:
                runs.defer(con, touched)
            else:
                runs.refresh_with_pending(con, touched)
        if written.rows.get("spans") or written.rows.get("evaluations"):  # runs that need a look are queued
            review.enqueue(con, tables.get("spans"), tables.get("evaluations"))
        con.execute("COMMIT")
    except Exception:
        # A COMMIT that failed (a full disk) has ended the transaction, and a lake's ROLLBACK fails
        # with its catalog gone: the error to raise is the first one, which says what the store did
        # (``ledger.faults`` decides by it), not "cannot rollback - no transaction is active".
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise
    return written
