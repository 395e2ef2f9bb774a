"""Append decoded spans to the ledger: spans, charges, guard events, contexts, runs.

Two steps, so a server can overlap them: ``prepare`` (``ledger.rows``) turns
spans into rows for every table (pure Python work, no connection), and
``write`` (``ledger.write``) inserts any number of prepared batches in one
transaction and rebuilds the runs they touch (``ledger.runs``). ``ingest`` is
both in one call; this module is where callers find all of them.
"""

from __future__ import annotations

from collections.abc import Iterable

import duckdb

from .pricing import PriceBook
from .rows import MAX_ATTRIBUTE_CHARS, PreparedBatch, prepare
from .runs import refresh_pending_runs, refresh_runs
from .spans import SpanRecord
from .write import IngestReport, write

__all__ = [
    "MAX_ATTRIBUTE_CHARS",
    "IngestReport",
    "PreparedBatch",
    "ingest",
    "prepare",
    "refresh_pending_runs",
    "refresh_runs",
    "write",
]


def ingest(
    con: duckdb.DuckDBPyConnection,
    spans: Iterable[SpanRecord],
    prices: PriceBook | None = None,
    *,
    redact_content: bool = True,
) -> IngestReport:
    """Append a batch of spans and everything derived from them, atomically (``prepare`` + ``write``)."""
    return write(con, [prepare(spans, prices, redact_content=redact_content)])
