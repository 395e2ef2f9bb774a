"""Start-up cost now vs the pre-renovation code, measured side by side in one run.

The baseline commit is checked out into a temporary ``git worktree`` (removed at
the end) and each tree runs with ``PYTHONPATH=<tree>`` on the same virtualenv, so
both use the same interpreter and third-party packages. Figures:

* ``turnledger --help``: wall time of ``python -m collector.cli --help``.
* A decoder worker (the receiver's ``DecodePool``): one spawned worker's imports,
  logged by ``PYTHONPROFILEIMPORTTIME`` in the worker only, and the time from
  starting the pool to its first decoded batch. The driver's ``__main__`` is the
  ``turnledger`` console script, as under ``turnledger up``: spawn re-runs it in
  every worker.
* ``turnledger up`` idle: the RSS of the whole process tree (collector, decoder
  workers, dashboard), once the collector answers ``/healthz`` (and the dashboard
  its health check) and the total has settled. An empty temporary ledger, no samples.

Ratios are current / baseline: below 1 is better. A benchmark prints; it never
asserts. The machine is shared, so runs of the two trees are interleaved.

Usage: ``python benchmarks/startup.py [--baseline COMMIT] [--repeats N] [--skip-up]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import footer, header  # noqa: E402

BASELINE = "af45bdd"  # the last commit before the renovation (issue #11)
CONSOLE_SCRIPT = Path(sys.executable).with_name("turnledger")
SAMPLE_BODY = ROOT / "sample_traces" / "five_turn_run.json"
# Modules a decoder worker has no use for; each one found is named in the report.
UNWANTED = ("pandas", "ledger.budgets", "collector.cli.budget", "streamlit", "plotly", "duckdb", "httpx2")

# What a decoder worker is given to do. It runs in a child interpreter with one
# tree on its PYTHONPATH; the pool module moved in the renovation.
WORKER_DRIVER = f"""
import json, os, sys, time
from pathlib import Path
sys.modules["__main__"].__file__ = {str(CONSOLE_SCRIPT)!r}
try:
    from collector.receiver.decode_pool import DecodePool
except ImportError:
    from collector.server.decode_pool import DecodePool
from ledger.pricing import PriceBook
body = Path({str(SAMPLE_BODY)!r}).read_bytes()
prices = PriceBook.default(None)
os.environ["PYTHONPROFILEIMPORTTIME"] = "1"  # read at interpreter start: the worker logs, we do not
started = time.perf_counter()
pool = DecodePool(1, prices, True)
batch = pool.prepare(body, "application/json")
ready = time.perf_counter() - started
# What the worker holds, from the worker (a failed import is logged too, so the log cannot tell).
modules = pool._pool.submit(eval, "sorted(__import__('sys').modules)").result()
pool.close()
print(json.dumps({{"ready_s": ready, "spans": batch.received, "modules": modules}}))
"""


@dataclass
class Tree:
    label: str
    path: Path
    scratch: Path

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TURNLEDGER_") and k != "PYTHONPATH"}
        return {**env, "PYTHONPATH": str(self.path), **extra}

    def run(self, args: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
        # cwd is a scratch folder, so neither tree's checkout is importable from ''.
        return subprocess.run(
            args, cwd=self.scratch, env=self.env(), capture_output=True, text=True, timeout=timeout, check=True
        )


@contextmanager
def baseline_checkout(commit: str) -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="turnledger-baseline-"))
    tree = folder / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(tree), commit], check=True)
    try:
        yield tree
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
        shutil.rmtree(folder, ignore_errors=True)


# --- figures ------------------------------------------------------------------------------


def summary(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def interleaved(trees: list[Tree], repeats: int, measure: Callable[[Tree], float]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {t.label: [] for t in trees}
    for _ in range(repeats):
        for t in trees:
            out[t.label].append(measure(t))
    return out


def help_seconds(tree: Tree) -> float:
    started = time.perf_counter()
    tree.run([sys.executable, "-m", "collector.cli", "--help"])
    return time.perf_counter() - started


@dataclass
class WorkerImports:
    ready_s: float
    cumulative_ms: float  # sum of the top-level imports' cumulative times
    modules: list[str]
    package_ms: dict[str, float] = field(default_factory=dict)  # top-level package -> its import's cumulative ms

    @property
    def packages(self) -> list[str]:
        return sorted({m.split(".")[0] for m in self.modules})


def worker_imports(tree: Tree) -> WorkerImports:
    done = tree.run([sys.executable, "-c", WORKER_DRIVER])
    cumulative, package_ms = 0.0, {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "[us]" in line:
            continue
        _, cum, name = line.split("|")
        if not name.startswith("  "):  # a top-level import, not one nested in another
            cumulative += float(cum) / 1000
        if "." not in name:  # a package's own line: what importing it cost, where it was first imported
            package_ms[name.strip()] = float(cum) / 1000
    found = json.loads(done.stdout)
    loaded = {m.split(".")[0] for m in found["modules"]}  # a refused import is logged too
    package_ms = {n: ms for n, ms in package_ms.items() if n in loaded and n not in sys.stdlib_module_names}
    return WorkerImports(found["ready_s"], cumulative, found["modules"], package_ms)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def process_tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(children.get(pid, []))
    return pids


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def role(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "gone"
    if "resource_tracker" in cmd:
        return "resource tracker"
    if "multiprocessing" in cmd:
        return "decoder"
    if "-m dashboard" in cmd or "streamlit" in cmd:
        return "dashboard"
    return "collector"


def wait_until(check: Callable[[], bool], timeout: float, what: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"turnledger up exited (code {proc.returncode}) before {what}")
        if check():
            return
        time.sleep(0.25)
    raise TimeoutError(f"no {what} within {timeout} s")


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def settled_rss(root: int, window_s: float = 3.0, limit_s: float = 40.0) -> dict[str, float]:
    """RSS by role once the tree's total has moved less than 1 % over ``window_s``."""
    samples: list[float] = []
    deadline = time.monotonic() + limit_s
    while True:
        by_role: dict[str, float] = {}
        for pid in process_tree(root):
            by_role[role(pid)] = by_role.get(role(pid), 0.0) + rss_mib(pid)
        samples.append(sum(by_role.values()))
        recent = samples[-int(window_s / 0.5) - 1 :]
        if len(samples) > window_s / 0.5 and max(recent) - min(recent) < 0.01 * max(recent):
            return by_role
        if time.monotonic() > deadline:
            return by_role
        time.sleep(0.5)


