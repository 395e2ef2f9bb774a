"""Hostile requests, drawn by hypothesis, at a running ``turnledger serve`` over OTLP/HTTP and OTLP/gRPC.

Judged by the OTLP specification through the public surface only (port, path, status
codes), so it holds whatever serves HTTP: no request gets a 500 (HTTP) or ``INTERNAL`` /
``UNKNOWN`` (gRPC), a 200 carries an ``ExportTraceServiceResponse``, the receiver still
takes a good export afterwards, and its memory (the server and its decode workers) grows
by less than the documented bound for one request at a time.

Bounded: a fixed number of examples per transport (``FUZZ_EXAMPLES``), derandomized so a
run is reproducible (CI repeats the same inputs; raise the count or drop ``derandomize``
to explore), no deadline. ``fuzz_export_atheris.py`` adds a coverage-guided run of the
shared export path for a fixed number of iterations.
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import grpc
import psutil
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace.export import SpanExportResult

from collector.receiver.grpc_receiver import EXPORT_METHOD
from tests import hostile_spans as h

from .conftest import ROOT, free_port, otlp_json, run_spans, start_cli, wait_healthy
from .test_ingest_http import protobuf_body, sdk_spans

TOKEN = "fuzz-token"
FUZZ_EXAMPLES = 150  # per transport: ~1-2 min for both on a loaded 2-core machine
ATHERIS_RUNS = 10_000
MAX_BODY_MB = 1
MiB = 1024 * 1024
# The documented bound (README, "Limits"): one request in flight holds at most its wire body,
# its inflated body (64 MiB for `turnledger serve`) and that body's rows. Requests go one at a
# time here, and the bodies that inflate far decode to nothing, so the receiver's peak stays
# within three inflated bodies of its idle size.
MEMORY_BOUND = 3 * 64 * MiB
FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads peak memory from /proc")
HANG_GUARD_S = 60  # a socket timeout, only so a hung server fails the test instead of stalling CI


@dataclass
class Receiver:
    proc: subprocess.Popen[str]
    url: str
    http_port: int
    grpc_port: int

    def _processes(self) -> list[psutil.Process]:
        root = psutil.Process(self.proc.pid)
        return [root, *root.children(recursive=True)]

    def rss(self) -> int:
        """Resident memory of the server and its decode workers now."""
        return sum(p.memory_info().rss for p in self._processes())

    def peak_rss(self) -> int:
        """The most each process has had resident at once since ``idle_rss`` (Linux ``VmHWM``), summed."""
        return sum(_vm_hwm(p.pid) for p in self._processes())

    def idle_rss(self) -> int:
        """Resident memory now, with each process's peak reset to it (``clear_refs``: we own the processes)."""
        for p in self._processes():
            Path(f"/proc/{p.pid}/clear_refs").write_text("5")
        return self.rss()

    def takes_a_good_export(self) -> bool:
        spans = sdk_spans(2)
        grpc_ok = GrpcExporter(endpoint=f"http://127.0.0.1:{self.grpc_port}", insecure=True,
                               headers=(("authorization", f"Bearer {TOKEN}"),), timeout=30).export(spans)  # fmt: skip
        http_ok = HttpExporter(endpoint=f"{self.url}/v1/traces", headers={"Authorization": f"Bearer {TOKEN}"},
                               timeout=30).export(spans)  # fmt: skip
        return grpc_ok is SpanExportResult.SUCCESS and http_ok is SpanExportResult.SUCCESS


@pytest.fixture(scope="module")
def receiver(tmp_path_factory) -> Iterator[Receiver]:
    """`turnledger serve` as an operator runs it (one decode worker: a 2-core machine), both transports on."""
    db = tmp_path_factory.mktemp("fuzz") / "ledger.duckdb"
    http_port, grpc_port = free_port(), free_port()
    proc = start_cli(
        "serve", "--port", str(http_port), "--grpc-port", str(grpc_port), "--db", str(db),
        "--decode-workers", "1", "--max-body-mb", str(MAX_BODY_MB),
        env={"TURNLEDGER_TOKEN": TOKEN},
    )  # fmt: skip
    r = Receiver(proc, f"http://127.0.0.1:{http_port}", http_port, grpc_port)
    try:
        wait_healthy(r.url)
        for _ in range(3):  # warm: imports, price book, decode worker, DuckDB caches
            assert r.takes_a_good_export()
        yield r
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
        print(out[-5000:])


