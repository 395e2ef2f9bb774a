"""The OTLP/gRPC side of ``ingest_throughput.py``: exporters over gRPC, and which checkouts serve it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import grpc

from collector.receiver.grpc_receiver import EXPORT_METHOD

__all__ = ["export_grpc", "serves_grpc"]


def export_grpc(port: int, bodies: list[bytes], connections: int) -> int:
    """``Export`` every body over ``connections`` gRPC channels (one HTTP/2 connection each, as one
    exporter process has), each waiting for its answer before the next; returns the retryable back-offs."""
    work = list(bodies)
    lock = threading.Lock()
    throttled = [0]
    errors: list[str] = []
    retryable = (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE)

    def exporter() -> None:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            export = channel.unary_unary(EXPORT_METHOD)  # the encoded bodies as they are
            while True:
                with lock:
                    if not work:
                        return
                    body = work.pop(0)
                while True:
                    try:
                        export(body, timeout=120)
                        break
                    except grpc.RpcError as exc:
                        if exc.code() not in retryable:
                            errors.append(f"gRPC {exc.code()}: {exc.details()}")
                            return
                        throttled[0] += 1
                        time.sleep(1)

    threads = [threading.Thread(target=exporter) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"export failed: {errors[:3]}")
    return throttled[0]


def serves_grpc(tree: Path) -> bool:
    """Does that checkout's ``turnledger serve`` take --grpc-port (older ones serve HTTP only)?"""
    return "--grpc-port" in (tree / "collector" / "cli" / "serve.py").read_text()
