"""Sustained end-to-end ingest throughput of ``turnledger serve``, beside the floors it cannot beat.

For realistic GenAI agent spans (runs of 3–12 turns: a root ``invoke_agent``,
``chat`` spans with model/usage/cache attributes, ``execute_tool`` spans,
occasional guard events), without and with captured request content, encoded
as OTLP protobuf in 512-span requests (the SDK BatchSpanProcessor's batch):

* **end to end**: a real ``turnledger serve`` process on a fresh ledger, fed
  over HTTP by 8 keep-alive connections (8 exporters, each waiting for its
  200 before its next request, as the SDK's BatchSpanProcessor does), and by
  32; and over OTLP/gRPC by 8 channels (each waiting for its ``Export`` call's
  answer), alternating rounds with HTTP, with the gRPC / HTTP ratio; timed from the first POST until a named query through the API counts
  every run (a 200 is only sent once its spans are committed; runs rows may
  trail them by up to half a second under load, and that wait is included).
  With the default decoder processes (one per core), with one, and with
  ``--decode-workers 0``; each beside the CPU it cost (server and decoders,
  µs per span), since on 2 cores CPU is what runs out;
* **decode only**: ``collector.otlp.decode_protobuf`` of the same bodies into
  span records, and **decode into ledger rows**: the same plus
  ``ledger.ingest.prepare(...).to_arrow()``, every row ingest inserts, nothing
  stored (the floor this receiver pays). The 50% target is printed against both;
* **raw DuckDB bulk insert**: inserting exactly the rows ingest builds, as
  Arrow tables, into a fresh ledger file (25k-span transactions);
* **peak RSS** of the server process and its decoder workers (VmHWM, summed);
* **the writer's cost per span** (``ledger.ingest.write`` in 2,048-span commits, CPU of
  every thread) at DuckDB's default 16 MiB checkpoint threshold and at the ledger's;
* where ``ledger.ingest`` spends its time (same batches, in process).

Usage: ``python benchmarks/ingest_throughput.py [--spans N] [--content-spans N] [--repeats N]``;
``--baseline-ref REF`` instead compares end to end with the server of commit REF, which the
benchmark checks out and installs in its own virtual environment (once, in the user's cache
folder), so any two commits compare in one command: rounds alternate, each on a fresh ledger,
and CPU µs per span (server and decoders), spans/s and the latency of a small request's 200
(p50 / p99, and the first on a fresh server) are printed for both sides, medians of the rounds
with their ranges, the ratios and the load. ``--baseline TREE`` does the same with a checkout
at hand, run with this checkout's packages; ``--grpc`` adds OTLP/gRPC rounds.
On a shared 2-core machine runs of the same code differ by up to a quarter: use
``--repeats 3`` for figures to compare across runs (medians, with their ranges).
Figures from one run are comparable with each other; the machine's load is printed.
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import ledger.ingest as li  # noqa: E402
import ledger.runs as lruns  # noqa: E402
import ledger.write as lw  # noqa: E402
from benchmarks._common import commit, footer, header, wait_healthy  # noqa: E402
from benchmarks.agent_workload import encode_protobuf, small_requests, workload  # noqa: E402
from benchmarks.exporters import export_grpc, export_http, serves_grpc  # noqa: E402
from collector.cli.serve import DEFAULT_DECODE_WORKERS  # noqa: E402
from collector.otlp import decode_protobuf, encode_json  # noqa: E402
from ledger.rows import default_prices  # noqa: E402
from ledger.store import CHECKPOINT_THRESHOLD, open_ledger  # noqa: E402

BATCH = 512
TARGET = 25_000
# Small requests per end-to-end run (one agent run each, OTLP/JSON, one after another on one
# connection, after the load): the latency an agent exporting at the end of its run sees.
SMALL_REQUESTS = 16


# --- measurements --------------------------------------------------------------------------
def _median_rate(n: int, fn: Callable[[], object], repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return n / statistics.median(times)


def decode_rates(bodies: list[bytes], n: int) -> tuple[float, float]:
    """(protobuf -> span records, protobuf -> ledger rows as Arrow tables): decoding, nothing stored."""
    prices = default_prices()
    decode = _median_rate(n, lambda: [decode_protobuf(b) for b in bodies])
    to_rows = _median_rate(n, lambda: [li.prepare(decode_protobuf(b), prices).to_arrow() for b in bodies])
    return decode, to_rows


def _prepared(bodies: list[bytes], per_call: int) -> list[li.PreparedBatch]:
    prices = default_prices()
    spans = [s for b in bodies for s in decode_protobuf(b)]
    return [li.prepare(spans[i : i + per_call], prices).to_arrow() for i in range(0, len(spans), per_call)]


def raw_insert_rate(bodies: list[bytes], n: int, folder: Path) -> float:
    """INSERT of the rows ingest builds (its Arrow tables, as it sends them), in 25k-span transactions."""
    batches = _prepared(bodies, 25_000)
    rates = []
    for rep in range(2):
        con = open_ledger(folder / f"raw-{rep}.duckdb")
        t0 = time.perf_counter()
        for b in batches:
            con.execute("BEGIN TRANSACTION")
            for name, table in b.tables.items():
                lw._insert(con, name, table)
            con.execute("COMMIT")
        rates.append(n / (time.perf_counter() - t0))
        con.close()
    return max(rates)


def write_cost(bodies: list[bytes], n: int, folder: Path, threshold: str) -> float:
    """CPU µs per span of ``ledger.ingest.write`` in 2,048-span commits (what the server's writer
    commits under load, runs deferred and rebuilt every 10 commits), at a checkpoint threshold."""
    batches = _prepared(bodies, 2048)
    con = open_ledger(folder / f"write-{threshold}.duckdb")
    con.execute(f"SET checkpoint_threshold = '{threshold}'")
    cpu = time.process_time()  # every thread of the process: DuckDB's too
    for i, b in enumerate(batches, 1):
        li.write(con, [b], defer_runs=True)
        if i % 10 == 0:
            li.refresh_pending_runs(con)
    li.refresh_pending_runs(con)
    con.close()  # closing checkpoints what is left: counted, as a server pays it too
    return (time.process_time() - cpu) / n * 1e6


def ingest_profile(bodies: list[bytes], folder: Path, per_call: int = 25_000) -> tuple[float, dict[str, float]]:
    """ledger.ingest (prepare + write) over the same spans in 25k-span calls, with its stages timed."""
    spans = [s for b in bodies for s in decode_protobuf(b)]
    stages: dict[str, float] = {}
    saved = {
        (module, name): getattr(module, name)
        for module, name in ((li, "prepare"), (lw, "_insert"), (lruns, "refresh_runs"))
    }
    labels = {"prepare": "prepare (rows: normalize, price, redact, JSON, Arrow)"}

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                key = f"insert {a[1]}" if name == "_insert" else labels.get(name, name)
                stages[key] = stages.get(key, 0.0) + time.perf_counter() - t

        return wrapper

    for (module, name), fn in saved.items():
        setattr(module, name, timed(name, fn))
    refresh_first_last: list[float] = []
    try:
        con = open_ledger(folder / "profile.duckdb")
        t0 = time.perf_counter()
        for i in range(0, len(spans), per_call):
            before = stages.get("refresh_runs", 0.0)
            li.ingest(con, spans[i : i + per_call])
            refresh_first_last.append(stages.get("refresh_runs", 0.0) - before)
        total = time.perf_counter() - t0
        con.close()
    finally:
        for (module, name), fn in saved.items():
            setattr(module, name, fn)
    accounted = sum(stages.values())
    stages["commit and the rest"] = total - accounted
    stages["(refresh_runs: first call s)"] = refresh_first_last[0]
    stages["(refresh_runs: last call s)"] = refresh_first_last[-1]
    return len(spans) / total, stages


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _peak_rss_mb(pid: int) -> float:
    """VmHWM of a process plus its children's (the decoder workers)."""
    total = 0.0
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    for p in [pid, *map(int, children)]:
        for line in Path(f"/proc/{p}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                total += int(line.split()[1]) / 1024
    return total


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of a process and its children (the decoder workers)."""
    total = 0.0
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    for p in [pid, *map(int, children)]:
        fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


@dataclass
class EndToEnd:
    rate: float  # spans/s from the first POST until every run is queryable
    rss_mib: float  # peak, server and decoder workers
    throttled: int  # 429/503 back-offs
    requests_per_commit: float
    cpu_us_per_span: float  # server and decoder workers, from the first POST to the end
    first_small_ms: float = 0.0  # the first small request's 200 on the fresh server (cold: nothing warmed yet)
    small_ms: list[float] = field(default_factory=list)  # small requests one after another, after the load


def _post_small(conn: http.client.HTTPConnection, body: bytes) -> float:
    """One small OTLP/JSON request on ``conn``: milliseconds until its 200 (its spans committed)."""
    t = time.perf_counter()
    conn.request("POST", "/v1/traces", body=body, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    r.read()
    if r.status != 200:
        raise RuntimeError(f"small request: HTTP {r.status}")
    return (time.perf_counter() - t) * 1e3


@lru_cache(maxsize=1)
def _small_bodies() -> tuple[list[bytes], int]:
    """``SMALL_REQUESTS`` OTLP/JSON bodies of one run each (plus one for the cold first request), and their runs."""
    runs = small_requests(SMALL_REQUESTS + 1)
    return [json.dumps(encode_json(r)).encode() for r in runs], len(runs)


@lru_cache(maxsize=1)
def _warm_up_bodies() -> tuple[list[bytes], int]:
    spans, runs = workload(4 * BATCH, content=False, seed=99)  # other trace ids than the measured ones
    return [encode_protobuf(spans[i : i + BATCH]) for i in range(0, len(spans), BATCH)], runs


def end_to_end(
    bodies: list[bytes],
    n: int,
    runs: int,
    folder: Path,
    *,
    workers: int | None = None,
    connections: int = 8,
    tree: Path = ROOT,
    python: str = sys.executable,
    protocol: str = "http",
    small: bool = False,
) -> EndToEnd:
    """Stream every body through a fresh ``turnledger serve`` and wait until it is all queryable.

    ``workers``: the server's --decode-workers (None: its default). ``tree``: the source
    tree the server runs from (another checkout of turnledger), with ``python`` (its own
    virtual environment, or this one's packages).
    ``protocol``: ``http`` or ``grpc`` (a server that serves gRPC listens on both, as deployed).
    ``small``: also time small requests' 200s: the first on the fresh server, and
    ``SMALL_REQUESTS`` one after another once the load is queryable.
    """
    port = _free_port()
    db = folder / f"e2e-{workers}-{connections}-{time.monotonic_ns()}.duckdb"
    options = [] if workers is None else ["--decode-workers", str(workers)]
    grpc_port = _free_port()
    if serves_grpc(tree):
        options += ["--grpc-port", str(grpc_port)]
    send = export_http if protocol == "http" else export_grpc
    target = port if protocol == "http" else grpc_port
    server = subprocess.Popen(
        [python, "-m", "collector.cli", "serve", "--port", str(port), "--db", str(db), *options],
        cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**os.environ, "TURNLEDGER_TOKEN": "", "PYTHONPATH": str(tree)},
    )  # fmt: skip
    try:
        wait_healthy(port, server)
        small_bodies, small_runs = _small_bodies() if small else ([], 0)
        first_small = (
            _post_small(http.client.HTTPConnection("127.0.0.1", port, timeout=60), small_bodies[0]) if small else 0.0
        )
        # Sustained throughput: the decoder processes import and warm up first, on a
        # few requests of other traces (their runs are counted in the wait below).
        warm_bodies, warm_runs = _warm_up_bodies()
        send(target, warm_bodies, len(warm_bodies))
        cpu0 = _cpu_seconds(server.pid)
        t0 = time.perf_counter()
        throttled = send(target, bodies, connections)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while True:  # queryable: the API's run count covers every run sent
            conn.request("GET", "/api/query/cost_per_run?format=json")
            seen = json.loads(conn.getresponse().read())[0]["runs"]
            if seen >= runs + warm_runs + min(1, small_runs):
                break
            time.sleep(0.01)
        elapsed = time.perf_counter() - t0
        cpu = _cpu_seconds(server.pid) - cpu0
        small_ms = [_post_small(conn, body) for body in small_bodies[1:]]
        conn.request("GET", "/healthz")
        writer = json.loads(conn.getresponse().read())["writer"]
        coalesced = writer["requests"] / max(1, writer["batches"])
        return EndToEnd(
            n / elapsed, _peak_rss_mb(server.pid), throttled, coalesced, cpu / n * 1e6, first_small, small_ms
        )
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()


def median_end_to_end(
    repeats: int, bodies: list[bytes], n: int, runs: int, folder: Path, **options: Any
) -> tuple[EndToEnd, str]:
    """The median of ``repeats`` end-to-end runs (by rate), and their range as text when there are several."""
    return _median_and_spread([end_to_end(bodies, n, runs, folder, **options) for _ in range(repeats)])


def http_and_grpc(repeats: int, bodies: list[bytes], n: int, runs: int, folder: Path) -> dict[str, list[EndToEnd]]:
    """Default end-to-end runs over HTTP and over gRPC, alternating rounds (the machine's load drifts)."""
    tries: dict[str, list[EndToEnd]] = {"http": [], "grpc": []}
    for _ in range(max(1, repeats)):
        for protocol, done in tries.items():
            done.append(end_to_end(bodies, n, runs, folder, protocol=protocol))
    return tries


def _median_and_spread(tries: list[EndToEnd]) -> tuple[EndToEnd, str]:
    tries = sorted(tries, key=lambda r: r.rate)
    spread = f"  ({tries[0].rate:,.0f}–{tries[-1].rate:,.0f})" if len(tries) > 1 else ""
    return tries[(len(tries) - 1) // 2], spread  # the lower median when even


def _arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spans", type=int, default=100_000, help="spans per workload without content (default 100000)")
    ap.add_argument("--content-spans", type=int, default=40_000, help="spans per workload with content (default 40000)")
    ap.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="end-to-end runs per setting; the median is printed, with the range (default 1)",
    )
    ap.add_argument(
        "--baseline",
        type=Path,
        default=None,
        metavar="TREE",
        help="only compare end to end with the server of another checkout (e.g. a git worktree of an older "
        "commit, run with this checkout's packages), alternating the two --repeats times per workload, "
        "and print the ratios",
    )
    ap.add_argument(
        "--baseline-ref",
        default=None,
        metavar="REF",
        help="as --baseline, with the commit REF checked out and installed in its own virtual environment "
        f"(once, cached under {BASELINES})",
    )
    ap.add_argument("--grpc", action="store_true", help="with --baseline(-ref): also compare over OTLP/gRPC")
    return ap.parse_args()


def main() -> None:
    a = _arguments()
    if a.baseline is not None or a.baseline_ref is not None:
        baseline = (
            baseline_checkout(a.baseline_ref)
            if a.baseline_ref is not None
            else Checkout(a.baseline.resolve(), sys.executable, str(a.baseline))
        )
        compare_with(baseline, a.spans, a.content_spans, a.repeats, a.grpc)
        return
    header("ingest throughput")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for content, n_wanted in ((False, a.spans), (True, a.content_spans)):
            label = "with content" if content else "without content"
            folder = Path(tmp) / label.replace(" ", "-")  # fresh ledgers: the two workloads share ids
            folder.mkdir()
            spans, runs = workload(n_wanted, content)
            n = len(spans)
            bodies = [encode_protobuf(spans[i : i + BATCH]) for i in range(0, n, BATCH)]
            del spans
            size = sum(map(len, bodies)) / n
            print(f"\n## {label}: {n:,} spans in {runs:,} runs, {len(bodies)} requests of {BATCH}, {size:,.0f} B/span")
            decode, decode_rows = decode_rates(bodies, n)
            raw = raw_insert_rate(bodies, n, folder)
            trial = (a.repeats, bodies, n, runs, folder)
            both = http_and_grpc(*trial)
            (default, default_spread), over_grpc = _median_and_spread(both["http"]), _median_and_spread(both["grpc"])
            wide = median_end_to_end(*trial, connections=32)
            one_worker = median_end_to_end(*trial, workers=1)
            in_threads = median_end_to_end(*trial, workers=0)
            writes = {t: write_cost(bodies, n, folder, t) for t in ("16MiB", CHECKPOINT_THRESHOLD)}
            ingest_rate, stages = ingest_profile(bodies, folder)
            e2e = [
                (
                    f"end to end through HTTP (POST -> queryable), {DEFAULT_DECODE_WORKERS} decoder(s)",
                    (default, default_spread),
                ),
                (f"end to end through gRPC (Export -> queryable), {DEFAULT_DECODE_WORKERS} decoder(s)", over_grpc),
                ("  same through HTTP, 32 exporters instead of 8", wide),
                ("  same, 1 decoder process", one_worker),
                ("  same, rows built on request threads (workers 0)", in_threads),
            ]
            print(f"  {'':60s} {'spans/s':>10s}   CPU µs/span (server + decoders)")
            for name, (run, spread) in e2e:
                print(f"  {name:60s} {run.rate:>10,.0f}   {run.cpu_us_per_span:6.1f}{spread}")
            ratios = sorted(g.rate / h.rate for g, h in zip(both["grpc"], both["http"], strict=True))
            print(f"  {'gRPC / HTTP (alternating rounds)':60s} {'x' + format(over_grpc[0].rate / default.rate, '.3f'):>10s}"
                  f"   per round x{ratios[0]:.3f}–x{ratios[-1]:.3f}")  # fmt: skip
            for name, rate in [
                ("decode only (protobuf -> span records)", decode),
                ("decode into ledger rows (Arrow, nothing stored)", decode_rows),
                ("raw DuckDB bulk insert of those rows", raw),
                ("ledger.ingest alone (25k-span calls, in process)", ingest_rate),
            ]:
                print(f"  {name:50s} {rate:>10,.0f}")
            print(f"  {'server peak RSS':50s} {default.rss_mib:>10,.0f} MiB")
            print(f"  {'requests per commit (coalescing), 429 back-offs':50s} "
                  f"{default.requests_per_commit:>10.1f}       {default.throttled}")  # fmt: skip
            for threshold, cost in writes.items():
                print(f"  {'write() in 2,048-span commits, checkpoint at ' + threshold:50s} {cost:>10.1f} CPU µs/span")
            print("  where ledger.ingest spends its time:")
            total = sum(v for k, v in stages.items() if not k.startswith("("))
            for k, v in sorted(stages.items(), key=lambda kv: -kv[1]):
                share = f"{v / total:6.1%}" if not k.startswith("(") else "      "
                print(f"    {k:48s} {v:7.2f} s {share}")
            results.append((label, default.rate, decode, decode_rows))
    print(f"\n## targets (8 exporters, default server: {DEFAULT_DECODE_WORKERS} decoder processes)")
    for label, e2e, decode, decode_rows in results:
        if label == "without content":
            print(f"  {label}: {e2e:,.0f} spans/s vs >= {TARGET:,}: {'met' if e2e >= TARGET else 'MISSED'}")
        for floor, rate in (("decode-only", decode), ("decode-into-rows", decode_rows)):
            verdict = "met" if e2e >= rate / 2 else "MISSED"
            print(f"  {label}: {e2e / rate:.0%} of {floor} (>= 50%): {verdict}")


@dataclass(frozen=True)
class Checkout:
    """A turnledger source tree, the Python its server runs with, and its name in the figures."""

    tree: Path
    python: str
    name: str


# Baselines checked out and installed by ``--baseline-ref``, one folder per commit, kept between runs.
BASELINES = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "turnledger" / "baselines"


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


def baseline_checkout(ref: str) -> Checkout:
    """``ref`` checked out (``git archive``) and installed in its own virtual environment, under
    ``BASELINES/<sha>``, once: a marker file says the install finished, so an interrupted one is redone.
    The baseline runs on the dependencies its own pyproject asks for, not this checkout's."""
    sha = _git("rev-parse", "--verify", f"{ref}^{{commit}}")
    home = BASELINES / sha
    tree, venv, marker = home / "tree", home / "venv", home / "installed"
    python = venv / "bin" / "python"
    if not marker.exists():
        print(f"(installing baseline {ref} = {sha[:10]} into {home}, once)", flush=True)
        shutil.rmtree(home, ignore_errors=True)
        tree.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", sha], capture_output=True, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tree, filter="data")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(tree)], check=True)
        marker.write_text(f"{ref}\n")
    return Checkout(tree, str(python), f"{ref} ({sha[:10]})")


def _ranged(values: list[float], spec: str) -> str:
    """The median of ``values``, with their range when there are several."""
    mid = format(statistics.median(values), spec)
    return mid if len(values) < 2 else f"{mid} ({format(min(values), spec)}–{format(max(values), spec)})"


def _percentile(values: list[float], p: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1] if len(values) > 1 else values[0]


def compare_with(baseline: Checkout, spans: int, content_spans: int, rounds: int, grpc: bool) -> None:
    """End to end (8 exporters, default decoders), here and at ``baseline``, in alternating rounds
    on fresh ledgers: CPU per span, spans/s and small requests' latency, medians of the rounds with
    their ranges, and the ratios current / baseline."""
    current = Checkout(ROOT, sys.executable, f"current ({commit()})")
    header(f"ingest end to end: {current.name} vs baseline {baseline.name}")
    with tempfile.TemporaryDirectory() as tmp:
        for content, n_wanted in ((False, spans), (True, content_spans)):
            if n_wanted <= 0:  # --spans 0 or --content-spans 0: that workload is skipped
                continue
            label = "with content" if content else "without content"
            folder = Path(tmp) / label.replace(" ", "-")
            folder.mkdir()
            workload_spans, runs = workload(n_wanted, content)
            n = len(workload_spans)
            bodies = [encode_protobuf(workload_spans[i : i + BATCH]) for i in range(0, n, BATCH)]
            del workload_spans
            setups = [("baseline", baseline, "http"), ("current", current, "http")]
            if grpc:
                setups += [("current gRPC", current, "grpc")]
                if serves_grpc(baseline.tree):
                    setups.insert(1, ("baseline gRPC", baseline, "grpc"))
            tries: dict[str, list[EndToEnd]] = {name: [] for name, _, _ in setups}
            loads = []
            for _ in range(max(1, rounds)):
                loads.append(os.getloadavg()[0])
                for name, side, protocol in setups:
                    run = end_to_end(
                        bodies, n, runs, folder, tree=side.tree, python=side.python, protocol=protocol,
                        small=protocol == "http",
                    )  # fmt: skip
                    tries[name].append(run)
            loads.append(os.getloadavg()[0])
            print(f"\n## {label}: {n:,} spans in {runs:,} runs, {len(bodies)} requests of {BATCH}, 8 exporters; "
                  f"{rounds} alternating round(s), medians (ranges); 1-min load {min(loads):.1f}–{max(loads):.1f}")  # fmt: skip
            _print_comparison(tries)


def _print_comparison(tries: dict[str, list[EndToEnd]]) -> None:
    figures: dict[str, Callable[[list[EndToEnd]], list[float]]] = {
        "CPU µs per span (server + decoders)": lambda rs: [r.cpu_us_per_span for r in rs],
        "spans/s (first POST -> every run queryable)": lambda rs: [r.rate for r in rs],
        f"small request's 200, p50 ms ({SMALL_REQUESTS} per round)": lambda rs: [
            _percentile(r.small_ms, 50) for r in rs if r.small_ms
        ],
        "small request's 200, p99 ms": lambda rs: [_percentile(r.small_ms, 99) for r in rs if r.small_ms],
        "first small request on a fresh server, ms": lambda rs: [r.first_small_ms for r in rs if r.small_ms],
    }
    specs = {"spans/s": ",.0f", "CPU": ".0f"}
    names = list(tries)
    print(f"  {'':46s}" + "".join(f"{name:>24s}" for name in names) + "   current / baseline")
    for figure, of in figures.items():
        spec = next((v for k, v in specs.items() if figure.startswith(k)), ".1f")
        values = {name: of(tries[name]) for name in names}
        cells = "".join(f"{_ranged(v, spec) if v else '-':>24s}" for v in values.values())
        ratios = []
        for cur, base in (("current", "baseline"), ("current gRPC", "baseline gRPC")):
            if values.get(cur) and values.get(base):
                ratios.append(f"x{statistics.median(values[cur]) / statistics.median(values[base]):.3f}")
        print(f"  {figure:46s}{cells}   {' / '.join(ratios)}")


if __name__ == "__main__":
    main()
    footer()
