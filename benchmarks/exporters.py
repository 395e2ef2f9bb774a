"""The exporters ``ingest_throughput.py`` feeds a server with: OTLP/HTTP and OTLP/gRPC, each
exporter on its own connection sending one body at a time and waiting for its answer (as the
SDK's BatchSpanProcessor does), backing off when told to."""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, closing
from pathlib import Path
from typing import Any

import grpc

from collector.receiver.grpc_receiver import EXPORT_METHOD

__all__ = ["export_grpc", "export_http", "serves_grpc"]


class ExportFailed(Exception):
    """An answer no retry can fix: the benchmark stops."""


def _run_exporters(
    bodies: list[bytes],
    connections: int,
    connect: Callable[[], AbstractContextManager[Any]],
    send: Callable[[Any, bytes], int],
) -> int:
    """Every body sent by ``connections`` exporters, each on its own ``connect()`` and sending with
    ``send(connection, body)`` (which returns how often it was told to back off); the back-offs."""
    work = list(bodies)
    lock = threading.Lock()
    throttled = [0]
    errors: list[str] = []

    def exporter() -> None:
        with connect() as conn:
            while True:
                with lock:
                    if not work:
                        return
                    body = work.pop(0)
                try:
                    backed_off = send(conn, body)
                except ExportFailed as exc:
                    errors.append(str(exc))
                    return
                with lock:
                    throttled[0] += backed_off

    threads = [threading.Thread(target=exporter) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"export failed: {errors[:3]}")
    return throttled[0]


def _post(conn: http.client.HTTPConnection, body: bytes) -> int:
    backed_off = 0
    while True:
        conn.request("POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"})
        r = conn.getresponse()
        r.read()
        if r.status == 200:
            return backed_off
        if r.status not in (429, 503):
            raise ExportFailed(f"HTTP {r.status}")
        backed_off += 1
        time.sleep(float(r.getheader("Retry-After", "1")))


def export_http(port: int, bodies: list[bytes], connections: int) -> int:
    """POST every body over ``connections`` keep-alive connections; returns the 429/503 back-offs."""
    return _run_exporters(
        bodies, connections, lambda: closing(http.client.HTTPConnection("127.0.0.1", port, timeout=120)), _post
    )


_RETRYABLE = (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE)


def _call(export: grpc.UnaryUnaryMultiCallable, body: bytes) -> int:
    backed_off = 0
    while True:
        try:
            export(body, timeout=120)
            return backed_off
        except grpc.RpcError as exc:
            if exc.code() not in _RETRYABLE:
                raise ExportFailed(f"gRPC {exc.code()}: {exc.details()}") from None
            backed_off += 1
            time.sleep(1)


class _Channel:
    """One gRPC channel (one HTTP/2 connection, as one exporter process has) and its Export method."""

    def __init__(self, port: int) -> None:
        self._channel = grpc.insecure_channel(f"127.0.0.1:{port}")

    def __enter__(self) -> grpc.UnaryUnaryMultiCallable:
        return self._channel.unary_unary(EXPORT_METHOD)  # the encoded bodies as they are

    def __exit__(self, *exc: object) -> None:
        self._channel.close()


def export_grpc(port: int, bodies: list[bytes], connections: int) -> int:
    """``Export`` every body over ``connections`` gRPC channels; returns the retryable back-offs."""
    return _run_exporters(bodies, connections, lambda: _Channel(port), _call)


def serves_grpc(tree: Path) -> bool:
    """Does that checkout's ``turnledger serve`` take --grpc-port (older ones serve HTTP only)?"""
    return "--grpc-port" in (tree / "collector" / "cli" / "serve.py").read_text()
