"""OTLP/gRPC (:4317) into the same ledger as OTLP/HTTP: the official exporters of both protocols,
the token in the ``authorization`` metadata, limits, partial success and the status codes the
OTLP specification gives each failure."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from decimal import Decimal

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import collector.receiver.writer as writer_module
from collector.receiver import CollectorServer, ServerConfig
from collector.receiver.grpc_receiver import EXPORT_METHOD, GrpcBindError
from ledger import conventions as c
from tests import hostile_spans as h

from .conftest import count, free_port, run_spans, start_cli, wait_healthy, wait_until
from .test_door import _check_the_must_show_request
from .test_instrumentations import TRACED, USAGES, _charges, _run_agents, _runs_caught_up, _trace, expected

TOKEN = "s3cret-grpc-token"
PROTOCOLS = ["grpc", "http"]
# claude-sonnet-5 in the project price file: $3 in, $15 out, cache write $3.75, cache read $0.30 per MTok.
CALLS = [  # (input tokens INCLUDING cache, as the current GenAI conventions count them; cache write; cache read; out)
    (5000, 1000, 3000, 400),
    (7321, 0, 7000, 99),
]


def _exporter(protocol: str, server: CollectorServer, token: str | None = None):  # type: ignore[no-untyped-def]
    """The official OTLP exporter of ``protocol``, pointed at ``server`` as an application would."""
    if protocol == "grpc":
        metadata = (("authorization", f"Bearer {token}"),) if token else None
        return GrpcExporter(endpoint=server.grpc_url, insecure=True, headers=metadata, timeout=30)
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return HttpExporter(endpoint=f"{server.url}/v1/traces", headers=headers, timeout=30)


def _agent_spans(service: str) -> list:
    """Finished SDK spans of one agent run whose model calls carry known token counts."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service, "tenant.id": "acme"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("my.agent", "2.0")
    with tracer.start_as_current_span("invoke_agent my-agent", attributes={c.OPERATION_NAME: "invoke_agent"}):
        for tokens_in, write, read, out in CALLS:
            with tracer.start_as_current_span("chat claude-sonnet-5") as span:
                span.set_attributes({
                    c.OPERATION_NAME: "chat", c.PROVIDER_NAME: "anthropic", c.REQUEST_MODEL: "claude-sonnet-5",
                    c.INPUT_TOKENS: tokens_in, c.OUTPUT_TOKENS: out, c.CACHE_CREATION_INPUT_TOKENS: write,
                    c.CACHE_READ_INPUT_TOKENS: read,
                })  # fmt: skip
    provider.shutdown()
    return list(memory.get_finished_spans())


def _raw_export(server: CollectorServer, body: bytes, metadata=None, compression=None):  # type: ignore[no-untyped-def]
    """One Export call with these exact bytes: the response (parsed), or the ``grpc.RpcError``."""
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        call = channel.unary_unary(EXPORT_METHOD)  # no serializer: the bytes go as they are
        try:
            return ExportTraceServiceResponse.FromString(
                call(body, metadata=metadata, compression=compression, timeout=30)
            )
        except grpc.RpcError as exc:
            return exc


def _retry_delay(error: grpc.RpcError) -> int | None:
    """The RetryInfo delay in the standard status details (what Go/Java exporters and the Collector read)."""
    trailers = dict(error.trailing_metadata() or ())
    status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    for detail in status.details:
        info = error_details_pb2.RetryInfo()
        if detail.Unpack(info):
            assert trailers["google.rpc.retryinfo-bin"] == info.SerializeToString()  # what the Python SDK reads
            return info.retry_delay.seconds
    return None


def _ledger_charges(server: CollectorServer, service: str) -> list[tuple]:
    with server.readers.connection() as cur:
        return cur.execute(
            """SELECT c.uncached_input_tokens, c.cache_write_tokens, c.cache_read_tokens, c.output_tokens,
                      c.usd_input, c.usd_output, c.usd_cache_write, c.usd_cache_read
               FROM charges c JOIN spans s USING (trace_id, span_id)
               WHERE s.resource->>'$."service.name"' = ? ORDER BY c.start_time""",
            [service],
        ).fetchall()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_official_exporter_delivers_spans_charged_exactly(make_server, protocol):
    server = make_server(grpc_port=0, token=TOKEN)
    exporter = _exporter(protocol, server, TOKEN)
    assert exporter.export(_agent_spans(f"agent-{protocol}")) is SpanExportResult.SUCCESS
    exporter.shutdown()
    # Success means committed: the charges are there the moment the export returns, priced to the cent's fraction.
    per_mtok = (Decimal(3), Decimal(15), Decimal("3.75"), Decimal("0.30"))
    want = []
    for tokens_in, write, read, out in CALLS:
        uncached = tokens_in - write - read
        usd = [rate * n / 1_000_000 for rate, n in zip(per_mtok, (uncached, out, write, read), strict=True)]
        want.append((uncached, write, read, out, *usd))
    assert _ledger_charges(server, f"agent-{protocol}") == want
    assert want[0][4:] == (Decimal("0.003"), Decimal("0.006"), Decimal("0.00375"), Decimal("0.0009"))


