"""Hostile HTTP against a real running receiver, over raw sockets where framing matters:
bad chunk sizes, conflicting framing headers, slow bodies, a million attributes, a gzip bomb.
Each gets its documented status (README, "The receiver at the door") and the server keeps serving."""

from __future__ import annotations

import contextlib
import gzip
import socket
import threading
import time
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

import collector.receiver.writer as writer_module
from collector.otlp import decode_protobuf
from ledger.limits import MAX_REQUEST_VALUES, MAX_SPAN_VALUES

from .conftest import count, free_port, gz, otlp_json, post_otlp, request, run_spans, start_cli, wait_healthy

HANG_GUARD_S = 60  # a socket that gets no answer in this long fails the test (never a figure)


def exchange(url: str, raw: bytes, *, then: bytes = b"", pause: float = 0.0) -> tuple[int, bytes, bool]:
    """Send raw bytes (and, after ``pause``, more), read the reply: (status, reply bytes, connection closed)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=HANG_GUARD_S) as sock:
        sock.sendall(raw)
        if then:
            time.sleep(pause)
            with contextlib.suppress(OSError):  # it answered and closed already: the reply says why
                sock.sendall(then)
        reply = _read_reply(sock)
        closed = _closed(sock)
    status = int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/1.1 ") else 0
    return status, reply, closed


def _read_reply(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(h.split(b":")[1]) for h in head.lower().split(b"\r\n") if h.startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(HANG_GUARD_S)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def head(*lines: str) -> bytes:
    return (
        "\r\n".join(["POST /v1/traces HTTP/1.1", "Host: t", "Content-Type: application/json", *lines]) + "\r\n\r\n"
    ).encode()


def assert_still_serving(server, key: str) -> None:
    assert request(f"{server.url}/healthz").status == 200
    assert post_otlp(server.url, otlp_json(run_spans(key))).status == 200
    assert count(server, "SELECT count(*) FROM spans WHERE trace_id = ?", [run_spans(key)[0].trace_id]) == 4


# --- framing: refused by the HTTP parser (400, connection closed) --------------------------------


@pytest.mark.parametrize("size", ["-1", "-FFFF", "FFFFFFFFFFFFFFFFFF", "0x10", "zz"])
def test_a_bad_chunk_size_is_400_and_the_connection_closes(server, size):
    # 300 MB after a "-1" chunk raised the hand-written server's memory by 550 MB and was accepted.
    status, reply, closed = exchange(
        server.url, head("Transfer-Encoding: chunked") + f"{size}\r\n".encode() + b"x" * 4096
    )
    assert (status, closed) == (400, True), reply
    assert_still_serving(server, f"after-chunk-{size}")


def test_a_huge_but_well_formed_chunk_is_413_once_past_the_limit(make_server):
    server = make_server(max_body_bytes=100_000)
    raw = head("Transfer-Encoding: chunked") + b"7FFFFFFFFFFFFFFF\r\n"  # 2^63 - 1 bytes announced
    status, reply, closed = exchange(server.url, raw, then=b"x" * 300_000)
    assert (status, closed) == (413, True), reply
    assert b"100000-byte limit" in reply
    assert_still_serving(server, "after-huge-chunk")


@pytest.mark.parametrize(
    "framing",
    [
        ("Content-Length: 5", "Transfer-Encoding: chunked"),
        ("Transfer-Encoding: chunked", "Content-Length: 5"),
        ("Content-Length: 5", "Content-Length: 5"),
        ("Content-Length: 5", "Content-Length: 500"),
        ("Content-Length: 5, 5",),
        ("Content-Length: -5",),
    ],
)
def test_conflicting_framing_headers_are_400(server, framing):
    status, reply, closed = exchange(server.url, head(*framing) + b"5\r\n{}{}{\r\n0\r\n\r\n")
    assert (status, closed) == (400, True), reply
    assert count(server, "SELECT count(*) FROM spans") == 0
    assert_still_serving(server, f"after-{'-'.join(framing)}")


# --- slow bodies: they hold a coroutine until their deadline, never a decode slot ---------------


def test_eight_slow_bodies_do_not_stop_three_normal_exports(make_server):
    # The hand-written server took a decode slot before reading the body: six trickling clients
    # took all of them, and normal exports got 503 for as long as they trickled.
    server = make_server(body_timeout_s=10.0, max_concurrent_decodes=4)  # generous: normal exports end first
    events: list[tuple[str, int]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def slow(i: int) -> None:
        host, port = server.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=HANG_GUARD_S) as sock:
            sock.sendall(head("Content-Length: 100000"))
            sock.settimeout(0.2)
            reply = b""
            while not reply and not stop.is_set():
                try:
                    sock.sendall(b" ")  # one byte, then wait: far slower than any exporter
                    reply = sock.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    break
        with lock:
            events.append((f"slow-{i}", int(reply.split(b" ", 2)[1]) if reply else 0))

    slow_clients = [threading.Thread(target=slow, args=(i,)) for i in range(8)]
    for t in slow_clients:
        t.start()
    time.sleep(0.5)  # they are trickling (no assertion depends on how long)
    for n in range(3):
        status = post_otlp(server.url, otlp_json(run_spans(f"normal-{n}"))).status
        with lock:
            events.append((f"normal-{n}", status))
    for t in slow_clients:
        t.join(HANG_GUARD_S)
    stop.set()
    assert [e for e in events[:3]] == [("normal-0", 200), ("normal-1", 200), ("normal-2", 200)], events
    assert sorted(events[3:]) == [(f"slow-{i}", 408) for i in range(8)], events  # each given up on, bounded
    assert count(server, "SELECT count(*) FROM spans") == 12
    assert_still_serving(server, "after-slow")


# --- memory: a million attributes, a gzip bomb -------------------------------------------------


def million_attributes() -> bytes:
    """1,000,000 attributes with distinct keys and values, 4,000 on each of 250 spans (every span within
    the per-list limit, so only the per-request bound can refuse it): ~20 MB inflated, ~5 MB gzipped."""
    req = ExportTraceServiceRequest()
    spans = req.resource_spans.add().scope_spans.add().spans
    for s in range(250):
        sp = spans.add(trace_id=b"\x01" * 16, span_id=(s + 1).to_bytes(8, "big"), name="many")
        sp.start_time_unix_nano, sp.end_time_unix_nano = 1_790_000_000_000_000_000, 1_790_000_000_000_000_001
        sp.attributes.extend(KeyValue(key=f"k{i}", value=AnyValue(string_value=f"v{s}-{i}")) for i in range(4000))
    return req.SerializeToString()


# The documented bound (README, "The receiver at the door"): a request being decoded holds its
# body, its inflated copy and the parsed message (at most PARSE_FACTOR x the inflated size), and
# the Python values of at most MAX_REQUEST_VALUES attribute values (VALUE_COST bytes each).
PARSE_FACTOR = 25
VALUE_COST = 512


def _peak_rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM")).split()[1]) / 1024


def test_a_million_attribute_gzip_body_is_413_within_the_memory_bound(tmp_path):
    body = million_attributes()
    wire = gzip.compress(body)
    with pytest.raises(Exception, match="attribute values in one request"):
        decode_protobuf(body)
    port = free_port()
    # Its own process, decoding on its own threads, so its peak RSS is the whole cost.
    proc = start_cli(
        "serve", "--port", str(port), "--grpc-port", "0", "--db", str(tmp_path / "l.duckdb"), "--decode-workers", "0"
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url)
        warm = post_otlp(url, otlp_json(run_spans("warm-up")), headers={})
        assert warm.status == 200  # every module a decode uses is loaded before the baseline
        before = _peak_rss_mib(proc.pid)
        r = post_otlp(url, wire, "application/x-protobuf", {"Content-Encoding": "gzip"})
        growth = _peak_rss_mib(proc.pid) - before
        assert r.status == 413, r.body
        bound = (len(wire) + (1 + PARSE_FACTOR) * len(body) + MAX_REQUEST_VALUES * VALUE_COST) / 2**20
        assert growth < bound, f"peak RSS grew {growth:.0f} MiB, bound {bound:.0f} MiB"
        assert post_otlp(url, otlp_json(run_spans("after-million"))).status == 200
    finally:
        proc.terminate()
        proc.wait(HANG_GUARD_S)


def test_a_span_past_the_value_bound_is_rejected_alone(server):
    req = ExportTraceServiceRequest()
    sp = req.resource_spans.add().scope_spans.add().spans.add(trace_id=b"\x02" * 16, span_id=b"\x03" * 8, name="x")
    sp.start_time_unix_nano, sp.end_time_unix_nano = 1_790_000_000_000_000_000, 1_790_000_000_000_000_001
    for e in range(MAX_SPAN_VALUES // 4000 + 1):  # each event within the per-list limit, the span past its bound
        sp.events.add(name=f"e{e}").attributes.extend(
            KeyValue(key=f"k{i}", value=AnyValue(int_value=i)) for i in range(4000)
        )
    good = run_spans("beside-the-big-one")
    (span,) = decode_protobuf(req.SerializeToString())
    assert "more than 16384 attribute values" in span.problem
    assert post_otlp(server.url, req.SerializeToString(), "application/x-protobuf").status == 200
    assert post_otlp(server.url, otlp_json(good)).status == 200
    assert count(server, "SELECT count(*) FROM spans") == 4


@pytest.mark.parametrize("workers", [0, 1], ids=["in-process", "decode-worker"])
def test_a_gzip_bomb_is_413_and_the_server_keeps_serving(make_server, workers):
    """With a decode worker the compressed bytes cross the pipe and the worker inflates them (#41 item 7):
    the same bound, the same 413, and a worker that still decodes the next body."""
    server = make_server(max_decoded_bytes=8 * 2**20, decode_workers=workers)
    bomb = gzip.compress(b" " * (1 << 30), compresslevel=9)  # 1 GiB of spaces in ~1 MB
    assert len(bomb) < 2 * 2**20
    r = post_otlp(server.url, bomb, headers={"Content-Encoding": "gzip"})
    assert r.status == 413 and "inflates past the 8388608-byte limit" in r.json()["message"]
    truncated = post_otlp(server.url, gz(otlp_json(run_spans("cut")))[:-9], headers={"Content-Encoding": "gzip"})
    assert truncated.status == 400 and "gzip body is truncated" in truncated.json()["message"]
    assert post_otlp(server.url, gz(otlp_json(run_spans("gz"))), headers={"Content-Encoding": "gzip"}).status == 200
    assert_still_serving(server, "after-bomb")


def test_a_request_head_past_64_kib_is_400(server):
    status, reply, closed = exchange(server.url, head(*(f"X-Pad-{i}: {'a' * 1000}" for i in range(80))))
    assert (status, closed) == (400, True), reply
    assert_still_serving(server, "after-big-head")


def test_a_connection_that_never_finishes_its_head_is_closed_at_the_deadline(make_server):
    server = make_server(body_timeout_s=2.0)
    host, port = server.url.removeprefix("http://").split(":")
    with (
        socket.create_connection((host, int(port)), timeout=HANG_GUARD_S) as silent,
        socket.create_connection((host, int(port)), timeout=HANG_GUARD_S) as half,
    ):
        half.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: t\r\n")  # and nothing more
        assert_still_serving(server, "beside-idle-connections")
        assert _closed(silent) and _closed(half)  # closed by the server, not left open forever


def test_healthz_without_the_token_is_liveness_only(make_server):
    server = make_server(token="t0ken")
    assert request(f"{server.url}/healthz").json() == {"status": "ok", "service": "turnledger", "auth": "bearer token"}
    full = request(f"{server.url}/healthz", headers={"Authorization": "Bearer t0ken"}).json()
    assert full["db"] == str(server.db_path) and full["writer"]["alive"]


def test_no_200_before_the_commit_and_503_when_it_does_not_come_in_time(make_server, monkeypatch):
    server = make_server(ack_timeout_s=1.0)
    real, gate = writer_module.write, threading.Event()

    def held(con, batches, **kw):  # the commit waits until the test lets it go
        gate.wait(HANG_GUARD_S)
        return real(con, batches, **kw)

    monkeypatch.setattr(writer_module, "write", held)
    r = post_otlp(server.url, otlp_json(run_spans("held")))
    assert r.status == 503 and "not committed within 1.0 s" in r.json()["message"]
    gate.set()
    # The retry waits as long as a commit may take on a loaded machine: what is asserted is the outcome.
    monkeypatch.setattr(server.config, "ack_timeout_s", HANG_GUARD_S)
    assert post_otlp(server.url, otlp_json(run_spans("held"))).status == 200  # the retry: charged once
    assert count(server, "SELECT count(*) FROM charges") == 2
