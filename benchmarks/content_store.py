"""Captured content on disk and the cost of rebuilding one turn, as the ledger grows.

Two measurements, each printed with its ratio:

* **bytes/span**: the ``benchmarks/agent_workload.py`` spans ingested into a real
  DuckDB file (checkpointed) with content (request payloads, answers, tool
  arguments and results) and without any; what content costs is the difference,
  per span (goal: at most 300 B/span). Two figures: the file's size, and its live
  blocks (the file less its free blocks). A checkpoint rewrites each table's last,
  partly filled row group (122,880 rows) and every index it changed, and frees the
  old copy: below a row group, as here, that is the whole table, and the content
  run's larger log passes the 64 MiB checkpoint threshold before the final
  checkpoint, so its file carries a free copy the other does not. DuckDB reuses
  free blocks only in part, so the file's share of them falls as the ledger grows
  past a few row groups: at 160k spans content cost 393 B/span on the file and 259
  live (``--spans 160000``), at 40k 786 and 288. The third figure, "compacted",
  is a fresh copy of the file: what ``turnledger prune`` gives back.
  ``--baseline TREE`` measures the same spans with another checkout's ``ledger``
  too (e.g. a git worktree of the commit before), in the same run. Beside them,
  where the bytes go: what content adds to each table, as data and as indexes
  (what a fresh copy of the file loses without the table's keys, then without it).
* **rebuild latency**: the median of many ``load_turn`` calls (request and
  response of one model call) on ledgers of 10k and 100k captured calls; the
  goal is 100k within 1.5x of 10k. With ``--baseline TREE``, TREE's ``ledger``
  is timed too, on ledgers it wrote: each round times each tree in a process of
  its own, trees alternating, and every ratio is taken within one round.

Run: .venv/bin/python benchmarks/content_store.py [--spans 40000] [--calls 10000 100000] [--baseline TREE]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
if "--ledger-root" in sys.argv:  # the --baseline subprocess: that checkout's packages, before anything imports them
    sys.path.insert(0, sys.argv[sys.argv.index("--ledger-root") + 1])

from agent_workload import workload  # noqa: E402  (a sibling module, not a package)

from benchmarks._common import footer, header  # noqa: E402

# What a producer sends as content; "without content" drops every one of them.
_CONTENT_KEYS = ("turnledger.request.body", "gen_ai.output.messages", "gen_ai.tool.call.arguments",
                 "gen_ai.tool.call.result")  # fmt: skip
_BATCH = 2_000
_FIGURES = ("file", "live", "compacted")  # the file as ingest leaves it, its blocks in use, a fresh copy of it


def _live_bytes(con: Any) -> int:
    row = con.execute("PRAGMA database_size").fetchone()
    return int(row[2]) * int(row[4])  # block_size * used_blocks


def _compacted_bytes(path: Path) -> int:
    """The size of a fresh copy of the file (COPY FROM DATABASE): what ``turnledger prune``'s compaction
    (``ledger.retention.compact``) leaves, its free blocks given back."""
    import duckdb

    copy = path.with_name(path.name + ".copy")
    con = duckdb.connect(config={"storage_compatibility_version": "latest"})  # as open_ledger writes a new file
    con.execute(f"ATTACH '{path}' AS src (READ_ONLY)")
    con.execute(f"ATTACH '{copy}' AS dst")
    con.execute("COPY FROM DATABASE src TO dst")
    con.close()
    size = copy.stat().st_size
    copy.unlink()
    return size


def _ingest_file(path: Path, spans: list[Any]) -> tuple[int, int, int]:
    """The file's size, its live bytes (the blocks in use) and its compacted size once ``spans`` are
    ingested and checkpointed."""
    from ledger.ingest import ingest
    from ledger.store import open_ledger

    con = open_ledger(path)
    for i in range(0, len(spans), _BATCH):
        ingest(con, spans[i : i + _BATCH])
    con.execute("CHECKPOINT")
    live = _live_bytes(con)
    con.close()
    return path.stat().st_size, live, _compacted_bytes(path)


# Where the bytes go: the tables content lives in (``message_chain``: the layout before migration 13).
_CONTENT_TABLES = ("spans", "contexts", "content_blocks", "run_blocks", "message_chain")
# A table's keys, cut from its CREATE statement to measure its data alone.
_KEYS = re.compile(r",\s*(?:PRIMARY KEY|UNIQUE)\s*\([^)]*\)|\s+(?:PRIMARY KEY|UNIQUE)\b")


def _copy_bytes(source: Path, tables: dict[str, list[str]]) -> int:
    """Live bytes of a fresh file holding ``tables`` of ``source`` (each: its CREATE, then its indexes).

    Whole files are compared, not tables alone: a checkpoint packs small segments of
    different tables into shared blocks, so tables measured alone add up to more."""
    import duckdb

    with tempfile.TemporaryDirectory() as tmp:
        con = duckdb.connect(str(Path(tmp) / "copy.duckdb"), config={"storage_compatibility_version": "latest"})
        con.execute("SET threads = 1")  # one row group at a time, as ingest writes them (parallel inserts split them)
        con.execute(f"ATTACH '{source}' AS source (READ_ONLY)")
        for name, statements in tables.items():
            for sql in statements:
                con.execute(sql)
            con.execute(f"INSERT INTO {name} SELECT * FROM source.{name}")
        con.execute("DETACH source")
        con.execute("CHECKPOINT")
        live = _live_bytes(con)
        con.close()
    return live


def breakdown(path: Path) -> dict[str, list[int]]:
    """Per content table of the file: [data, indexes] in bytes, what the file loses without its indexes and
    then without the table (each a fresh copy of the file; a DuckDB block is the unit)."""
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    tables = {name: [sql] for name, sql in con.execute("SELECT table_name, sql FROM duckdb_tables()").fetchall()}
    for name, sql in con.execute("SELECT table_name, sql FROM duckdb_indexes() WHERE sql IS NOT NULL").fetchall():
        tables[name].append(sql)
    con.close()
    whole = _copy_bytes(path, tables)
    out = {}
    for name in (t for t in _CONTENT_TABLES if t in tables):
        unindexed = _copy_bytes(path, {**tables, name: [_KEYS.sub("", tables[name][0])]})
        absent = _copy_bytes(path, {t: sql for t, sql in tables.items() if t != name})
        out[name] = [unindexed - absent, whole - unindexed]
    return out


def _stripped(spans: list[Any]) -> list[Any]:
    from dataclasses import replace

    return [replace(s, attributes={k: v for k, v in s.attributes.items() if k not in _CONTENT_KEYS}) for s in spans]


def measure_sizes(n_spans: int) -> dict[str, Any]:
    """Bytes per span of the ledger file without content and with it (this process's ``ledger``), and per table."""
    spans, _ = workload(n_spans, content=True)
    n = len(spans)
    out: dict[str, Any] = {"spans": n}
    with tempfile.TemporaryDirectory() as tmp:
        without_path, with_path = Path(tmp) / "without.duckdb", Path(tmp) / "with.duckdb"
        without = _ingest_file(without_path, _stripped(spans))
        with_content = _ingest_file(with_path, spans)
        tables = {"without": breakdown(without_path), "with": breakdown(with_path)}
    for i, figure in enumerate(_FIGURES):
        out |= {f"{figure} without": without[i] / n, f"{figure} with": with_content[i] / n}
        out[f"{figure} content"] = (with_content[i] - without[i]) / n
    out["tables"] = {  # what content adds to each table, B/span: [data, indexes]
        name: [(b - a) / n for a, b in zip(tables["without"].get(name, [0, 0]), parts, strict=True)]
        for name, parts in tables["with"].items()
    }
    return out


def _in_tree(tree: Path | None, *args: str) -> Any:
    """This script run with ``args`` in a process of its own, with ``tree``'s ``ledger`` and virtualenv
    (None: this checkout's); its last line of output, as JSON."""
    python, root = sys.executable, HERE.parent
    if tree is not None:  # its own environment, and its checkout first on the path (before any editable install's)
        python, root = str(tree / ".venv" / "bin" / "python"), tree
    done = subprocess.run([python, __file__, *args, "--ledger-root", str(root)], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"measuring with {tree or 'this checkout'} failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def _captured_ledger(path: Path, calls: int) -> list[tuple[str, str]]:
    """A ledger of ``calls`` captured model calls (the workload's chat spans, with content); its calls' ids."""
    spans, _ = workload(int(calls * 2.3) + 100, content=True)
    chats = [s for s in spans if s.name.startswith("chat")][:calls]
    _ingest_file(path, chats)
    return [(s.trace_id, s.span_id) for s in chats]


def build_ledgers(folder: Path, sizes: list[int]) -> None:
    """The rebuild ledgers, written by this process's ``ledger``: ``N.duckdb`` and its calls' ids ``N.json``."""
    for n in sizes:
        calls = _captured_ledger(folder / f"{n}.duckdb", n)
        (folder / f"{n}.json").write_text(json.dumps(calls))


def time_rebuild(folder: Path, sizes: list[int], per_round: int, seed: int) -> dict[int, float]:
    """Per ledger of ``folder``: the median ``load_turn`` latency (s) of ``per_round`` calls drawn with ``seed``,
    after as many untimed ones (the process is new: its first reads fill DuckDB's caches)."""
    from ledger.content import load_turn
    from ledger.store import open_ledger

    medians = {}
    for n in sizes:
        calls = [tuple(c) for c in json.loads((folder / f"{n}.json").read_text())]
        con = open_ledger(folder / f"{n}.duckdb", read_only=True)  # read from the file, as a reader does
        rng = random.Random(seed)
        times = []
        for i, (trace_id, span_id) in enumerate(rng.sample(calls, min(2 * per_round, len(calls)))):
            t0 = time.perf_counter()
            turn = load_turn(con, trace_id, span_id)
            if i >= per_round:
                times.append(time.perf_counter() - t0)
            assert turn is not None and turn.request is not None
        con.close()
        medians[n] = statistics.median(times)
    return medians


def measure_rebuild(
    trees: dict[str, Path | None], sizes: list[int], rounds: int, per_round: int
) -> dict[str, dict[int, list[float]]]:
    """Per tree and ledger size: the median rebuild latency (s) of each round, trees alternating within a round."""
    medians: dict[str, dict[int, list[float]]] = {label: {n: [] for n in sizes} for label in trees}
    counts = [str(n) for n in sizes]
    with tempfile.TemporaryDirectory() as tmp:
        folders = {label: Path(tmp) / str(i) for i, label in enumerate(trees)}
        for label, tree in trees.items():
            folders[label].mkdir()
            _in_tree(tree, "--build-ledgers", str(folders[label]), "--calls", *counts)
        for r in range(rounds):
            for label, tree in trees.items():
                args = ("--time-ledgers", str(folders[label]), "--calls", *counts, "--per-round", str(per_round))
                got = _in_tree(tree, *args, "--seed", str(r))
                for n in sizes:
                    medians[label][n].append(got[str(n)])
    return medians


def _spread(values: list[float], scale: float = 1e3) -> str:
    return f"{statistics.median(values) * scale:.2f} ms (range {min(values) * scale:.2f}–{max(values) * scale:.2f})"


def _ratio(over: list[float], under: list[float]) -> str:
    ratios = [a / b for a, b in zip(over, under, strict=True)]
    return f"{statistics.median(ratios):.2f}x (range {min(ratios):.2f}–{max(ratios):.2f})"


def _print_sizes(sizes: dict[str, dict[str, Any]]) -> None:
    n = int(next(iter(sizes.values()))["spans"])
    print(f"\n## bytes/span on disk, {n:,} workload spans (goal: content <= 300)")
    for label, s in sizes.items():
        for figure in _FIGURES:
            print(
                f"{label:>30} {figure}: without content {s[f'{figure} without']:6.0f}   "
                f"with {s[f'{figure} with']:6.0f}   content {s[f'{figure} content']:6.0f} B/span"
            )
        block = 262_144 / n  # a DuckDB block: each figure below is rounded to one
        parts = "   ".join(f"{t} {d:.0f} + index {i:.0f}" for t, (d, i) in s["tables"].items())
        print(
            f"{'':>30} content per table (data + index, each ±{block:.0f}; blocks shared make the parts add up to more): {parts}"
        )
    if len(sizes) == 2:  # this checkout, then the baseline
        ours, base = sizes.values()
        for figure in _FIGURES:
            ratio = ours[f"{figure} content"] / base[f"{figure} content"]
            print(f"{'content, this / baseline':>30} {figure}: {ratio:.2f}x")


def _print_rebuild(medians: dict[str, dict[int, list[float]]], sizes: list[int], rounds: int, per_round: int) -> None:
    small, large = sizes
    print(f"\n## rebuild one turn (load_turn: request + response), median of {per_round} calls, {rounds} rounds")
    for label, per_size in medians.items():
        for n, values in per_size.items():
            print(f"{label:>30} {n:>9,} captured calls: {_spread(values)}")
        print(f"{label:>30} {large:,} / {small:,}: {_ratio(per_size[large], per_size[small])}  (goal <= 1.5)")
    if len(medians) == 2:
        ours, base = medians.values()
        for n in sizes:
            print(f"{'this / baseline':>30} {n:>9,} captured calls: {_ratio(ours[n], base[n])}")


def _arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog="See the module docstring for what is measured."
    )
    ap.add_argument("--spans", type=int, default=40_000, help="workload spans for bytes/span (default 40000)")
    ap.add_argument("--calls", type=int, nargs=2, default=[10_000, 100_000], metavar=("SMALL", "LARGE"),
                    help="captured calls in the two ledgers timed for rebuild (default 10000 100000)")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=5, help="alternating timing rounds (default 5)")
    ap.add_argument("--per-round", type=int, default=200, help="load_turn calls per ledger and round (default 200)")
    ap.add_argument("--baseline", type=Path, metavar="TREE", help="also measure with TREE's ledger package")
    ap.add_argument("--skip-rebuild", action="store_true", help="bytes/span only")
    ap.add_argument("--skip-sizes", action="store_true", help="rebuild latency only")
    # What the measuring subprocesses are told (each runs in one tree's environment):
    ap.add_argument("--sizes-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--build-ledgers", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--time-ledgers", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--ledger-root", type=Path, help=argparse.SUPPRESS)  # whose ``ledger`` it imports
    return ap.parse_args()


def main() -> None:
    a = _arguments()
    if a.sizes_only:
        print(json.dumps(measure_sizes(a.spans)))
        return
    if a.build_ledgers:
        build_ledgers(a.build_ledgers, a.calls)
        print("{}")
        return
    if a.time_ledgers:
        print(json.dumps(time_rebuild(a.time_ledgers, a.calls, a.per_round, a.seed)))
        return
    header("content store")
    trees: dict[str, Path | None] = {"this checkout": None}
    if a.baseline is not None:
        trees["baseline " + str(a.baseline)] = a.baseline.resolve()
    if not a.skip_sizes:
        _print_sizes({label: _in_tree(tree, "--sizes-only", "--spans", str(a.spans)) for label, tree in trees.items()})
    if not a.skip_rebuild:
        _print_rebuild(measure_rebuild(trees, a.calls, a.rounds, a.per_round), a.calls, a.rounds, a.per_round)
    footer()


if __name__ == "__main__":
    main()
