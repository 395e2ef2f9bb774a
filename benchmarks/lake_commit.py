"""What one ingest commit costs on a DuckLake (PostgreSQL catalog + local Parquet) beside the file.

Each round ingests the same small run (``sample_traces/five_turn_run.json``, its trace id made
new each time) into a file ledger and into a lake, alternating, then delivers that batch once
more (an exporter's retry: nothing is written). A PostgreSQL server is started in a temporary
directory for the run (as the tests do: ``tests/lake/postgres.py``) and stopped after.
Prints milliseconds per commit, median and range, and the lake/file ratio.

Usage: ``python benchmarks/lake_commit.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import footer, header
from collector.otlp import read_file
from ledger.ingest import ingest
from ledger.store import open_ledger
from tests.conftest import SAMPLES
from tests.lake.postgres import find_bin_dir, start_server


def _batch(round_no: int, tag: str) -> list:
    """The run under a new trace id (``tag``: one hex digit per ledger, so the two never share one)."""
    spans = read_file(SAMPLES / "five_turn_run.json")
    for span in spans:
        span.trace_id = f"{tag}{round_no:05d}" + span.trace_id[6:]
    return spans


def _check(report, expected: int) -> None:
    if report.spans_written != expected:
        raise SystemExit(f"a new run wrote {report.spans_written} spans, not {expected}: {report.rejected[:3]}")


def _ms(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return (time.perf_counter() - start) * 1000


def _line(name: str, xs: list[float]) -> str:
    return f"{name:28} {statistics.median(xs):8.1f} ms  ({min(xs):.1f}–{max(xs):.1f})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=7, help="alternating rounds (default 7)")
    a = p.parse_args()
    header("lake commit vs file commit")
    expected = len(_batch(0, "f"))
    bin_dir = find_bin_dir()
    if bin_dir is None:
        sys.exit("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    server = start_server(bin_dir)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            lake = open_ledger(f"ducklake:postgres:{server.create_database('bench')}", data_path=f"{tmp}/data")
            file = open_ledger(Path(tmp) / "file.duckdb")
            times: dict[str, list[float]] = {k: [] for k in ("file", "lake", "file again", "lake again")}
            for r in range(a.rounds):
                for name, con, tag in (("file", file, "f"), ("lake", lake, "e")):
                    spans = _batch(r, tag)
                    times[name].append(_ms(lambda con=con, spans=spans: _check(ingest(con, spans), expected)))
                    times[f"{name} again"].append(_ms(lambda con=con, spans=spans: ingest(con, spans)))
            print(f"# one ingest commit of five_turn_run (9 spans), {a.rounds} rounds, median (range)")
            for name, xs in times.items():
                print(_line(name, xs))
            for kind in ("", " again"):
                ratio = statistics.median(times[f"lake{kind}"]) / statistics.median(times[f"file{kind}"])
                print(f"lake/file{kind or ' (new trace)'}: {ratio:.1f}x")
            lake.close()
            file.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
    footer()
