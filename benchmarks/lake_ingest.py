"""End-to-end ingest into one lake with 1 and 2 collectors, beside one collector on a file.

Each configuration starts real `turnledger serve` processes (the file; a lake with its Parquet on
local disk; the same on S3, moto's S3-compatible server), posts the same OTLP protobuf bodies (a
seeded simulate, encoded by the OpenTelemetry SDK as its exporter sends them) from one client
threads per collector (``--clients``), split evenly, and times from the first post to the last acknowledgement
(every 200 means committed). CPU is that of the collector processes (their decode workers
included) and of the PostgreSQL server, per span. Configurations alternate within each round;
the figures are the median and range over rounds, and the ratio to the file's median.

Usage: ``python benchmarks/lake_ingest.py [--rounds N] [--runs N] [--no-s3]``.
A PostgreSQL server (and moto) is started in a temporary directory for the run and stopped after.
"""

from __future__ import annotations

import argparse
import os
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

from tests.lake.postgres import PostgresServer, find_bin_dir, start_server
from tests.lake.s3 import S3Server, start_s3
from tests.lake.team import Body, Collector, simulate_bodies, start_collector

_names = count(1)


@dataclass
class Figures:
    rates: list[float] = field(default_factory=list)  # spans/s
    cpu_us: list[float] = field(default_factory=list)  # CPU µs per span


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
) -> tuple[float, float]:
    collectors = start()
    try:
        postmaster = psutil.Process(int((pg.data_dir / "postmaster.pid").read_text().split()[0]))
        watched = [psutil.Process(c.proc.pid) for c in collectors] + [postmaster]
        senders = [(c, bodies[i :: len(collectors) * clients]) for i, c in enumerate(collectors * clients)]
        cpu0, t0 = _cpu(watched), time.perf_counter()
        with ThreadPoolExecutor(len(senders)) as pool:
            statuses = list(pool.map(lambda sender: [sender[0].post(b) for b in sender[1]], senders))
        elapsed, cpu = time.perf_counter() - t0, _cpu(watched) - cpu0
        if any(s != 200 for got in statuses for s in got):
            raise SystemExit(f"a post was refused: {statuses}")
    finally:
        for c in collectors:
            c.stop()
    return spans / elapsed, cpu / spans * 1e6


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
    p.add_argument("--runs", type=int, default=600, help="simulated runs posted per configuration (default 600)")
    p.add_argument("--clients", type=int, default=4, help="client threads posting to each collector (default 4)")
    p.add_argument("--no-s3", action="store_true", help="leave out the lakes on S3 (moto)")
    a = p.parse_args()
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
                rate, cpu = _run(start, bodies, spans, pg, a.clients)
                figures[name].rates.append(rate)
                figures[name].cpu_us.append(cpu)
                print(f"round {round_no + 1}: {name:26} {rate:8,.0f} spans/s  {cpu:6.0f} µs CPU/span", flush=True)
    finally:
        if s3 is not None:
            s3.stop()
        pg.stop()
    base = statistics.median(figures["file, 1 collector"].rates)
    print(f"\n{spans:,} spans in {len(bodies)} bodies per configuration, {a.rounds} rounds, {os.cpu_count()} cores")
    print(f"{'configuration':26} {'spans/s (median, range)':>30} {'vs file':>8} {'CPU µs/span':>12}")
    for name, f in figures.items():
        rate = statistics.median(f.rates)
        print(
            f"{name:26} {rate:12,.0f} ({min(f.rates):,.0f}–{max(f.rates):,.0f}) {rate / base:8.2f} "
            f"{statistics.median(f.cpu_us):12.0f}"
        )


if __name__ == "__main__":
    main()
