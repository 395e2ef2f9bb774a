"""How soon an acknowledged run is queryable, while a dashboard keeps polling.

A real ``CollectorServer`` (in process, on a fresh ledger) takes OTLP/HTTP
requests one after another; two threads poll five dashboard queries through
``ServerClient`` the whole time. For each request: the time from its 200 until
``run_summary`` of its last run answers through the API (the README's promise:
spans and charges at once, runs rows at most half a second behind under load).

Run: ``.venv/bin/python benchmarks/visibility_lag.py [--requests N] [--runs-per-request N]``.
It prints figures; it asserts nothing (``tests/server/test_query_api.py`` checks
that every acknowledged run becomes visible and that no query fails).
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import footer, header
from benchmarks.agent_workload import encode_protobuf, workload
from collector.client import ServerClient
from collector.receiver import CollectorServer, ServerConfig

DASHBOARD = ["cost_per_run", "runs_table", "cache_hit_rate", "model_attribution", "long_tail"]


def _post(port: int, body: bytes) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
    status = conn.getresponse().status
    conn.close()
    return status


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=20, help="requests sent one after another (default 20)")
    ap.add_argument("--runs-per-request", type=int, default=20, help="agent runs in each request (default 20)")
    a = ap.parse_args()
    header("visibility lag: acknowledged -> queryable")
    spans, _ = workload(a.requests * a.runs_per_request * 20, content=False)
    by_trace: dict[str, list] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, []).append(s)
    traces = list(by_trace.values())
    with tempfile.TemporaryDirectory() as tmp:
        server = CollectorServer(ServerConfig(port=0, db=Path(tmp) / "lag.duckdb", decode_workers=0)).start()
        client, port = ServerClient(server.url), int(urlsplit(server.url).port or 0)
        stop = threading.Event()
        answered = [0]

        def dashboard() -> None:
            while not stop.is_set():
                for builder in DASHBOARD:
                    client.query(builder)
                    answered[0] += 1

        readers = [threading.Thread(target=dashboard, daemon=True) for _ in range(2)]
        for t in readers:
            t.start()
        lags = []
        try:
            for i in range(a.requests):
                batch = traces[i * a.runs_per_request : (i + 1) * a.runs_per_request]
                if not batch:
                    break
                assert _post(port, encode_protobuf([s for run in batch for s in run])) == 200
                acked = time.perf_counter()
                while client.query("run_summary", trace_id=batch[-1][0].trace_id).empty:
                    time.sleep(0.002)
                lags.append(time.perf_counter() - acked)
        finally:
            stop.set()
            for t in readers:
                t.join()
            server.stop()
    ms = sorted(x * 1e3 for x in lags)
    print(f"acknowledged -> queryable over {len(ms)} requests of {a.runs_per_request} runs, 2 dashboards polling:")
    print(f"  median {statistics.median(ms):.1f} ms, p95 {ms[int(0.95 * (len(ms) - 1))]:.1f} ms, max {ms[-1]:.1f} ms")
    print(f"  dashboard queries answered meanwhile: {answered[0]}")


if __name__ == "__main__":
    main()
    footer()
