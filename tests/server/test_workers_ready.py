"""A collector starts serving once its decode workers are up and have compiled their redaction detectors.

Before, it answered at once and its first exports waited for a worker to spawn, import and compile
(seconds): the real Claude Code CLI, which gives its telemetry 2 s at exit, lost its last metrics.
"""

from __future__ import annotations

from collector.cli.serve import build_server
from collector.receiver import ServerConfig


def test_start_returns_once_every_worker_is_warm(tmp_path):
    server = build_server(ServerConfig(port=0, db=tmp_path / "ledger.duckdb", decode_workers=2))
    try:
        assert server.decoder.workers == 2
        server.start()
        assert server.decoder.wait_ready(0)  # nothing left to wait for: start() did
        compiled = "__import__('ledger.redact.prefilter', fromlist=['_'])._database.cache_info().currsize"
        assert server.decoder._pool.submit(eval, compiled).result() > 0  # by the warm-up, not by the first body
    finally:
        server.stop()
