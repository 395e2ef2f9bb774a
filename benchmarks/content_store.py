"""Captured content on disk and the cost of rebuilding one turn, as the ledger grows.

Two measurements, each printed with its ratio:

* **bytes/span**: the ``benchmarks/agent_workload.py`` spans ingested into a real
  DuckDB file (checkpointed) with content (request payloads, answers, tool
  arguments and results) and without any; what content costs is the difference,
  per span (goal: at most 300 B/span). Two figures: the file's size, and its live
  blocks (the file less its free blocks). A checkpoint rewrites each table's last,
  partly filled row group (122,880 rows) and every index, and frees the old copy,
  which the next checkpoint reuses: below a row group, as here, that is the whole
  table, and the content run's larger log checkpoints once more than the run
  without, so its file carries a free copy the other does not; on a ledger past a
  few row groups the free share is bounded and bytes/span tends to the live figure.
  ``--baseline TREE`` measures the same spans with another checkout's ``ledger``
  too (e.g. a git worktree of the commit before), in the same run.
* **rebuild latency**: the median of many ``load_turn`` calls (request and
  response of one model call) on ledgers of 10k and 100k captured calls, in
  alternating rounds; the goal is 100k within 1.5x of 10k.

Run: .venv/bin/python benchmarks/content_store.py [--spans 40000] [--calls 10000 100000] [--baseline TREE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
if "--ledger-root" in sys.argv:  # the --baseline subprocess: that checkout's packages, before anything imports them
    sys.path.insert(0, sys.argv[sys.argv.index("--ledger-root") + 1])

from agent_workload import workload  # noqa: E402  (a sibling module, not a package)

# What a producer sends as content; "without content" drops every one of them.
_CONTENT_KEYS = ("turnledger.request.body", "gen_ai.output.messages", "gen_ai.tool.call.arguments",
                 "gen_ai.tool.call.result")  # fmt: skip
_BATCH = 2_000


def _ingest_file(path: Path, spans: list[Any]) -> tuple[int, int]:
    """The file's size and its live bytes (the blocks in use) once ``spans`` are ingested and checkpointed."""
    from ledger.ingest import ingest
    from ledger.store import open_ledger

    con = open_ledger(path)
    for i in range(0, len(spans), _BATCH):
        ingest(con, spans[i : i + _BATCH])
    con.execute("CHECKPOINT")
    _, _, block_size, _, used_blocks, *_ = con.execute("PRAGMA database_size").fetchone() or ()
    con.close()
    return path.stat().st_size, int(block_size) * int(used_blocks)


def _stripped(spans: list[Any]) -> list[Any]:
    from dataclasses import replace

    return [replace(s, attributes={k: v for k, v in s.attributes.items() if k not in _CONTENT_KEYS}) for s in spans]


def measure_sizes(n_spans: int) -> dict[str, float]:
    """Bytes per span of the ledger file without content and with it (this process's ``ledger``)."""
    spans, _ = workload(n_spans, content=True)
    with tempfile.TemporaryDirectory() as tmp:
        without = _ingest_file(Path(tmp) / "without.duckdb", _stripped(spans))
        with_content = _ingest_file(Path(tmp) / "with.duckdb", spans)
    n = len(spans)
    out: dict[str, float] = {"spans": n}
    for i, figure in enumerate(("file", "live")):
        out |= {f"{figure} without": without[i] / n, f"{figure} with": with_content[i] / n}
        out[f"{figure} content"] = (with_content[i] - without[i]) / n
    return out


def _sizes_in(tree: Path | None, n_spans: int) -> dict[str, float]:
    """``measure_sizes`` in a process of its own, with ``tree``'s ``ledger`` and virtualenv (None: this checkout's)."""
    python, root = sys.executable, HERE.parent
    if tree is not None:  # its own environment, and its checkout first on the path (before any editable install's)
        python, root = str(tree / ".venv" / "bin" / "python"), tree
    argv = [python, __file__, "--sizes-only", "--spans", str(n_spans), "--ledger-root", str(root)]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"measuring with {tree or 'this checkout'} failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def _captured_ledger(path: Path, calls: int) -> list[tuple[str, str]]:
    """A ledger of ``calls`` captured model calls (the workload's chat spans, with content); its calls' ids."""
    spans, _ = workload(int(calls * 2.3) + 100, content=True)
    chats = [s for s in spans if s.name.startswith("chat")][:calls]
    _ingest_file(path, chats)
    return [(s.trace_id, s.span_id) for s in chats]


