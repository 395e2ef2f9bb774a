"""What a 200 promises: the spans are committed to the DuckDB write-ahead log (fdatasync'd) before it is sent.

Tested exactly as promised: ``turnledger serve`` is killed with SIGKILL (no
shutdown, no checkpoint) right after 200s, while other requests are still in
flight; after a restart every acknowledged span is in the ledger.
"""

from __future__ import annotations

import signal
import threading
from decimal import Decimal

from collector.client import ServerClient

from .conftest import free_port, otlp_json, post_otlp, run_spans, start_cli, wait_healthy


def test_acknowledged_spans_survive_kill_9(tmp_path):
    db = tmp_path / "ledger.duckdb"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_cli("serve", "--port", str(port), "--grpc-port", "0", "--db", str(db))
    try:
        wait_healthy(url)
        acked: list[str] = []  # trace ids whose request got a 200
        lock = threading.Lock()
        enough = threading.Event()
        killed = threading.Event()

        def exporter(worker: int) -> None:
            n = 0
            while not killed.is_set():
                spans = [s for k in range(10) for s in run_spans(f"w{worker}-{n}-{k}")]
                try:
                    status = post_otlp(url, otlp_json(spans)).status
                except OSError:
                    return  # the server died under us: this request was never acknowledged
                if status == 200:
                    with lock:
                        acked.extend(dict.fromkeys(s.trace_id for s in spans))
                        if len(acked) >= 150:
                            enough.set()
                n += 1

        threads = [threading.Thread(target=exporter, args=(w,)) for w in range(3)]
        for t in threads:
            t.start()
        assert enough.wait(60), "the collector acknowledged too little to test"
        proc.send_signal(signal.SIGKILL)  # right after a 200, with other requests in flight
        killed.set()
        proc.wait(10)
        for t in threads:
            t.join(30)
        with lock:
            acknowledged = list(acked)
        wal = db.with_name(db.name + ".wal")
        assert wal.exists() and wal.stat().st_size > 0  # the acknowledged spans live only in the WAL now

        proc = start_cli("serve", "--port", str(port), "--grpc-port", "0", "--db", str(db))
        wait_healthy(url)
        client = ServerClient(url)
        present = set(client.query("runs_table", limit=1_000_000)["trace_id"])
        missing = [t for t in acknowledged if t not in present]
        assert not missing, f"{len(missing)} of {len(acknowledged)} acknowledged runs lost"
        # ...with their exact charges: every run here costs the same
        per_run = client.query_arrow("long_tail", limit=1).column("usd_total")[0].as_py()
        assert per_run == Decimal("0.00753")  # 1000 in + 50 out, then 1000 in + 100 read + 50 out at $3/$15

        proc.send_signal(signal.SIGTERM)  # a clean stop commits, checkpoints and exits 0
        assert proc.wait(30) == 0
        assert not wal.exists() or wal.stat().st_size == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
