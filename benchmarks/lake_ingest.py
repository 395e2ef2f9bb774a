"""End-to-end ingest into one lake with 1 and 2 collectors, beside one collector on a file.

Each configuration starts real `turnledger serve` processes (the file; a lake with its Parquet on
local disk; the same on S3, moto's S3-compatible server), posts the same OTLP protobuf bodies (a
seeded simulate, encoded by the OpenTelemetry SDK as its exporter sends them) from one client
threads per collector (``--clients``), split evenly, and times from the first post to the last acknowledgement
(every 200 means committed). CPU per span is that of the collector processes (their decode workers
included) and of the PostgreSQL server, apart; "busy cores" is all that CPU over the elapsed time
(below the core count: the ingest waits on something else than CPU, the serialized commit);
spans per commit and milliseconds per commit come from each collector's writer figures (``/healthz``).
Configurations alternate within each round; the figures are the median and range over rounds,
and the ratio to the file's median. Each configuration starts on an empty ledger.

Usage: ``python benchmarks/lake_ingest.py [--rounds N] [--runs N] [--no-s3]`` (the defaults take
about 5 minutes on a loaded 2-core machine). A PostgreSQL server (and moto) is started in a
temporary directory for the run and stopped after.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import footer, header
from tests.lake.postgres import PostgresServer, find_bin_dir, start_server
from tests.lake.s3 import S3Server, start_s3
from tests.lake.team import Body, Collector, simulate_bodies, start_collector
from tests.server.conftest import request

_names = count(1)


@dataclass
class Round:
    rate: float  # spans/s
    collector_us: float  # collectors' CPU µs per span (decode workers included)
    postgres_us: float  # the PostgreSQL server's CPU µs per span
    busy_cores: float  # all that CPU over the elapsed time
    spans_per_commit: float  # how many spans the writers coalesced into each commit
    ms_per_commit: float  # elapsed over all collectors' commits: one at a time on a lake


@dataclass
class Figures:
    rounds: list[Round] = field(default_factory=list)

    def median(self, figure: str) -> float:
        return statistics.median(getattr(r, figure) for r in self.rounds)


def _cpu(processes: list[psutil.Process]) -> float:
    total = 0.0
    for proc in processes:
        for p in [proc, *proc.children(recursive=True)]:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.NoSuchProcess:
                pass
    return total


def _run(
    start: Callable[[], list[Collector]], bodies: list[Body], spans: int, pg: PostgresServer, clients: int
) -> Round:
    collectors = start()
    try:
        postmaster = [psutil.Process(int((pg.data_dir / "postmaster.pid").read_text().split()[0]))]
        watched = [psutil.Process(c.proc.pid) for c in collectors]
        senders = [(c, bodies[i :: len(collectors) * clients]) for i, c in enumerate(collectors * clients)]
        cpu0, pg0, t0 = _cpu(watched), _cpu(postmaster), time.perf_counter()
        with ThreadPoolExecutor(len(senders)) as pool:
            statuses = list(pool.map(lambda sender: [sender[0].post(b) for b in sender[1]], senders))
        elapsed, cpu, pg_cpu = time.perf_counter() - t0, _cpu(watched) - cpu0, _cpu(postmaster) - pg0
        if any(s != 200 for got in statuses for s in got):
            raise SystemExit(f"a post was refused: {statuses}")
        commits = sum(request(f"{c.url}/healthz").json()["writer"]["batches"] for c in collectors)
    finally:
        for c in collectors:
            c.stop()
    per_span = 1e6 / spans
    return Round(
        spans / elapsed, cpu * per_span, pg_cpu * per_span, (cpu + pg_cpu) / elapsed, spans / commits,
        elapsed / commits * 1000,
    )  # fmt: skip


def _lake(pg: PostgresServer, data: str, n: int) -> Callable[[], list[Collector]]:
    def start() -> list[Collector]:
        target = f"ducklake:postgres:{pg.create_database(f'bench_{next(_names)}')}"
        where = data if data.startswith("s3://") else tempfile.mkdtemp(prefix="lake-bench-", dir=data)
        return [start_collector(target, where, "--maintain-every", "0") for _ in range(n)]

    return start


def _file(folder: str) -> Callable[[], list[Collector]]:
    def start() -> list[Collector]:
        return [start_collector(str(Path(folder) / f"bench_{next(_names)}.duckdb"), folder)]

    return start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    p.add_argument("--runs", type=int, default=200, help="simulated runs posted per configuration (default 200)")
    p.add_argument("--clients", type=int, default=4, help="client threads posting to each collector (default 4)")
    p.add_argument("--no-s3", action="store_true", help="leave out the lakes on S3 (moto)")
    a = p.parse_args()
    header("lake ingest: file vs lake collectors")
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise SystemExit("PostgreSQL server binaries are not installed (apt-get install postgresql)")
    bodies = list(simulate_bodies(a.runs, per_body=128))
    spans = sum(len(b.span_keys()) for b in bodies)
    pg = start_server(bin_dir)
    s3: S3Server | None = None if a.no_s3 else start_s3()
    folder = tempfile.mkdtemp(prefix="lake-bench-")
    try:
        configs: dict[str, Callable[[], list[Collector]]] = {
            "file, 1 collector": _file(folder),
            "lake local, 1 collector": _lake(pg, folder, 1),
            "lake local, 2 collectors": _lake(pg, folder, 2),
        }
        if s3 is not None:
            os.environ.update(s3.environment())  # the collectors started after inherit them
            s3.create_bucket("bench")
            configs["lake S3, 1 collector"] = _lake(pg, "s3://bench/one", 1)
            configs["lake S3, 2 collectors"] = _lake(pg, "s3://bench/two", 2)
        figures = {name: Figures() for name in configs}
        for round_no in range(a.rounds):
            for name, start in configs.items():
                got = _run(start, bodies, spans, pg, a.clients)
                figures[name].rounds.append(got)
                print(
                    f"round {round_no + 1}: {name:26} {got.rate:8,.0f} spans/s  {got.collector_us:6.0f} + "
                    f"{got.postgres_us:4.0f} µs CPU/span (collectors + PostgreSQL)  {got.busy_cores:.2f} busy cores  "
                    f"{got.spans_per_commit:.0f} spans/commit  {got.ms_per_commit:.0f} ms/commit",
                    flush=True,
                )
    finally:
        if s3 is not None:
            s3.stop()
        pg.stop()
        shutil.rmtree(pg.root, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)
    _table(figures, spans, len(bodies), a.rounds)


def _table(figures: dict[str, Figures], spans: int, bodies: int, rounds: int) -> None:
    base = figures["file, 1 collector"].median("rate")
    print(f"\n{spans:,} spans in {bodies} bodies per configuration, {rounds} rounds, {os.cpu_count()} cores, "
          f"1-min load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"{'configuration':26} {'spans/s: median (range)':>26} {'vs file':>8} "
          f"{'CPU µs/span: collectors + PostgreSQL':>37} {'busy cores':>11} {'spans/commit':>13} {'ms/commit':>10}")  # fmt: skip
    for name, f in figures.items():
        rates = [r.rate for r in f.rounds]
        rate = f.median("rate")
        print(
            f"{name:26} {rate:10,.0f} ({min(rates):,.0f}–{max(rates):,.0f}) {rate / base:8.2f} "
            f"{f.median('collector_us'):28.0f} + {f.median('postgres_us'):5.0f} {f.median('busy_cores'):11.2f} "
            f"{f.median('spans_per_commit'):13.0f} {f.median('ms_per_commit'):10.0f}"
        )


if __name__ == "__main__":
    main()
    footer()