def _vm_hwm(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmHWM:", 1)[1].split()[0]) * 1024  # psutil reports no peak


def _still_serving_within_bound(receiver: Receiver, before: int) -> None:
    assert receiver.proc.poll() is None, "the receiver died"
    assert receiver.takes_a_good_export()
    peak, now = receiver.peak_rss() - before, receiver.rss() - before
    assert peak < MEMORY_BOUND, f"peak RSS {peak / MiB:.0f} MiB over the idle receiver's"
    assert now < MEMORY_BOUND, f"RSS grew by {now / MiB:.0f} MiB"
    print(f"fuzzed receiver: peak {peak / MiB:.0f} MiB, now {now / MiB:.0f} MiB over idle")


# --- bodies ---------------------------------------------------------------------------------


@cache
def _valid_protobuf() -> tuple[bytes, ...]:
    return (h.must_show_protobuf(), protobuf_body(sdk_spans(3)))


@cache
def _valid_json() -> tuple[bytes, ...]:
    return (h.must_show_json(), otlp_json(run_spans("fuzz")))


@cache
def _gzip_bomb() -> bytes:
    """768 MiB of zeros in ~0.8 MiB of gzip: past the inflate limit many times over (compressed a MiB at a time)."""
    z = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    zeros = bytes(MiB)
    return b"".join(z.compress(zeros) for _ in range(768)) + z.flush()


_otlp_numbers = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80).map(str),  # OTLP/JSON int64 as text, past its range too
    st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-0", "0x10", ""]),
    st.floats(allow_nan=False, allow_infinity=False),
)
_json_leaves = st.one_of(st.none(), st.booleans(), _otlp_numbers, st.text(max_size=40))
_json_values = st.recursive(
    _json_leaves,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=30,
)


@st.composite
def _mutated_json(draw: st.DrawFn) -> bytes:
    """A valid export with one value somewhere replaced: wrong types, huge or negative numbers, new shapes."""
    doc = json.loads(draw(st.sampled_from(_valid_json())))
    node: Any = doc
    for _ in range(draw(st.integers(min_value=0, max_value=12))):
        children = (
            list(node.items()) if isinstance(node, dict) else list(enumerate(node)) if isinstance(node, list) else []
        )
        containers = [(k, v) for k, v in children if isinstance(v, dict | list)]
        if not containers:
            break
        key, child = draw(st.sampled_from(containers))
        if draw(st.booleans()):
            node = child
            continue
        node[key] = draw(_json_values)
        break
    else:
        if isinstance(node, dict) and node:
            node[draw(st.sampled_from(sorted(node)))] = draw(_json_values)
    return json.dumps(doc).encode()


@st.composite
def _mutated_bytes(draw: st.DrawFn, sources: tuple[bytes, ...]) -> bytes:
    """A valid body with bytes flipped, inserted, deleted or cut: protobuf framing and lengths gone wrong."""
    data = bytearray(draw(st.sampled_from(sources)))
    for _ in range(draw(st.integers(min_value=1, max_value=8))):
        at = draw(st.integers(min_value=0, max_value=max(0, len(data) - 1)))
        op = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "varint"]))
        if op == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 16))]
        elif op == "truncate":
            del data[at:]
        else:  # a length or number made huge: ten bytes of 0xff is a varint past 64 bits
            data[at:at] = b"\xff" * draw(st.integers(1, 11))
    return bytes(data)


def _deep(kind: str) -> st.SearchStrategy[bytes]:
    depth = st.integers(min_value=1, max_value=3000)
    return depth.map(h.deep_protobuf) if kind == "protobuf" else depth.map(h.deep_json)


def _huge_counts() -> st.SearchStrategy[bytes]:
    value = st.one_of(
        st.integers(-(2**80), 2**80).map(lambda n: {"intValue": str(n)}),
        st.sampled_from(["NaN", "Infinity", "-1e308"]).map(lambda x: {"doubleValue": x}),
        _json_values.map(lambda v: {"intValue": v}),
    )
    return st.lists(st.tuples(st.integers(1, 50), value), min_size=1, max_size=5).map(
        lambda calls: h.request_json([h.chat(n, input_tokens=v) for n, v in calls])
    )


protobuf_bodies = st.one_of(
    st.binary(max_size=2048),
    _mutated_bytes(_valid_protobuf()),
    st.sampled_from(_valid_protobuf()),
    _deep("protobuf"),
)
json_bodies = st.one_of(
    _mutated_json(),
    _mutated_bytes(_valid_json()),
    _json_values.map(lambda v: json.dumps(v).encode()),  # wrong shapes from the top
    _huge_counts(),
    _deep("json"),
)


# --- OTLP/HTTP ------------------------------------------------------------------------------
# Most requests are well-formed at the door (the right token, media type and framing), so the
# fuzzing reaches the decoders; the rest try the door itself.

