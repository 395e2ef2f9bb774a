"""What rebuilding ``runs`` costs as the ledger grows: every span read vs time-bounded.

Every commit (or, under load, every few) rebuilds the ``runs`` rows of the
traces it touched. Reading all of ``spans`` and ``charges`` to find those
traces' rows costs time in proportion to the ledger; bounding the read by the
earliest start among the touched runs and the new spans lets DuckDB skip older
row groups by their min/max, so the cost follows the recent data.

The ledger grows in chunks of realistic agent spans (``agent_workload``), each
chunk two hours after the previous one, as a live ledger does.
After each chunk: the rebuild of the runs touched by its last 2,000 spans,
both ways, best of 3, rolled back.

Usage: ``python benchmarks/runs_rebuild.py [--chunks N] [--chunk-spans N]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ledger.ingest as li
import ledger.runs as lruns
from benchmarks._common import footer, header
from benchmarks.agent_workload import workload
from ledger.rows import default_prices
from ledger.store import open_ledger

HOUR_NS = 3600 * 10**9


def _rebuild_ms(con, traces: list[str], since_ns: int | None) -> float:
    times = []
    for _ in range(3):
        t = time.perf_counter()
        con.execute("BEGIN TRANSACTION")
        lruns.refresh_runs(con, traces, since_ns=since_ns)
        con.execute("ROLLBACK")
        times.append(time.perf_counter() - t)
    return min(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=5, help="chunks the ledger grows by (default 5)")
    ap.add_argument("--chunk-spans", type=int, default=100_000, help="spans per chunk (default 100000)")
    a = ap.parse_args()
    header("runs rebuild vs ledger size")
    print(f"{'spans in ledger':>16} {'runs rebuilt':>13} {'all spans read':>15} {'time-bounded':>13} {'ratio':>6}")
    prices = default_prices()
    with tempfile.TemporaryDirectory() as tmp:
        con = open_ledger(Path(tmp) / "ledger.duckdb")
        total = 0
        for k in range(a.chunks):
            spans, _ = workload(a.chunk_spans, False, seed=100 + k)
            for s in spans:
                s.start_ns += 2 * k * HOUR_NS
                s.end_ns += 2 * k * HOUR_NS
            for i in range(0, len(spans), 25_000):
                li.ingest(con, spans[i : i + 25_000], prices)
            total += len(spans)
            recent = spans[-2_000:]
            traces = sorted({s.trace_id for s in recent})
            full = _rebuild_ms(con, traces, None)
            bounded = _rebuild_ms(con, traces, min(s.start_ns for s in recent))
            print(f"{total:>16,} {len(traces):>13} {full:>12.0f} ms {bounded:>10.0f} ms {full / bounded:>5.1f}x")
        con.close()


if __name__ == "__main__":
    main()
    footer()
