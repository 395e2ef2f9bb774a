"""Decode memory: what four concurrent maximum-size OTLP bodies cost a running collector (#41 item 7).

A fresh ``turnledger serve`` per case, warmed up (every decode worker has decoded a body), then
four bodies posted at once, each as large as the collector accepts: 16 MiB on the wire
(``--max-body-mb``' default) or, compressed, 64 MiB inflated (``max_decoded_bytes``), whichever
comes first. The bodies are realistic agent runs with captured content (each turn's request
repeats the conversation so far: large and very compressible, as real exports are). Cases:
protobuf and OTLP/JSON, gzip and identity.

Printed per case: the growth of resident memory over idle of the collector process and its decode
workers summed at the same moment ("together": sampled every millisecond, the headline), and beside it
each process's own peak (``VmHWM`` since idle, reset with ``clear_refs``) summed, an upper bound that adds
peaks of different moments (a worker's body decoded after the other's). With ``--baseline REF`` the same
cases run against that commit's tree (``git archive``), alternating, and the ratio of "together" is
printed. Medians of ``--repeats`` runs, with their ranges, and the load. ``DECODE_MEMORY_VERBOSE=1``
prints each process's share at the peak. ``--stages`` instead follows one gzip protobuf body through a
worker's steps in this process.

Measured (2 cores, load 10-14, --decode-workers 2, medians of 3 with ranges; #41 item 7), together,
de87a2f -> this branch: gzip protobuf (60 MiB inflated) 1,195 (1,168-1,295) -> 410 (363-416) MiB, gzip
JSON (57 MiB inflated) 1,093 (1,071-1,118) -> 514 (509-529); identity protobuf 319 -> 194, identity JSON 320
-> 209 (an earlier run of this branch). Where it went: the decode budget
admits one maximum-size body at a time; a worker is sent it compressed, inflates it into one buffer,
parses it a span at a time and makes rows 2,048 spans at a time (one working worker ~107 MiB over idle
measured alone, ~170 in the server, an idle one keeps ~20-50: its redaction caches, ~15 MiB of
content blocks, and Python's small-object arenas); the collector (~150-280 at the peak, with the load's
timing) holds the three waiting compressed bodies (~23 MiB), the body's rows as Arrow (~30) and DuckDB's
open transaction over them (``duckdb_memory()``: ~125 MiB of in-memory table, ~15 of index and ~12 of
long strings for 30 MiB of Arrow rows), which the checkpoint after a large commit frees; glibc's heap
kept ~150 MiB of freed buffers before its mapping threshold was fixed at 4 MiB. The rest to take is in
DuckDB's transaction (a large request committed in parts), the idle worker and, for OTLP/JSON, the parsed
document (``json.loads`` of 57 MiB: a working worker ~245 MiB; a streaming parser would take it a span at a time).

    .venv/bin/python benchmarks/decode_memory.py --baseline main --repeats 3
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import os
import pickle
import signal
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import ROOT, footer, header, wait_healthy
from benchmarks.agent_workload import encode_protobuf, workload
from collector.cli.serve import DEFAULT_DECODE_WORKERS
from collector.otlp import encode_json

MiB = 1 << 20
WIRE_LIMIT = 16 * MiB  # ServerConfig.max_body_bytes' default
INFLATED_LIMIT = 64 * MiB  # ServerConfig.max_decoded_bytes' default
CONCURRENT = 4  # ServerConfig.max_concurrent_decodes' default: four bodies decode at once
CASES = [("protobuf", None), ("protobuf", "gzip"), ("json", None), ("json", "gzip")]
CONTENT_TYPE = {"protobuf": "application/x-protobuf", "json": "application/json"}


def _encode(spans: list, kind: str) -> bytes:
    return encode_protobuf(spans) if kind == "protobuf" else json.dumps(encode_json(spans)).encode()


def max_body(kind: str, encoding: str | None, seed: int) -> tuple[bytes, int]:
    """(the body as sent, its inflated size), kept between runs (making four takes a minute or two)."""
    cache = Path(tempfile.gettempdir()) / "turnledger-decode-memory" / f"{kind}-{encoding}-{seed}.body"
    if not cache.exists():
        body, inflated = _max_body(kind, encoding, seed)
        cache.parent.mkdir(exist_ok=True)
        cache.with_suffix(".tmp").write_bytes(inflated.to_bytes(8, "big") + body)
        cache.with_suffix(".tmp").rename(cache)
    data = cache.read_bytes()
    return data[8:], int.from_bytes(data[:8], "big")


def _max_body(kind: str, encoding: str | None, seed: int) -> tuple[bytes, int]:
    """The first spans of the workload, as many as the limits take."""
    spans, _ = workload(60_000, content=True, seed=seed)
    limit = (INFLATED_LIMIT if encoding else WIRE_LIMIT) - MiB  # a MiB of room for what one span's size misses
    total, fits = 0, 0
    for fits, span in enumerate(spans):  # noqa: B007 (the count is what we want)
        total += len(_encode([span], kind))
        if total > limit:
            break
    while True:
        raw = _encode(spans[:fits], kind)
        body = gzip.compress(raw) if encoding else raw
        if len(raw) <= limit + MiB and len(body) <= WIRE_LIMIT:
            return body, len(raw)
        fits = fits * 9 // 10


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(port: int, body: bytes, kind: str, encoding: str | None, out: list[int]) -> None:
    headers = {"Content-Type": CONTENT_TYPE[kind]}
    if encoding:
        headers["Content-Encoding"] = encoding
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        conn.request("POST", "/v1/traces", body, headers)
        response = conn.getresponse()
        response.read()
        out.append(response.status)
    finally:
        conn.close()


def _vm_hwm(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1]) * 1024


PAGE = os.sysconf("SC_PAGE_SIZE")


def _resident(pids: list[int]) -> list[int]:
    """Each process's resident bytes, from /proc/PID/statm (cheap enough to read every millisecond)."""
    each = []
    for pid in pids:
        with open(f"/proc/{pid}/statm", "rb") as f:
            each.append(int(f.read().split()[1]) * PAGE)
    return each