_HOSTILE_TYPES = ["application/protobuf", "APPLICATION/JSON", "application/json; charset=utf-8", "text/plain", "",
                  "application/x-protobuf, application/json", "multipart/form-data", None]  # fmt: skip
_ENCODINGS = [None, None, None, "gzip", "gzip", "deflate", "identity", "br", "GZIP", "gzip, gzip", "", "x-gzip"]
_FRAMINGS = ["length"] * 4 + ["chunked"] * 2 + ["short-length", "long-length", "no-length", "bad-length",
                                               "bad-chunk", "length+chunked", "two-lengths"]  # fmt: skip
_CHUNK_SIZES = [b"-1", b"-0", b"fffffffffffffffff", b"zz", b"1" * 40, b" 5", b"5;ext=1", b"0x5", b"+5"]
_AUTH = {"good": f"Bearer {TOKEN}", "scheme-case": f"bEaReR {TOKEN}", "wrong": "Bearer nope", "basic": f"Basic {TOKEN}"}
_AUTH_CHOICES = ["good"] * 8 + [*_AUTH, None]
_EXTRA_HEADERS = [("Expect", "100-continue"), ("X-Long", "v" * 8000), ("Transfer-Encoding", "identity")]


def http_request(body: bytes, headers: list[tuple[str, str]], framing: str = "length", chunk: int = 65536,
                 bad_chunk: bytes = b"-1") -> bytes:  # fmt: skip
    """A whole HTTP/1.1 POST /v1/traces (``Connection: close``) with the body framed as ``framing`` says."""
    headers = [("Host", "127.0.0.1"), ("Connection", "close"), *headers]
    length = {"length": len(body), "short-length": len(body) // 2, "long-length": len(body) + 100}.get(framing)
    if length is not None:
        headers.append(("Content-Length", str(length)))
    elif framing == "two-lengths":
        headers += [("Content-Length", str(len(body))), ("Content-Length", str(len(body) + 1))]
    if framing in ("chunked", "bad-chunk", "length+chunked"):
        headers.append(("Transfer-Encoding", "chunked"))
        if framing == "length+chunked":
            headers.append(("Content-Length", str(len(body))))
        chunks = [body[i : i + chunk] for i in range(0, len(body), chunk)]
        framed = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks)
        body = (bad_chunk + b"\r\n" if framing == "bad-chunk" else b"") + framed + b"0\r\n\r\n"
    head = "POST /v1/traces HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    return head.encode("latin-1") + body


def _bomb(framing: str) -> bytes:
    headers = [
        ("Content-Type", "application/x-protobuf"),
        ("Content-Encoding", "gzip"),
        ("Authorization", _AUTH["good"]),
    ]
    return http_request(_gzip_bomb(), headers, framing)


@st.composite
def http_exports(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["application/x-protobuf", "application/json"]))
    body = draw(protobuf_bodies if kind == "application/x-protobuf" else json_bodies)
    encoding = draw(st.sampled_from(_ENCODINGS))
    if encoding in ("gzip", "GZIP", "x-gzip") and draw(st.booleans()):
        body = gzip.compress(body)
    elif encoding == "deflate" and draw(st.booleans()):
        body = zlib.compress(body)
    ctype = draw(st.sampled_from([kind] * 12 + _HOSTILE_TYPES))
    auth = draw(st.sampled_from(_AUTH_CHOICES))
    headers = [("Content-Type", ctype)] if ctype is not None else []
    headers += [("Content-Encoding", encoding)] if encoding is not None else []
    headers += [("Authorization", _AUTH[auth])] if auth is not None else []
    if draw(st.integers(0, 3)) == 0:
        headers.append(draw(st.sampled_from(_EXTRA_HEADERS)))
    framing = draw(st.sampled_from(_FRAMINGS))
    if framing == "bad-length":
        headers.append(("Content-Length", draw(st.sampled_from(["-1", "1e3", "", " 12 ", "0x10", "9" * 30]))))
    chunk = draw(st.integers(min_value=1, max_value=max(1, len(body))))
    return http_request(body, headers, framing, chunk, draw(st.sampled_from(_CHUNK_SIZES)))


