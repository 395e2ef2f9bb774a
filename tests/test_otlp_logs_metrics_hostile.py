"""The OTLP logs and metrics decoders, and the rows built from them, on hostile input: a body of the
wrong shape is ``MalformedInput`` (400), anything else decodes; no other exception ever comes out."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector.receiver.otlp_http import JSON as JSON_KIND
from collector.receiver.otlp_http import PROTOBUF
from collector.receiver.signals import LOGS, METRICS, prepare_signal
from ledger.errors import MalformedInput
from ledger.rows import default_prices

KEYS = [
    "resourceLogs", "resourceMetrics", "resource", "attributes", "scopeLogs", "scopeMetrics", "scope", "logRecords",
    "metrics", "name", "sum", "gauge", "histogram", "dataPoints", "asInt", "asDouble", "aggregationTemporality",
    "traceId", "spanId", "timeUnixNano", "observedTimeUnixNano", "startTimeUnixNano", "body", "eventName", "key",
    "value", "stringValue", "intValue", "doubleValue", "boolValue", "arrayValue", "kvlistValue", "bytesValue",
    "values", "exemplars", "event.name", "session.id", "input_tokens",
]  # fmt: skip
DOCS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=4), inner, max_size=5)
    ),
    max_leaves=40,
)
HOSTILE = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


def _prepared_or_malformed(body: bytes, kind: str, signal: str) -> None:
    try:
        batch = prepare_signal(body, kind, signal, default_prices(), redact_content=True)
    except MalformedInput:
        return
    assert batch.received >= len(batch.rejected)


@HOSTILE
@given(signal=st.sampled_from([LOGS, METRICS]), body=st.binary(max_size=200))
def test_any_bytes_are_rows_or_a_400(signal: str, body: bytes) -> None:
    _prepared_or_malformed(body, PROTOBUF, signal)


@HOSTILE
@given(signal=st.sampled_from([LOGS, METRICS]), doc=DOCS)
def test_any_json_is_rows_or_a_400(signal: str, doc: object) -> None:
    top = "resourceLogs" if signal == LOGS else "resourceMetrics"
    inner = {"logRecords": doc, "metrics": doc}
    points = {"metrics": [{"name": "m", "sum": {"aggregationTemporality": 1, "dataPoints": doc}}]}
    for body in (doc, {top: doc}, {top: [{"scopeLogs": doc, "scopeMetrics": doc}]},
                 {top: [{"scopeLogs": [inner], "scopeMetrics": [inner]}]}, {top: [{"scopeMetrics": [points]}]},
                 {top: [{"scopeLogs": [{"logRecords": [doc]}]}]}):  # fmt: skip
        _prepared_or_malformed(json.dumps(body).encode(), JSON_KIND, signal)