def measure_rebuild(sizes: list[int], rounds: int, per_round: int) -> dict[int, list[float]]:
    """Per ledger size: the median ``load_turn`` latency (s) of each round, rounds alternating between sizes."""
    from ledger.content import load_turn
    from ledger.store import open_ledger

    rng = random.Random(11)
    with tempfile.TemporaryDirectory() as tmp:
        ledgers = {}
        for n in sizes:
            path = Path(tmp) / f"{n}.duckdb"
            calls = _captured_ledger(path, n)
            ledgers[n] = (open_ledger(path, read_only=True), calls)  # read from the file, as a reader does
        medians: dict[int, list[float]] = {n: [] for n in sizes}
        for _ in range(rounds):
            for n, (con, calls) in ledgers.items():
                times = []
                for trace_id, span_id in rng.sample(calls, min(per_round, len(calls))):
                    t0 = time.perf_counter()
                    turn = load_turn(con, trace_id, span_id)
                    times.append(time.perf_counter() - t0)
                    assert turn is not None and turn.request is not None
                medians[n].append(statistics.median(times))
        for con, _ in ledgers.values():
            con.close()
    return medians


def _spread(values: list[float], scale: float = 1e3) -> str:
    return f"{statistics.median(values) * scale:.2f} ms (range {min(values) * scale:.2f}–{max(values) * scale:.2f})"


def _print_sizes(sizes: dict[str, dict[str, float]]) -> None:
    n = int(next(iter(sizes.values()))["spans"])
    print(f"\n## bytes/span on disk, {n:,} workload spans (goal: content <= 300)")
    for label, s in sizes.items():
        for figure in ("file", "live"):
            print(
                f"{label:>30} {figure}: without content {s[f'{figure} without']:6.0f}   "
                f"with {s[f'{figure} with']:6.0f}   content {s[f'{figure} content']:6.0f} B/span"
            )
    if len(sizes) == 2:  # this checkout, then the baseline
        ours, base = sizes.values()
        for figure in ("file", "live"):
            ratio = ours[f"{figure} content"] / base[f"{figure} content"]
            print(f"{'content, this / baseline':>30} {figure}: {ratio:.2f}x")


def _arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog="See the module docstring for what is measured."
    )
    ap.add_argument("--spans", type=int, default=40_000, help="workload spans for bytes/span (default 40000)")
    ap.add_argument("--calls", type=int, nargs=2, default=[10_000, 100_000], metavar=("SMALL", "LARGE"),
                    help="captured calls in the two ledgers timed for rebuild (default 10000 100000)")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=5, help="alternating timing rounds (default 5)")
    ap.add_argument("--per-round", type=int, default=200, help="load_turn calls per ledger and round (default 200)")
    ap.add_argument("--baseline", type=Path, metavar="TREE", help="also measure bytes/span with TREE's ledger package")
    ap.add_argument("--skip-rebuild", action="store_true", help="bytes/span only")
    ap.add_argument("--skip-sizes", action="store_true", help="rebuild latency only")
    ap.add_argument("--sizes-only", action="store_true", help=argparse.SUPPRESS)  # the --baseline subprocess
    ap.add_argument("--ledger-root", type=Path, help=argparse.SUPPRESS)  # whose ``ledger`` it imports
    return ap.parse_args()


def main() -> None:
    a = _arguments()
    if a.sizes_only:
        print(json.dumps(measure_sizes(a.spans)))
        return
    print(f"# content store  (load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores)")
    trees: dict[str, Path | None] = {"this checkout": None}
    if a.baseline is not None:
        trees["baseline " + str(a.baseline)] = a.baseline.resolve()
    if not a.skip_sizes:
        _print_sizes({label: _sizes_in(tree, a.spans) for label, tree in trees.items()})
    if a.skip_rebuild:
        return
    small, large = a.calls
    medians = measure_rebuild([small, large], a.rounds, a.per_round)
    print(
        f"\n## rebuild one turn (load_turn: request + response), median of {a.per_round} calls per round, {a.rounds} rounds"
    )
    for n, values in medians.items():
        print(f"{n:>12,} captured calls: {_spread(values)}")
    ratios = [b / s for s, b in zip(medians[small], medians[large], strict=True)]
    print(
        f"{large:,} / {small:,}: {statistics.median(ratios):.2f}x (range {min(ratios):.2f}–{max(ratios):.2f}; goal <= 1.5)"
    )


if __name__ == "__main__":
    main()
