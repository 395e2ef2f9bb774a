"""Invalid UTF-8 in one protobuf span costs that span only (#26 item 4), over OTLP/HTTP and OTLP/gRPC.

The official classes refuse a whole request for one bad string; ``collector.otlp_salvage`` takes it
apart so that the other spans land and the partial success names the bad one by its ids and field.
Bodies come from the real exporter's encoder (``encode_spans``, what ``OTLPSpanExporter`` sends) over
SDK spans, with one marker's first byte turned into 0xff afterwards (the SDK cannot make such a string).
"""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from collector.otlp import decode_protobuf
from collector.otlp_logs import decode_logs_protobuf
from ledger import conventions as c
from ledger.errors import MalformedInput
from ledger.rows import prepare
from ledger.tables import table
from tests import hostile_spans as h

from .conftest import count, post_otlp
from .test_grpc import _raw_export

PROTOBUF = "application/x-protobuf"
BAD = b"\xff"  # never valid in UTF-8, and one byte: a corrupted body keeps its lengths


def _sdk_request(names: list[str]) -> tuple[bytes, list[tuple[str, str]]]:
    """One exporter request of chat spans named ``names`` (each also carrying its name in an attribute,
    an event and its status message), and each span's (trace id, span id)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "utf8-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("my.agent", "1.0")
    for name in names:
        with tracer.start_as_current_span(f"chat {name}") as span:
            span.set_attributes({
                c.OPERATION_NAME: "chat", c.PROVIDER_NAME: "anthropic", c.REQUEST_MODEL: h.MODEL,
                c.INPUT_TOKENS: 41, c.OUTPUT_TOKENS: 67, "note": f"value {name}",
            })  # fmt: skip
            span.add_event(f"event {name}")
            span.set_status(Status(StatusCode.ERROR, f"message {name}"))
    provider.shutdown()
    spans = memory.get_finished_spans()
    ids = [(f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}") for s in spans]
    return encode_spans(spans).SerializeToString(), ids


def _corrupt(body: bytes, marker: str) -> bytes:
    """``body`` with the first byte of ``marker`` (which must occur once) made invalid UTF-8."""
    raw = marker.encode()
    assert body.count(raw) == 1, marker
    return body.replace(raw, BAD + raw[1:])


def _three_good_one_bad(where: str) -> tuple[bytes, list[tuple[str, str]]]:
    body, ids = _sdk_request(["GOOD-0", "GOOD-1", "GOOD-2", "SPOILT"])
    marker = {"name": "chat SPOILT", "value": "value SPOILT", "event": "event SPOILT", "status": "message SPOILT"}
    return _corrupt(body, marker[where]), ids


def test_the_request_is_refused_whole_by_the_official_parser():
    body, _ = _three_good_one_bad("name")
    with pytest.raises(Exception, match="UTF-8"):
        ExportTraceServiceRequest.FromString(body)  # what made one span cost the whole request


FIELDS = {
    "name": "name",
    "value": "attributes[5].value.stringValue",
    "event": "events[0].name",
    "status": "status.message",
}


@pytest.mark.parametrize("where", list(FIELDS))
def test_decoding_keeps_the_good_spans_and_names_the_bad_one_by_its_field(where):
    body, ids = _three_good_one_bad(where)
    spans = decode_protobuf(body)
    assert [(s.trace_id, s.span_id) for s in spans if not s.problem] == ids[:3]
    (bad,) = [s for s in spans if s.problem]
    assert (bad.trace_id, bad.span_id) == ids[3]
    assert bad.problem == f"resourceSpans[0].scopeSpans[0].spans[3]: {FIELDS[where]} is not valid UTF-8"


def _check_stored(server: Any, message: str, rejected: int, ids: list[tuple[str, str]]) -> None:
    assert rejected == 1
    assert f"{ids[3][0]}/{ids[3][1]}: resourceSpans[0].scopeSpans[0].spans[3]: name is not valid UTF-8" in message
    stored = server.con.cursor().execute("SELECT trace_id, span_id FROM spans ORDER BY start_time").fetchall()
    assert stored == ids[:3]
    assert count(server, "SELECT count(*) FROM charges") == 3  # priced as the good spans they are


@pytest.mark.parametrize("workers", [0, 1])
def test_over_http_three_spans_are_stored_and_the_partial_success_names_the_bad_one(make_server, workers):
    server = make_server(decode_workers=workers)
    body, ids = _three_good_one_bad("name")
    r = post_otlp(server.url, body, PROTOBUF)
    assert r.status == 200
    partial = ExportTraceServiceResponse.FromString(r.body).partial_success
    _check_stored(server, partial.error_message, partial.rejected_spans, ids)


def test_over_grpc_three_spans_are_stored_and_the_partial_success_names_the_bad_one(make_server):
    server = make_server(grpc_port=0)
    body, ids = _three_good_one_bad("name")
    response = _raw_export(server, body)  # the real grpc client, these exact bytes
    assert not isinstance(response, grpc.RpcError), response  # OK, not INVALID_ARGUMENT
    _check_stored(server, response.partial_success.error_message, response.partial_success.rejected_spans, ids)


def test_what_else_the_parser_refuses_is_still_the_whole_request():
    body, _ = _three_good_one_bad("name")
    with pytest.raises(MalformedInput, match="not an OTLP ExportTraceServiceRequest protobuf"):
        decode_protobuf(body[:-3])  # truncated: the framing is broken, no span can be trusted
    with pytest.raises(MalformedInput, match="not an OTLP ExportTraceServiceRequest protobuf"):
        decode_protobuf(h.deep_protobuf(500))  # past the parser's depth, valid UTF-8: structural


def test_a_bad_log_record_costs_that_record_only():
    request = ExportLogsServiceRequest()
    records = request.resource_logs.add().scope_logs.add().log_records
    for n in range(4):
        records.add(time_unix_nano=h.T0, trace_id=bytes.fromhex(h.TRACE), span_id=bytes.fromhex(h.span_id(n)))
        records[-1].body.string_value = f"record NUMBER-{n}"
    body = _corrupt(request.SerializeToString(), "NUMBER-2")
    events = decode_logs_protobuf(body)
    assert [e.body for e in events if not e.problem] == ["record NUMBER-0", "record NUMBER-1", "record NUMBER-3"]
    (bad,) = [e for e in events if e.problem]
    assert bad.span_id == h.span_id(2)
    assert bad.problem == "resourceLogs[0].scopeLogs[0].logRecords[2]: body.stringValue is not valid UTF-8"


# --- any subset corrupted: exactly the others stored ------------------------------------------
# 2 resources × 2 scopes × 3 spans; every string place a span, scope or resource has a marker in.
SPAN_PLACES = ("name", "key", "value", "nested", "event", "status", "link")
SPANS = [(r, s, k) for r in range(2) for s in range(2) for k in range(3)]


def _marker(kind: str, *at: int) -> str:
    return f"<{kind}{''.join(map(str, at))}>"


def _pb_request() -> bytes:
    request = ExportTraceServiceRequest()
    for r in range(2):
        rs = request.resource_spans.add()
        rs.resource.attributes.add(key="service.name").value.string_value = _marker("resource", r)
        for s in range(2):
            ss = rs.scope_spans.add()
            ss.scope.name = _marker("scope", r, s)
            for k in range(3):
                at = (r, s, k)
                sp = ss.spans.add(
                    trace_id=bytes.fromhex(h.TRACE), span_id=bytes.fromhex(h.span_id(SPANS.index(at) + 1))
                )
                sp.name = _marker("name", *at)
                sp.start_time_unix_nano, sp.end_time_unix_nano = h.T0, h.T0 + 1
                sp.attributes.add(key=_marker("key", *at)).value.string_value = "v"
                sp.attributes.add(key="v").value.string_value = _marker("value", *at)
                nested = sp.attributes.add(key="n").value.kvlist_value.values.add(key="inner").value
                nested.array_value.values.add().string_value = _marker("nested", *at)
                sp.events.add(name=_marker("event", *at), time_unix_nano=h.T0)
                sp.status.message = _marker("status", *at)
                link = sp.links.add(trace_id=bytes.fromhex(h.TRACE), span_id=bytes.fromhex(h.span_id(99)))
                link.attributes.add(key="l").value.string_value = _marker("link", *at)
    return request.SerializeToString()


BODY = _pb_request()


def corruptions(spoilt_at_most: int) -> dict[str, st.SearchStrategy[Any]]:
    """``@given`` arguments for ``corrupted``: span places, scopes and resources to spoil."""
    return {
        "spoilt": st.sets(st.tuples(st.sampled_from(SPANS), st.sampled_from(SPAN_PLACES)), max_size=spoilt_at_most),
        "scopes": st.sets(st.tuples(st.integers(0, 1), st.integers(0, 1)), max_size=2),
        "resources": st.sets(st.integers(0, 1), max_size=1),
    }


def corrupted(spoilt: set[Any], scopes: set[Any], resources: set[int]) -> bytes:
    """``BODY`` with invalid UTF-8 in each place drawn by ``corruptions``."""
    body = BODY
    for at, place in spoilt:
        body = _corrupt(body, _marker(place, *at))
    for at in scopes:
        body = _corrupt(body, _marker("scope", *at))
    for r in resources:
        body = _corrupt(body, _marker("resource", r))
    return body


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**corruptions(12))
def test_any_subset_corrupted_exactly_the_others_are_stored(spoilt, scopes, resources):
    body = corrupted(spoilt, scopes, resources)
    lost = {at for at, _ in spoilt} | {x for x in SPANS if x[:2] in scopes or x[0] in resources}
    expected = {h.span_id(SPANS.index(x) + 1) for x in SPANS if x not in lost}

    batch = prepare(decode_protobuf(body), redact_content=False)  # ingest's own validation decides
    assert len(batch.rejected) == len(lost)
    span_id = table("spans").names.index("span_id")
    assert {row[span_id] for row in batch.rows["spans"]} == expected  # the rows ingest would write
    assert {r.split(":", 1)[0] for r in batch.rejected} == {f"{h.TRACE}/{h.span_id(SPANS.index(x) + 1)}" for x in lost}
