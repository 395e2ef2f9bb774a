"""collector.otlp.decode_protobuf on odd values: every AnyValue kind, enums out of range, shared resources."""

from __future__ import annotations

import base64

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from collector.otlp import decode_protobuf, read_file
from ledger.errors import MalformedInput
from ledger.spans import Base64Bytes, SpanEvent
from tests.conftest import SAMPLES, sample_as_protobuf


def _typed(value):
    """The value with the type of every leaf spelled out (so 1 == 1.0 == True do not pass for each other)."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


def test_every_kind_of_attribute_value_keeps_its_python_type():
    req = ExportTraceServiceRequest()
    span = req.resource_spans.add().scope_spans.add().spans.add(trace_id=b"\xab" * 16, span_id=b"\x0c" * 8)
    attrs = span.attributes
    attrs.add(key="str", value=AnyValue(string_value="hello"))
    attrs.add(key="empty_str", value=AnyValue(string_value=""))
    attrs.add(key="int", value=AnyValue(int_value=2**40))
    attrs.add(key="zero", value=AnyValue(int_value=0))
    attrs.add(key="neg", value=AnyValue(int_value=-5))
    attrs.add(key="double", value=AnyValue(double_value=0.0))
    attrs.add(key="true", value=AnyValue(bool_value=True))
    attrs.add(key="false", value=AnyValue(bool_value=False))
    attrs.add(key="bytes", value=AnyValue(bytes_value=b"\x00\xffhi"))
    attrs.add(key="none")  # an AnyValue with nothing set
    array = attrs.add(key="array").value.array_value.values
    array.add(string_value="x")
    array.add(int_value=1)
    array.add(double_value=1.5)
    array.add(bool_value=True)
    array.add()
    array.add(bytes_value=b"ab")
    array.add().array_value.values.add(int_value=7)
    array.add().kvlist_value.values.add(key="k", value=AnyValue(bool_value=False))
    kvlist = attrs.add(key="kvlist").value.kvlist_value.values
    kvlist.add(key="nested").value.array_value.values.add(string_value="y")
    kvlist.add(key="empty")
    attrs.add(key="empty_array").value.array_value.SetInParent()
    attrs.add(key="empty_kvlist").value.kvlist_value.SetInParent()
    attrs.add(key="str", value=AnyValue(string_value="last"))  # a repeated key: the last one wins

    (record,) = decode_protobuf(req.SerializeToString())
    assert _typed(record.attributes) == _typed({
        "str": "last",
        "empty_str": "",
        "int": 2**40,
        "zero": 0,
        "neg": -5,
        "double": 0.0,
        "true": True,
        "false": False,
        "bytes": Base64Bytes(base64.b64encode(b"\x00\xffhi").decode()),  # typed: redaction reads the bytes
        "none": None,
        "array": ["x", 1, 1.5, True, None, Base64Bytes("YWI="), [7], {"k": False}],
        "kvlist": {"nested": ["y"], "empty": None},
        "empty_array": [],
        "empty_kvlist": {},
    })  # fmt: skip
    assert list(record.attributes) == [
        "str", "empty_str", "int", "zero", "neg", "double", "true", "false", "bytes", "none", "array", "kvlist",
        "empty_array", "empty_kvlist",
    ]  # fmt: skip
    assert record.trace_id == "ab" * 16 and record.span_id == "0c" * 8 and record.parent_span_id == ""
    assert record.events == ()


@pytest.mark.parametrize(
    ("kind", "code", "expected"),
    [
        (0, 0, ("UNSPECIFIED", "UNSET")),
        (1, 1, ("INTERNAL", "OK")),
        (3, 2, ("CLIENT", "ERROR")),
        (5, 2, ("CONSUMER", "ERROR")),
        (6, 3, ("UNSPECIFIED", "UNSET")),
        (99, 99, ("UNSPECIFIED", "UNSET")),
        (-1, -1, ("UNSPECIFIED", "UNSET")),
    ],
)
def test_kind_and_status_map_to_names_and_out_of_range_to_the_default(kind, code, expected):
    req = ExportTraceServiceRequest()
    span = req.resource_spans.add().scope_spans.add().spans.add(name="s", kind=kind)
    span.status.code = code
    span.status.message = "why"
    (record,) = decode_protobuf(req.SerializeToString())
    assert (record.kind, record.status_code, record.status_message) == (*expected, "why")


def test_spans_of_one_resource_share_its_attribute_dict_and_keep_their_scope():
    req = ExportTraceServiceRequest()
    first = req.resource_spans.add()
    first.resource.attributes.add(key="service.name", value=AnyValue(string_value="a"))
    for n, scope in enumerate(("one", "two")):
        ss = first.scope_spans.add()
        ss.scope.name, ss.scope.version = scope, f"{n}.0"
        ss.spans.add(name=f"{scope}-1")
        span = ss.spans.add(name=f"{scope}-2", parent_span_id=b"\x01" * 8, start_time_unix_nano=5, end_time_unix_nano=9)
        event = span.events.add(name="ev", time_unix_nano=7)
        event.attributes.add(key="n", value=AnyValue(int_value=3))
        span.events.add(name="bare")
    req.resource_spans.add().scope_spans.add().spans.add(name="other")

    records = decode_protobuf(req.SerializeToString())
    assert [(r.name, r.scope_name, r.scope_version) for r in records] == [
        ("one-1", "one", "0.0"), ("one-2", "one", "0.0"), ("two-1", "two", "1.0"), ("two-2", "two", "1.0"),
        ("other", "", ""),
    ]  # fmt: skip
    assert all(r.resource is records[0].resource for r in records[:4])
    assert records[0].resource == {"service.name": "a"} and records[4].resource == {}
    assert records[4].resource is not records[0].resource
    two = records[3]
    assert (two.parent_span_id, two.start_ns, two.end_ns) == ("01" * 8, 5, 9)
    assert two.events == (SpanEvent("ev", 7, {"n": 3}), SpanEvent("bare", 0, {}))
    assert isinstance(two.events, tuple) and records[0].events == ()


@pytest.mark.parametrize("body", [b"\xff\xfe this is not protobuf \x00\x01", b"\x0a\x05abc"])
def test_undecodable_bodies_are_malformed_input(body):
    with pytest.raises(MalformedInput, match="not an OTLP ExportTraceServiceRequest"):
        decode_protobuf(body)


def test_an_empty_body_is_an_empty_request():
    assert decode_protobuf(b"") == []


@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*.json")), ids=lambda p: p.stem)
def test_sample_files_decode_the_same_from_protobuf_as_from_json(path):
    assert decode_protobuf(sample_as_protobuf(path)) == read_file(path)