def test_grpc_and_http_exports_of_the_same_spans_land_the_same_rows_once(make_server):
    """Either transport, in either order, is the same ledger: an exporter switched from one to the
    other mid-flight redelivers nothing twice."""
    server = make_server(grpc_port=0)
    spans = _agent_spans("agent-both")
    for protocol in (*PROTOCOLS, *PROTOCOLS):
        assert _exporter(protocol, server).export(spans) is SpanExportResult.SUCCESS
    assert count(server, "SELECT count(*) FROM spans") == len(CALLS) + 1
    assert len(_ledger_charges(server, "agent-both")) == len(CALLS)


def test_a_grpc_export_without_the_right_token_is_unauthenticated(make_server):
    server = make_server(grpc_port=0, token=TOKEN)
    spans = _agent_spans("agent-no-token")
    assert _exporter("grpc", server).export(spans) is SpanExportResult.FAILURE  # UNAUTHENTICATED: no retry
    assert _exporter("grpc", server, "wrong-token").export(spans) is SpanExportResult.FAILURE
    body = h.must_show_protobuf()
    for metadata in (None, (("authorization", "Bearer wrong"),), (("authorization", f"Basic {TOKEN}"),)):
        error = _raw_export(server, body, metadata)
        assert isinstance(error, grpc.RpcError) and error.code() is grpc.StatusCode.UNAUTHENTICATED, metadata
        assert "bearer token" in error.details()
    assert count(server, "SELECT count(*) FROM spans") == 0
    ok = _raw_export(server, body, (("authorization", f"bearer {TOKEN}"),))  # the scheme is case-insensitive
    assert isinstance(ok, ExportTraceServiceResponse)


@pytest.mark.parametrize("workers", [0, 1])
def test_partial_success_names_each_bad_span_and_lands_the_good_ones(make_server, workers):
    server = make_server(grpc_port=0, decode_workers=workers)
    response = _raw_export(server, h.must_show_protobuf())
    assert isinstance(response, ExportTraceServiceResponse)
    partial = response.partial_success
    _check_the_must_show_request(server, partial.error_message, partial.rejected_spans)


def test_a_malformed_body_is_invalid_argument_and_nothing_is_written(make_server):
    server = make_server(grpc_port=0)
    for body in (b"\xff\xff\xff\xff", h.deep_protobuf(), b"\x0a\x05\x0a\x03\x0a\x01"):
        error = _raw_export(server, body)
        assert isinstance(error, grpc.RpcError) and error.code() is grpc.StatusCode.INVALID_ARGUMENT, body[:20]
        assert "nothing written" in error.details()
    assert count(server, "SELECT count(*) FROM spans") == 0
    assert isinstance(_raw_export(server, b""), ExportTraceServiceResponse)  # an empty request is a valid one


def test_message_size_is_the_body_limit_before_and_after_gzip(make_server):
    server = make_server(grpc_port=0, max_body_bytes=64 * 1024)
    good = h.must_show_protobuf()
    assert isinstance(_raw_export(server, good, compression=grpc.Compression.Gzip), ExportTraceServiceResponse)
    too_big = good + b"\x00" * 70 * 1024  # padding a valid message would decode, were it let in
    for compression in (None, grpc.Compression.Gzip):  # 70 KiB of zeros gzips to ~100 bytes: the limit is inflated size
        error = _raw_export(server, too_big, compression=compression)
        assert isinstance(error, grpc.RpcError) and error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "larger than max" in error.details()
    assert count(server, "SELECT count(*) FROM spans") == len(h.GOOD + h.INVALID_USAGE + h.CONTENT_NOT_STORED)


def test_a_full_queue_is_resource_exhausted_with_retry_info_then_the_retry_lands(make_server, monkeypatch):
    server = make_server(grpc_port=0, max_queued_spans=6)
    gate = threading.Event()
    real = writer_module.write

    def held(con, batches, **kw):  # the writer is busy with a slow commit
        gate.wait(30)
        return real(con, batches, **kw)

    monkeypatch.setattr(writer_module, "write", held)
    first = server.writer.submit(run_spans("first"))  # 4 spans, held in the commit
    wait_until(lambda: server.writer.queued_spans == 4)
    error = _raw_export(server, h.must_show_protobuf())
    assert isinstance(error, grpc.RpcError) and error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "queue full" in error.details()
    delay = _retry_delay(error)  # RetryInfo: what makes RESOURCE_EXHAUSTED retryable under the OTLP spec
    assert delay is not None and delay >= 1
    gate.set()
    assert first.wait(30).received == 4
    assert isinstance(_raw_export(server, h.must_show_protobuf()), ExportTraceServiceResponse)