class _Sampler(threading.Thread):
    """The peak of the processes' summed resident memory, sampled every millisecond until stopped: what they
    hold at the same moment (a peak shorter than a sample, such as a copy of a few ms, may be missed)."""

    def __init__(self, pids: list[int]) -> None:
        super().__init__(daemon=True)
        self.pids, self.peak, self._done = pids, _resident(pids), threading.Event()

    def run(self) -> None:
        while not self._done.wait(0.001):
            self._sample()

    def _sample(self) -> None:
        now = _resident(self.pids)
        if sum(now) > sum(self.peak):
            self.peak = now

    def stop(self) -> list[int]:
        """Each process's resident bytes at the moment their sum peaked."""
        self._done.set()
        self.join()
        self._sample()
        return self.peak


@dataclass
class Growth:
    together: float  # MiB over idle, the collector and its decode workers at the same moment (sampled)
    server: float  # MiB over idle, the collector's own process (its VmHWM)
    workers: float  # MiB over idle, its decode workers' peaks summed (each its own VmHWM, at any moment)
    statuses: list[int]

    @property
    def bound(self) -> float:
        """The sum of every process's own peak: an upper bound of ``together`` (peaks at different moments add)."""
        return self.server + self.workers


def measure(tree: Path, bodies: list[bytes], kind: str, encoding: str | None, workers: int, folder: Path) -> Growth:
    """One fresh collector from ``tree``: warm up, reset the peaks, post the bodies at once, read the peaks."""
    port = _free_port()
    db = folder / f"m-{time.monotonic_ns()}.duckdb"
    server = subprocess.Popen(
        [sys.executable, "-m", "collector.cli", "serve", "--port", str(port), "--grpc-port", "0", "--db", str(db),
         "--decode-workers", str(workers)],
        cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "TURNLEDGER_TOKEN": "", "PYTHONPATH": str(tree)},
    )  # fmt: skip
    try:
        wait_healthy(port, server)
        root = psutil.Process(server.pid)
        small = _encode(workload(200, content=True, seed=99)[0], kind)
        small = gzip.compress(small) if encoding else small
        statuses: list[int] = []
        threads = [
            threading.Thread(target=_post, args=(port, small, kind, encoding, statuses)) for _ in range(2 * workers)
        ]  # every worker decodes one: their imports are in the idle figure
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(1.0)
        processes = [root, *root.children(recursive=True)]
        idle = {}
        for p in processes:
            Path(f"/proc/{p.pid}/clear_refs").write_text("5")  # VmHWM := VmRSS
            idle[p.pid] = p.memory_info().rss
        statuses = []
        sampler = _Sampler([p.pid for p in processes])
        sampler.start()
        threads = [threading.Thread(target=_post, args=(port, b, kind, encoding, statuses)) for b in bodies]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        at_peak = sampler.stop()
        together = (sum(at_peak) - sum(idle.values())) / MiB
        if os.environ.get("DECODE_MEMORY_VERBOSE"):
            print(
                "      at the peak, over idle:",
                [round((r - idle[p.pid]) / MiB) for r, p in zip(at_peak, processes, strict=True)],
            )
        grown = {p.pid: (_vm_hwm(p.pid) - idle[p.pid]) / MiB for p in processes}
        workers = sum(g for pid, g in grown.items() if pid != root.pid)
        return Growth(together, grown[root.pid], workers, sorted(statuses))
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(120)
        except subprocess.TimeoutExpired:
            server.kill()