def _exchange(port: int, raw: bytes) -> bytes:
    """Send a whole request, say we are done (so a server waiting for more reads EOF), read the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD_S) as s:
        try:
            s.sendall(raw)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # it answered and closed before the whole body went: read that answer
        out = bytearray()
        try:
            while chunk := s.recv(65536):
                out += chunk
        except ConnectionResetError:
            pass  # closed with our unread body in its buffer (the kernel resets): what came before counts
        return bytes(out)


def _check_http_answer(answer: bytes) -> None:
    assert answer.startswith(b"HTTP/1."), f"no HTTP answer: {answer[:200]!r}"
    head, _, body = answer.partition(b"\r\n\r\n")
    while head.split(b" ", 2)[1].startswith(b"1"):  # an interim answer (100 Continue): the final one follows
        head, _, body = body.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert status != 500 and (status < 500 or status == 503), head  # 503: overload, retryable (OTLP/HTTP)
    if status == 200:
        ctype = next((line.split(b":", 1)[1].strip() for line in head.split(b"\r\n") if line.lower().startswith(b"content-type:")), b"")  # fmt: skip
        if ctype.startswith(b"application/json"):
            assert isinstance(json.loads(body), dict)
        else:
            ExportTraceServiceResponse.FromString(body)


def test_hostile_http_requests_never_get_a_500_and_the_receiver_keeps_serving(receiver):
    before = receiver.idle_rss()

    @FUZZ
    @given(http_exports())
    @example(_bomb("length"))
    @example(_bomb("chunked"))
    def one(raw: bytes) -> None:
        _check_http_answer(_exchange(receiver.http_port, raw))

    one()
    _still_serving_within_bound(receiver, before)


# --- OTLP/gRPC ------------------------------------------------------------------------------

_metadata_keys = st.from_regex(r"[a-z][a-z0-9_.-]{0,20}", fullmatch=True).filter(
    lambda k: not k.startswith("grpc-") and not k.endswith("-bin") and k not in ("te", "content-type", "user-agent")
)
_metadata_values = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=200)
_ALLOWED_CODES = {
    grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE,
}  # fmt: skip


@st.composite
def grpc_exports(draw: st.DrawFn) -> tuple[bytes, tuple[tuple[str, str], ...], grpc.Compression | None]:
    body = draw(st.one_of(protobuf_bodies, json_bodies))
    auth = draw(st.sampled_from(_AUTH_CHOICES))
    metadata = [("authorization", _AUTH[auth])] if auth is not None else []
    metadata += draw(st.lists(st.tuples(_metadata_keys, _metadata_values), max_size=4))
    compression = draw(st.sampled_from([None, grpc.Compression.Gzip, grpc.Compression.Deflate]))
    return body, tuple(metadata), compression


@st.composite
def _tcp_garbage(draw: st.DrawFn) -> bytes:
    """Not gRPC at all at the gRPC port: HTTP/1.1, a broken HTTP/2 preface, random bytes."""
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    return draw(
        st.one_of(
            st.binary(max_size=512),
            st.binary(max_size=512).map(lambda b: preface + b),
            st.just(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"),
        )
    )


def test_hostile_grpc_calls_never_get_internal_or_unknown_and_the_receiver_keeps_serving(receiver):
    before = receiver.idle_rss()
    with grpc.insecure_channel(f"127.0.0.1:{receiver.grpc_port}") as channel:
        call = channel.unary_unary(EXPORT_METHOD)  # raw bytes, no serializer

        past_limit = bytes(MAX_BODY_MB * MiB + 1)  # past the message limit, before or after gRPC's compression

        @FUZZ
        @given(grpc_exports(), st.none() | _tcp_garbage())
        @example((past_limit, (("authorization", _AUTH["good"]),), None), None)
        @example((past_limit, (("authorization", _AUTH["good"]),), grpc.Compression.Gzip), None)
        def one(export, garbage: bytes | None) -> None:
            if garbage is not None:  # a raw connection beside the real ones: answered or dropped, never fatal
                with socket.create_connection(("127.0.0.1", receiver.grpc_port), timeout=HANG_GUARD_S) as s:
                    s.sendall(garbage)
                    s.shutdown(socket.SHUT_WR)
                    while s.recv(65536):
                        pass
            body, metadata, compression = export
            try:
                ExportTraceServiceResponse.FromString(
                    call(body, metadata=metadata, compression=compression, timeout=HANG_GUARD_S)
                )
            except grpc.RpcError as exc:
                assert exc.code() in _ALLOWED_CODES, (exc.code(), exc.details())

        one()
    _still_serving_within_bound(receiver, before)


# --- atheris: coverage-guided, a fixed number of runs ----------------------------------------


def test_coverage_guided_fuzzing_of_the_export_path(tmp_path):
    pytest.importorskip("atheris")
    proc = subprocess.run(
        [sys.executable, "-m", "tests.server.fuzz_export_atheris", str(tmp_path / "corpus"), f"-runs={ATHERIS_RUNS}",
         "-seed=1", "-max_len=16384", f"-artifact_prefix={tmp_path}/"],
        cwd=ROOT, env={**os.environ, "TMPDIR": str(tmp_path)}, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-5000:]
    assert f"Done {ATHERIS_RUNS} runs" in proc.stderr