def test_a_failed_commit_is_unavailable_with_retry_info_and_nothing_is_written(make_server, monkeypatch):
    server = make_server(grpc_port=0)

    def broken(con, batches, **kw):
        raise RuntimeError("disk full")

    monkeypatch.setattr(writer_module, "write", broken)
    error = _raw_export(server, h.must_show_protobuf())
    assert isinstance(error, grpc.RpcError) and error.code() is grpc.StatusCode.UNAVAILABLE
    assert "disk full" in error.details() and _retry_delay(error) == 5
    assert count(server, "SELECT count(*) FROM spans") == 0
    monkeypatch.undo()
    assert _exporter("grpc", server).export(_agent_spans("agent-retry")) is SpanExportResult.SUCCESS


def test_a_taken_grpc_port_fails_the_start_and_frees_the_http_port(make_server, tmp_path):
    first = make_server(grpc_port=0)
    http_port = free_port()
    config = ServerConfig(port=http_port, grpc_port=first.grpc_port, db=tmp_path / "other.duckdb")
    with pytest.raises(GrpcBindError, match=f"OTLP/gRPC on 127.0.0.1:{first.grpc_port}"):
        CollectorServer(config)
    # nothing was left bound or open: the same ledger and HTTP port start cleanly
    CollectorServer(ServerConfig(port=http_port, db=tmp_path / "other.duckdb")).start().stop()


def test_grpc_is_off_unless_configured(server):
    assert server.grpc is None and server.grpc_url is None and server.grpc_port is None


def test_turnledger_serve_listens_for_grpc_and_says_where(tmp_path):
    port, grpc_port = free_port(), free_port()
    proc = start_cli("serve", "--port", str(port), "--grpc-port", str(grpc_port), "--db", str(tmp_path / "l.duckdb"))
    try:
        wait_healthy(f"http://127.0.0.1:{port}")
        exporter = GrpcExporter(endpoint=f"http://127.0.0.1:{grpc_port}", insecure=True, timeout=30)
        assert exporter.export(_agent_spans("agent-cli")) is SpanExportResult.SUCCESS
        exporter.shutdown()
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert f"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:{grpc_port} OTEL_EXPORTER_OTLP_PROTOCOL=grpc" in out
    help_text = subprocess.run(
        [sys.executable, "-m", "collector.cli", "serve", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert re.search(r"--grpc-port GRPC_PORT\s+OTLP/gRPC port", help_text) and "--no-grpc" in help_text


# --- duplicates over gRPC: the real anthropic SDK tracing itself beside each instrumentation -----------


@pytest.fixture(scope="module")
def grpc_traced_conversations(tmp_path_factory):
    """As ``test_instrumentations.traced_conversations``, every agent exporting over OTLP/gRPC with the token."""
    db = tmp_path_factory.mktemp("grpc-traced") / "ledger.duckdb"
    server = CollectorServer(ServerConfig(port=0, grpc_port=0, db=db, token=TOKEN)).start()
    try:
        assert server.grpc_url is not None
        traces = _run_agents(TRACED, server.grpc_url, TOKEN, "--sdk-tracing", "--protocol", "grpc")
        _runs_caught_up(server)
        yield server, traces
    finally:
        server.stop()


@pytest.mark.parametrize("which", TRACED)
def test_duplicates_over_grpc_are_charged_once(grpc_traced_conversations, which):
    server, _ = grpc_traced_conversations
    trace_id = _trace(grpc_traced_conversations, which)
    with server.readers.connection() as cur:
        charges = _charges(cur, trace_id)
        run = cur.execute("SELECT model_calls, usd_total FROM runs WHERE trace_id = ?", [trace_id]).fetchone()
        copies = cur.execute(
            "SELECT count(*) FROM spans WHERE trace_id = ? AND scope_name <> 'demo-agent'", [trace_id]
        ).fetchone()
    assert charges == [expected(u) for u in USAGES]
    assert run == (len(USAGES), sum((sum(expected(u).usd) for u in USAGES), Decimal(0)))
    assert copies == (len(USAGES) * (1 if which == "none" else 2),)  # every copy kept, one charged


def test_the_readme_environment_points_an_sdk_exporter_at_grpc_with_the_token(make_server, monkeypatch):
    server = make_server(grpc_port=0, token=TOKEN)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", server.grpc_url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"authorization=Bearer%20{TOKEN}")
    exporter = GrpcExporter()  # everything from the environment, as the README sets it
    assert exporter.export(_agent_spans("agent-env")) is SpanExportResult.SUCCESS
    assert len(_ledger_charges(server, "agent-env")) == len(CALLS)
