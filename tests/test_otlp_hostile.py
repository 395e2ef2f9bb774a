"""The OTLP decoders on hostile input: nothing but ``MalformedInput`` ever comes out of them.

A body of the wrong shape is refused whole; a span with a value that cannot be
taken keeps its place in the batch with a ``problem``, which ingest reports as
that span's rejection while the request's good spans land.
"""

from __future__ import annotations

import contextlib
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.otlp import decode_json, decode_protobuf
from ledger.errors import MalformedInput
from ledger.ingest import ingest
from ledger.limits import MAX_ATTRIBUTE_DEPTH
from ledger.spans import SpanRecord
from ledger.store import open_ledger
from tests.conftest import SAMPLES, sample_as_protobuf

OTLP_KEYS = [
    "resourceSpans", "resource", "attributes", "scopeSpans", "scope", "spans", "traceId", "spanId", "parentSpanId",
    "name", "kind", "startTimeUnixNano", "endTimeUnixNano", "status", "code", "message", "events", "timeUnixNano",
    "key", "value", "stringValue", "intValue", "doubleValue", "boolValue", "arrayValue", "kvlistValue", "bytesValue",
    "values", "version",
]  # fmt: skip
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(OTLP_KEYS) | st.text(max_size=4), inner, max_size=5)
    ),
    max_leaves=40,
)
HOSTILE = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))


def _well_typed(span: SpanRecord) -> bool:
    return (
        all(isinstance(v, str) for v in (span.trace_id, span.span_id, span.parent_span_id, span.name, span.problem))
        and isinstance(span.start_ns, int)
        and isinstance(span.end_ns, int)
        and isinstance(span.attributes, dict)
    )


@HOSTILE
@given(st.dictionaries(st.just("resourceSpans"), JSON) | JSON)
def test_json_decoder_raises_only_malformed_input_on_any_document(doc):
    try:
        spans = decode_json(json.dumps(doc))
    except MalformedInput:
        return
    assert all(_well_typed(s) for s in spans)


@HOSTILE
@given(st.binary(max_size=300))
def test_json_decoder_raises_only_malformed_input_on_any_bytes(body):
    with contextlib.suppress(MalformedInput):
        assert isinstance(decode_json(body), list)


SAMPLE_PB = sample_as_protobuf(SAMPLES / "five_turn_run.json")


@HOSTILE
@given(
    st.binary(max_size=300)
    | st.builds(lambda i, b: SAMPLE_PB[:i] + b + SAMPLE_PB[i:], st.integers(0, 2000), st.binary(max_size=8))
)
def test_protobuf_decoder_raises_only_malformed_input_on_any_bytes(body):
    try:
        spans = decode_protobuf(body)
    except MalformedInput:
        return
    assert all(_well_typed(s) for s in spans)


def _span(n: int, **fields) -> dict:
    span = {
        "traceId": "ab" * 16, "spanId": f"{n:016x}", "name": f"span {n}",
        "startTimeUnixNano": "1767225600000000000", "endTimeUnixNano": "1767225601000000000",
        "attributes": [{"key": "k", "value": {"stringValue": "v"}}],
    }  # fmt: skip
    return {**span, **fields}


def _nested(depth: int) -> dict:
    value: dict = {"stringValue": "bottom"}
    for _ in range(depth):
        value = {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
    return value


def test_a_span_with_an_undecodable_value_is_rejected_alone_and_the_good_ones_land():
    bad = [
        _span(4, startTimeUnixNano="soon"),
        _span(5, attributes=[{"key": "gen_ai.usage.input_tokens", "value": {"intValue": "many"}}]),
        _span(6, attributes=[{"key": "deep", "value": _nested(MAX_ATTRIBUTE_DEPTH + 1)}]),
        _span(7, attributes=[{"key": "odd", "value": {"colourValue": "red"}}]),
    ]
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [_span(1), _span(2), *bad, _span(3)]}]}]}
    spans = decode_json(json.dumps(body))
    assert [s.problem != "" for s in spans] == [False, False, True, True, True, True, False]
    report = ingest(open_ledger(":memory:"), spans)
    assert (report.received, report.spans_written, len(report.rejected)) == (7, 3, 4)
    assert [r.split(": ", 1)[0] for r in report.rejected] == [f"{'ab' * 16}/{n:016x}" for n in (4, 5, 6, 7)]
    assert "startTimeUnixNano: 'soon' is not an integer" in report.rejected[0]
    assert "gen_ai.usage.input_tokens: 'many' is not an integer" in report.rejected[1]
    assert f"nested deeper than {MAX_ATTRIBUTE_DEPTH} levels" in report.rejected[2]
    assert "unknown attribute value type 'colourValue'" in report.rejected[3]


def test_nesting_at_the_limit_is_kept():
    (span,) = decode_json(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [
        _span(1, attributes=[{"key": "deep", "value": _nested(MAX_ATTRIBUTE_DEPTH)}])
    ]}]}]}))  # fmt: skip
    assert span.problem == ""


def test_a_body_of_the_wrong_shape_is_refused_whole_naming_the_place():
    for body, where in [
        ({"resourceSpans": [{"scopeSpans": "spans"}]}, "resourceSpans[0].scopeSpans: expected a list of objects"),
        ({"resourceSpans": [{"resource": 7}]}, "resourceSpans[0].resource: expected an object"),
        ({"resourceSpans": [{"scopeSpans": [{"spans": [_span(1, events=3)]}]}]}, "spans[0].events: expected a list"),
        ({"resourceSpans": [5]}, "request.resourceSpans: expected a list of objects"),
    ]:
        try:
            decode_json(json.dumps(body))
        except MalformedInput as exc:
            assert where in str(exc)
        else:
            raise AssertionError(f"{body} was accepted")


def test_a_protobuf_request_nested_past_the_parser_limit_is_refused_whole():
    request = ExportTraceServiceRequest()
    value = request.resource_spans.add().scope_spans.add().spans.add().attributes.add(key="deep").value
    for _ in range(200):
        value = value.kvlist_value.values.add(key="k").value
    value.string_value = "bottom"
    try:
        decode_protobuf(request.SerializeToString())
    except MalformedInput as exc:
        assert "not an OTLP ExportTraceServiceRequest" in str(exc)
    else:
        raise AssertionError("a 200-deep attribute was decoded")