def stages(kind: str, encoding: str | None) -> None:
    """Where one body's memory goes in a decode worker: what a worker does, step by step, in this process
    (after a warm-up body), with the growth of resident memory and of its peak after each step."""
    from collector.otlp import decode_protobuf
    from collector.receiver.otlp_http import JSON, PROTOBUF, decode_body, decompress
    from ledger.ingest import prepare
    from ledger.rows import default_prices

    body, _ = max_body(kind, encoding, seed=100)
    small = _encode(workload(200, content=True, seed=99)[0], "protobuf")
    prepare(decode_protobuf(small), default_prices(), redact_content=True).to_arrow()  # imports and caches
    me = psutil.Process()
    Path("/proc/self/clear_refs").write_text("5")
    idle = me.memory_info().rss

    def step(what: str) -> None:
        rss, peak = me.memory_info().rss, _vm_hwm(me.pid)
        print(f"  {what:44s} resident {(rss - idle) / MiB:+6,.0f} MiB, peak {(peak - idle) / MiB:+6,.0f} MiB")

    print(f"\nstages of one {kind}{'+' + encoding if encoding else ''} body in one process (over idle):")
    raw = decompress(body, encoding, INFLATED_LIMIT)
    step(f"inflated ({len(raw) / MiB:.0f} MiB)")
    records = decode_body(raw, PROTOBUF if kind == "protobuf" else JSON)  # lazy, as a worker does
    del raw
    batch = prepare(records, default_prices(), redact_content=True)
    del records
    step("parsed span by span into rows (redacted, priced)")
    arrow = batch.to_arrow()
    del batch
    step("rows as Arrow, Python rows dropped")
    pickled = pickle.dumps(arrow)
    step(f"pickled for the pipe ({len(pickled) / MiB:.0f} MiB)")


def baseline_tree(ref: str, folder: Path) -> Path:
    """``ref``'s tracked files, unpacked: the collector as it was, run with this environment's packages."""
    archive = folder / "baseline.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), ref], check=True)
    tree = folder / "baseline"
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    return tree


def _summary(values: list[float]) -> str:
    median = statistics.median(values)
    return f"{median:7,.0f} MiB" + (f" ({min(values):,.0f}-{max(values):,.0f})" if len(values) > 1 else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=DEFAULT_DECODE_WORKERS, help="--decode-workers of the collector")
    ap.add_argument("--baseline", metavar="REF", help="also measure this commit's collector, alternating")
    ap.add_argument("--case", action="append", choices=[f"{k}{'+' + e if e else ''}" for k, e in CASES])
    ap.add_argument("--stages", action="store_true", help="only: where one gzip protobuf body's memory goes")
    a = ap.parse_args()
    if a.stages:
        header("decode memory: the steps of one maximum-size body in a decode worker")
        stages("protobuf", "gzip")
        footer()
        return
    header(f"decode memory: {CONCURRENT} concurrent maximum-size bodies, --decode-workers {a.workers}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        trees = {"this": ROOT}
        if a.baseline:
            trees = {a.baseline: baseline_tree(a.baseline, folder), **trees}
        for kind, encoding in CASES:
            name = f"{kind}{'+' + encoding if encoding else ''}"
            if a.case and name not in a.case:
                continue
            started = time.monotonic()
            made = [max_body(kind, encoding, seed=100 + i) for i in range(CONCURRENT)]
            bodies = [b for b, _ in made]
            print(
                f"\n{name}: {CONCURRENT} bodies of {statistics.mean(map(len, bodies)) / MiB:.1f} MiB on the wire, "
                f"{statistics.mean(n for _, n in made) / MiB:.1f} MiB inflated (made in {time.monotonic() - started:.0f} s)",
                flush=True,
            )
            results: dict[str, list[Growth]] = {label: [] for label in trees}
            for _ in range(a.repeats):
                for label, tree in trees.items():
                    started = time.monotonic()
                    results[label].append(measure(tree, bodies, kind, encoding, a.workers, folder))
                    print(f"    ({label}: {time.monotonic() - started:.0f} s)", flush=True)
            for label, runs in results.items():
                statuses = sorted({s for g in runs for s in g.statuses})
                print(
                    f"  {label:>12}: peak over idle, together {_summary([g.together for g in runs])}"
                    f"   (each process's own peak summed {_summary([g.bound for g in runs])}: collector"
                    f" {_summary([g.server for g in runs])}, workers {_summary([g.workers for g in runs])})"
                    f"   statuses {statuses}",
                    flush=True,
                )
            if a.baseline:
                ratio = statistics.median(g.together for g in results["this"]) / statistics.median(
                    g.together for g in results[a.baseline]
                )
                print(f"  {'ratio':>12}: x{ratio:.2f} of {a.baseline} (together)")
            print(f"  load {os.getloadavg()[0]:.1f}", flush=True)
    footer()


if __name__ == "__main__":
    main()
