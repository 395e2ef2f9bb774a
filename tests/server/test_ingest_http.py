"""POST /v1/traces: OTLP/HTTP as exporters speak it, and what lands in the ledger."""

from __future__ import annotations

import dataclasses
import threading
import zlib
from decimal import Decimal

import pytest
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import collector.receiver.writer as writer_module
import ledger.runs as ledger_runs
from collector.otlp import decode_json
from ledger import conventions as c

from .conftest import ROOT, count, gz, otlp_json, post_otlp, request, run_spans, wait_until

PROTOBUF = "application/x-protobuf"
EXPORT_WAIT_S = 60  # the exporter's wait for an answer: the SDK's 10 s default is shorter than a cold start under load


def sdk_spans(n_calls: int = 2) -> list:
    """Finished SDK spans of one agent run with GenAI attributes (what any instrumented agent produces)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "sdk-agent", "tenant.id": "globex"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("my.agent", "2.0")
    with tracer.start_as_current_span("invoke_agent sdk-agent", attributes={c.OPERATION_NAME: "invoke_agent"}):
        for i in range(n_calls):
            with tracer.start_as_current_span("chat claude-sonnet-5") as span:
                span.set_attributes({
                    c.OPERATION_NAME: "chat", c.PROVIDER_NAME: "anthropic", c.REQUEST_MODEL: "claude-sonnet-5",
                    c.INPUT_TOKENS: 2000 + i, c.OUTPUT_TOKENS: 100, c.CACHE_READ_INPUT_TOKENS: 1000,
                    c.CACHE_CREATION_INPUT_TOKENS: 500,
                })  # fmt: skip
    provider.shutdown()
    return list(memory.get_finished_spans())


def protobuf_body(spans: list) -> bytes:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return encode_spans(spans).SerializeToString()


def test_protobuf_from_the_official_exporter_lands(server):
    spans = sdk_spans(2)
    exporter = OTLPSpanExporter(endpoint=f"{server.url}/v1/traces", timeout=EXPORT_WAIT_S)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    assert count(server, "SELECT count(*) FROM spans") == 3
    rows = (
        server.con.cursor()
        .execute(
            "SELECT uncached_input_tokens, cache_write_tokens, cache_read_tokens, output_tokens, tenant, "
            "usd_input + usd_output + usd_cache_write + usd_cache_read FROM charges ORDER BY uncached_input_tokens"
        )
        .fetchall()
    )
    # input 2000 INCLUDES 1000 read + 500 written (current conventions): 500 uncached.
    # $3/MTok in, $15 out, writes x1.25, reads x0.1: 1500 + 1500 + 1875 + 300 = 5175 µ$.
    assert rows == [
        (500, 500, 1000, 100, "globex", Decimal("0.005175")),
        (501, 500, 1000, 100, "globex", Decimal("0.005178")),
    ]


def test_otlp_json_file_lands_with_its_exact_costs(server):
    body = (ROOT / "sample_traces" / "five_turn_run.json").read_bytes()
    r = post_otlp(server.url, body)
    assert (r.status, r.headers["content-type"], r.json()) == (200, "application/json", {})
    total = count(server, "SELECT usd_total FROM runs")
    assert total == Decimal("0.0997")


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "deflate-raw"])
def test_compressed_bodies_land(server, encoding):
    raw = protobuf_body(sdk_spans(1))
    if encoding == "gzip":
        body = gz(raw)
    elif encoding == "deflate":
        body = zlib.compress(raw)
    else:  # raw deflate, as some clients send for "deflate"
        co = zlib.compressobj(wbits=-15)
        body, encoding = co.compress(raw) + co.flush(), "deflate"
    r = post_otlp(server.url, body, PROTOBUF, {"Content-Encoding": encoding})
    assert r.status == 200, r.body
    assert ExportTraceServiceResponse.FromString(r.body) == ExportTraceServiceResponse()
    assert count(server, "SELECT count(*) FROM charges") == 1


def test_duplicate_delivery_charges_once(server):
    body = protobuf_body(sdk_spans(2))
    for _ in range(2):  # an exporter retry after a lost response
        assert post_otlp(server.url, body, PROTOBUF).status == 200
    # ...and two copies in flight at once, coalesced into one ingest call
    statuses: list[int] = []
    threads = [threading.Thread(target=lambda: statuses.append(post_otlp(server.url, body, PROTOBUF).status))
               for _ in range(4)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [200] * 4
    assert count(server, "SELECT count(*) FROM charges") == 2
    assert count(server, "SELECT count(*) FROM spans") == 3
    assert count(server, "SELECT sum(usd_total) FROM runs") == Decimal("0.010353")


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"\xff\xfe this is not protobuf \x00\x01", PROTOBUF),
        (b"{not json", "application/json"),
        (b'{"hello": "world"}', "application/json"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": {"k": 1}}]}]}]}', "application/json"),
    ],
    ids=["garbage-protobuf", "not-json", "json-not-otlp", "attributes-not-a-list"],
)
def test_invalid_body_is_400_and_writes_nothing(server, body, content_type):
    good_too = otlp_json(run_spans("in-the-same-request"))  # nothing of a rejected request lands
    assert decode_json(good_too)
    r = post_otlp(server.url, body, content_type)
    assert r.status == 400
    message = status_pb2.Status.FromString(r.body).message if content_type == PROTOBUF else r.json()["message"]
    assert "nothing written" in message
    assert count(server, "SELECT count(*) FROM spans") == 0
    assert server.writer.stats.batches == 0


def test_one_bad_span_lands_the_good_ones_and_reports_the_rejected_count(server):
    spans = run_spans("partial")
    bad = dataclasses.replace(spans[0], span_id="xyz")
    body = otlp_json([bad, *spans[1:]])
    r = post_otlp(server.url, body)
    assert r.status == 200
    partial = r.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1"  # int64 as a string in OTLP/JSON
    assert "span_id 'xyz'" in partial["errorMessage"]
    assert count(server, "SELECT count(*) FROM spans") == len(spans) - 1
    # protobuf response too
    r = post_otlp(server.url, protobuf_body(sdk_spans(1)), PROTOBUF)
    assert ExportTraceServiceResponse.FromString(r.body).partial_success.rejected_spans == 0


def test_rejected_counts_stay_with_their_own_request_when_coalesced(server, monkeypatch):
    gate = threading.Event()
    real = writer_module.write

    def slow_first(con, batches, **kw):
        gate.wait(10)
        return real(con, batches, **kw)

    monkeypatch.setattr(writer_module, "write", slow_first)
    blocker = otlp_json(run_spans("blocker"))
    results: dict[str, object] = {}
    first = threading.Thread(target=lambda: results.setdefault("blocker", post_otlp(server.url, blocker)))
    first.start()
    clean, dirty = run_spans("clean"), run_spans("dirty")
    dirty[1] = dataclasses.replace(dirty[1], start_ns=-5)
    threads = [threading.Thread(target=lambda k=k, s=s: results.setdefault(k, post_otlp(server.url, otlp_json(s))))
               for k, s in (("clean", clean), ("dirty", dirty))]  # fmt: skip
    for t in threads:
        t.start()
    wait_until(lambda: server.writer.queued_spans == 12)  # all three submitted, the first one held
    gate.set()
    for t in [first, *threads]:
        t.join()
    assert results["clean"].json() == {}
    assert results["dirty"].json()["partialSuccess"]["rejectedSpans"] == "1"
    assert results["blocker"].json() == {}
    assert server.writer.stats.requests == 3 and server.writer.stats.batches <= 2  # some were coalesced


def test_oversize_body_is_413(make_server):
    server = make_server(max_body_bytes=400_000, max_decoded_bytes=500_000)
    big = otlp_json(run_spans("big", turns=30)) + b" " * 400_000
    assert len(big) > 400_000
    r = post_otlp(server.url, big)
    assert r.status == 413
    bomb = gz(b'{"resourceSpans": [' + b" " * 1_000_000 + b"]}")  # 1 MB of spaces inflates from ~1 KB
    assert len(bomb) < 400_000
    assert post_otlp(server.url, bomb, headers={"Content-Encoding": "gzip"}).status == 413
    # a body well past the socket buffers still gets its 413 (read and dropped), not a reset connection
    huge = b'{"resourceSpans": []}' + b" " * 1_500_000
    assert post_otlp(server.url, huge).status == 413
    assert count(server, "SELECT count(*) FROM spans") == 0


def test_unsupported_media_type_is_415(server):
    assert post_otlp(server.url, b"hello", "text/plain").status == 415
    assert post_otlp(server.url, b"x", PROTOBUF, {"Content-Encoding": "br"}).status == 415


def test_full_queue_is_429_with_retry_after_then_the_retry_lands(make_server, monkeypatch):
    server = make_server(max_queued_spans=6)
    gate = threading.Event()
    real = writer_module.write

    def held(con, batches, **kw):  # the writer is busy with a slow commit
        gate.wait(10)
        return real(con, batches, **kw)

    monkeypatch.setattr(writer_module, "write", held)
    first_body = otlp_json(run_spans("first"))  # 4 spans
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("r", post_otlp(server.url, first_body)))
    t.start()
    wait_until(lambda: server.writer.queued_spans == 4)
    second = otlp_json(run_spans("second"))
    r = post_otlp(server.url, second)
    assert r.status == 429
    assert int(r.headers["retry-after"]) >= 1
    gate.set()
    t.join()
    assert result["r"].status == 200
    assert post_otlp(server.url, second).status == 200
    assert count(server, "SELECT count(*) FROM runs") == 2


def test_failed_commit_is_503_and_nothing_of_the_batch_is_written(server, monkeypatch):
    def broken_refresh(con, trace_ids, **kw):  # fails after the span/charge inserts, inside the transaction
        raise RuntimeError("disk full")

    monkeypatch.setattr(ledger_runs, "refresh_runs", broken_refresh)
    r = post_otlp(server.url, otlp_json(run_spans("doomed")))
    assert r.status == 503
    assert r.headers["retry-after"]
    assert "disk full" in r.json()["message"]
    assert count(server, "SELECT count(*) FROM spans") == 0
    assert count(server, "SELECT count(*) FROM charges") == 0
    monkeypatch.undo()
    assert post_otlp(server.url, otlp_json(run_spans("doomed"))).status == 200  # the exporter's retry lands
    assert count(server, "SELECT count(*) FROM spans") == 4


def test_unknown_path_and_method(server):
    assert request(f"{server.url}/v1/profiles", "POST", b"{}", {"Content-Type": "application/json"}).status == 404
    # /v1/metrics and /v1/logs are served (tests/server/test_otlp_logs.py): a body that is none is a 400
    assert request(f"{server.url}/v1/metrics", "POST", b"{}", {"Content-Type": "application/json"}).status == 400
    assert request(f"{server.url}/v1/traces", "PUT", b"{}").status == 405


def test_chunked_request_body_lands(server):
    import http.client

    body = otlp_json(run_spans("chunked"))
    conn = http.client.HTTPConnection("127.0.0.1", int(server.url.rsplit(":", 1)[1]), timeout=30)
    pieces = [body[i : i + 1000] for i in range(0, len(body), 1000)]
    conn.request(
        "POST", "/v1/traces", body=iter(pieces), headers={"Content-Type": "application/json"}, encode_chunked=True
    )
    r = conn.getresponse()
    assert (r.status, r.read()) == (200, b"{}")
    conn.close()
    assert count(server, "SELECT count(*) FROM spans") == 4


def test_decoder_processes_give_the_same_rows_and_a_crashed_one_costs_one_retry(make_server):
    import os
    import signal

    server = make_server(decode_workers=1)
    # protobuf from the official exporter, priced in the worker with the server's price book
    exporter = OTLPSpanExporter(endpoint=f"{server.url}/v1/traces", timeout=EXPORT_WAIT_S)  # a cold decoder process
    assert exporter.export(sdk_spans(2)) is SpanExportResult.SUCCESS
    usd = "SELECT sum(usd_input + usd_output + usd_cache_write + usd_cache_read) FROM charges"
    assert count(server, usd) == Decimal("0.010353")
    # one bad span: the rest land, the count comes back; garbage: 400, nothing written
    spans = run_spans("worker-partial")
    r = post_otlp(server.url, otlp_json([dataclasses.replace(spans[0], span_id="xyz"), *spans[1:]]))
    assert r.status == 200 and r.json()["partialSuccess"]["rejectedSpans"] == "1"
    assert post_otlp(server.url, b"\xff\xfe not protobuf", PROTOBUF).status == 400
    assert count(server, "SELECT count(*) FROM spans") == 3 + len(spans) - 1
    # a worker killed mid-flight: that request is 503 with Retry-After, the retry lands
    for pid in list(server.decoder._pool._processes):
        os.kill(pid, signal.SIGKILL)
    again = run_spans("after-crash")
    r = post_otlp(server.url, otlp_json(again))
    assert r.status == 503 and r.headers["retry-after"] == "1"
    assert post_otlp(server.url, otlp_json(again)).status == 200
    assert count(server, "SELECT count(*) FROM spans WHERE trace_id = ?", [again[0].trace_id]) == len(again)
