"""Captured-context storage: bytes on disk and rebuild time, against full histories.

Builds N interleaved runs of T turns (each turn re-sends the whole history, as
the API requires), ingests them into a real DuckDB file, and prints:
  * the DuckDB file size vs the same payloads stored whole (a baseline table
    with one zstd-compressed JSON document per call, measured in the same run);
  * the time to rebuild one call's exact payload (median over calls).

Run: .venv/bin/python benchmarks/context_store.py [--runs 50 --turns 40]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import footer, header
from collector.demo.samples import SYSTEM, TOOLS, Trace
from ledger.content import load_context
from ledger.ingest import ingest
from ledger.store import open_ledger


def run_spans(key: str, turns: int):
    t = Trace(key)
    messages = [{"role": "user", "content": f"Investigate incident {key} and summarise the root cause."}]
    for i in range(turns):
        payload = {
            "model": "claude-opus-5",
            "max_tokens": 4096,
            "system": SYSTEM,
            "tools": TOOLS,
            "messages": [dict(m) for m in messages],
        }
        t.chat("claude-opus-5", (50, 200, 1000 + 300 * i, 120), payload=payload)
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": f"toolu_{i}",
                        "name": "search_docs",
                        "input": {"q": f"{key} log page {i}"},
                    }
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"toolu_{i}",
                        "content": f"{key} page {i}: "
                        + " ".join(f"line{j} status=ok latency={j * 7}ms" for j in range(40)),
                    }
                ],
            }
        )
    return t.finish("completed")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--turns", type=int, default=40)
    a = ap.parse_args()
    header(f"context store: {a.runs} runs of {a.turns} turns")
    tmp = Path(tempfile.mkdtemp())
    runs = [run_spans(f"run{r}", a.turns) for r in range(a.runs)]
    # Interleave runs' spans, as concurrent runs arrive at a collector.
    batches = [[s for run in runs for s in run[i :: a.turns + 1]] for i in range(a.turns + 1)]
    con = open_ledger(tmp / "store.duckdb")
    t0 = time.perf_counter()
    for b in batches:
        ingest(con, b)
    ingest_s = time.perf_counter() - t0
    con.execute("CHECKPOINT")
    calls = con.execute("SELECT trace_id, span_id FROM contexts").fetchall()
    timings = []
    for trace_id, span_id in calls[:: max(1, len(calls) // 200)]:
        t1 = time.perf_counter()
        load_context(con, trace_id, span_id)
        timings.append(time.perf_counter() - t1)
    con.close()
    # The content tables alone: a copy of the file without the other tables, measured by its live
    # blocks (a copy keeps each column's compression and the tables' keys; a dropped table's blocks
    # are free, not gone, so the file's size would still count them).
    shutil.copy(tmp / "store.duckdb", tmp / "content_only.duckdb")
    only = open_ledger(tmp / "content_only.duckdb")
    for (table,) in only.execute("SELECT table_name FROM duckdb_tables()").fetchall():
        if table not in ("content_blocks", "run_blocks", "contexts"):
            only.execute(f"DROP TABLE {table}")
    only.execute("CHECKPOINT")
    _, _, block_size, _, used_blocks, *_ = only.execute("PRAGMA database_size").fetchone() or ()
    only.close()
    ours = int(block_size) * int(used_blocks)

    # Baseline in the same run: every payload stored whole, zstd-compressed column.
    base = duckdb.connect(str(tmp / "whole.duckdb"))
    base.execute("CREATE TABLE ctx (trace_id VARCHAR, span_id VARCHAR, body VARCHAR USING COMPRESSION zstd)")
    # Same arrival order as the ledger got (interleaved runs).
    rows = [
        (s.trace_id, s.span_id, s.attributes["turnledger.request.body"])
        for b in batches
        for s in b
        if "turnledger.request.body" in s.attributes
    ]
    naive = sum(len(r[2].encode()) for r in rows)  # the payloads as sent, in JSON bytes
    base.execute(
        "INSERT INTO ctx SELECT * FROM (SELECT unnest(?) AS t, unnest(?) AS s, unnest(?) AS b)",
        [[r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]],
    )
    base.execute("CHECKPOINT")
    base.close()

    ledger_file = os.path.getsize(tmp / "store.duckdb")
    whole = os.path.getsize(tmp / "whole.duckdb")
    print(f"{a.runs} interleaved runs x {a.turns} turns = {len(calls)} captured calls")
    print(f"payloads as sent (sum of JSON bytes):    {naive / 1e6:8.1f} MB")
    print(f"baseline: whole payloads, zstd column:  {whole / 1e6:8.1f} MB  (file)")
    print(f"turnledger content tables:               {ours / 1e6:8.1f} MB  (live) = {ours / whole:.2f}x the baseline")
    print(f"whole ledger file (spans, charges, runs, indexes, content): {ledger_file / 1e6:.1f} MB")
    print(f"ingest incl. contexts:                   {len(calls) / ingest_s:8.0f} calls/s")
    print(
        f"rebuild one call's payload:              {statistics.median(timings) * 1e3:8.2f} ms median, {max(timings) * 1e3:.2f} ms max"
    )


if __name__ == "__main__":
    main()
    footer()