def up_idle_rss(tree: Tree, dashboard: bool) -> dict[str, float]:
    port, dashboard_port = free_port(), free_port()
    db = tree.scratch / f"idle-{time.monotonic_ns()}.duckdb"
    cmd = [str(CONSOLE_SCRIPT), "up", "--no-samples", "--db", str(db), "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--dashboard-port", str(dashboard_port)] if dashboard else ["--no-dashboard"]
    log = tree.scratch / "up.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=tree.scratch, env=tree.env(), stdin=subprocess.DEVNULL, stdout=out, stderr=out,
            start_new_session=True,  # its own process group: nothing of it outlives the benchmark
        )  # fmt: skip
    try:
        wait_until(lambda: answers(f"http://127.0.0.1:{port}/healthz"), 90, "healthy collector", proc)
        if dashboard:
            health = f"http://127.0.0.1:{dashboard_port}/_stcore/health"
            wait_until(lambda: answers(health), 120, "healthy dashboard", proc)
        return settled_rss(proc.pid)
    except (RuntimeError, TimeoutError):
        print(log.read_text(errors="replace")[-2000:], file=sys.stderr)
        raise
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the collector commits, stops the dashboard, exits
        with suppress(subprocess.TimeoutExpired):
            proc.wait(30)
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


# --- report -------------------------------------------------------------------------------


def print_timing(title: str, runs: dict[str, list[float]], unit: str = "s") -> None:
    base = statistics.median(runs["baseline"])
    print(f"\n{title}")
    for label, values in runs.items():
        med, lo, hi = summary(values)
        print(f"  {label:<9} median {med:8.3f} {unit}  (range {lo:.3f}–{hi:.3f}, n={len(values)})  ×{med / base:.2f}")


def print_worker(found: dict[str, list[WorkerImports]]) -> None:
    print_timing(
        "decoder worker: pool start to first decoded batch", {k: [w.ready_s for w in v] for k, v in found.items()}
    )
    print_timing(
        "decoder worker: imports, cumulative", {k: [w.cumulative_ms for w in v] for k, v in found.items()}, "ms"
    )
    base = found["baseline"][-1]
    for label, runs in found.items():
        w = runs[-1]
        third_party = [p for p in w.packages if p not in sys.stdlib_module_names and not p.startswith("_")]
        unwanted = [u for u in UNWANTED if any(m == u or m.startswith(u + ".") for m in w.modules)]
        heaviest = sorted(w.package_ms.items(), key=lambda kv: -kv[1])[:8]
        print(f"  {label}: {len(w.modules)} modules (×{len(w.modules) / len(base.modules):.2f})")
        print(f"    top-level packages beyond the stdlib: {' '.join(third_party)}")
        print(
            f"    heaviest packages (cumulative, where first imported): {', '.join(f'{n} {ms:.0f} ms' for n, ms in heaviest)}"
        )
        print(f"    loaded though a worker never uses it: {' '.join(unwanted) or 'none'}")


def print_rss(title: str, found: dict[str, dict[str, float]]) -> None:
    base = sum(found["baseline"].values())
    print(f"\n{title}")
    for label, by_role in found.items():
        total = sum(by_role.values())
        parts = ", ".join(f"{r} {mib:.0f}" for r, mib in sorted(by_role.items()))
        print(f"  {label:<9} {total:7.0f} MiB  ×{total / base:.2f}   ({parts})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--baseline", default=BASELINE, help=f"commit to compare with (default {BASELINE})")
    p.add_argument("--repeats", type=int, default=5, help="runs of `--help` per tree (default 5)")
    p.add_argument("--worker-repeats", type=int, default=3, help="decoder workers started per tree (default 3)")
    p.add_argument("--skip-up", action="store_true", help="do not measure `turnledger up` (its RSS)")
    a = p.parse_args()
    header(f"startup: baseline {a.baseline} vs this tree")
    with baseline_checkout(a.baseline) as base_path, tempfile.TemporaryDirectory() as scratch:
        trees = [
            Tree("baseline", base_path, Path(scratch) / "baseline"),
            Tree("current", ROOT, Path(scratch) / "current"),
        ]
        for t in trees:
            t.scratch.mkdir()
        print(f"baseline {a.baseline} vs current {ROOT}; python {sys.version.split()[0]}, {os.cpu_count()} cores")
        print_timing("turnledger --help (python -m collector.cli --help)", interleaved(trees, a.repeats, help_seconds))
        found: dict[str, list[WorkerImports]] = {t.label: [] for t in trees}
        for _ in range(a.worker_repeats):
            for t in trees:
                found[t.label].append(worker_imports(t))
        print_worker(found)
        if not a.skip_up:
            for dashboard in (False, True):
                title = "turnledger up " + ("(collector, decoders, dashboard)" if dashboard else "--no-dashboard")
                print_rss(f"{title}: idle RSS of the process tree", {t.label: up_idle_rss(t, dashboard) for t in trees})


if __name__ == "__main__":
    main()
    footer()
