"""Numbers validated at the door: ``prepare`` + ``write`` into a real DuckDB on hostile span values.

Whatever the attribute values, nothing raises but the documented input error,
and every span is either rejected (named) or written whole: its span row, its
charge if it is a model call, its context if it carries a payload. Never half.
"""

from __future__ import annotations

import functools
import itertools
import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from collector.cli import main
from collector.harness.telemetry.exporters import span_records
from collector.otlp import decode_json, decode_protobuf
from ledger.errors import MalformedInput
from ledger.ingest import prepare, write
from ledger.limits import MAX_TOKENS
from ledger.normalize import model_call
from ledger.report import build_report
from ledger.store import open_ledger
from tests import hostile_spans as h

TOKEN_KEYS = [
    "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.reasoning.output_tokens", "turnledger.attempt",
]  # fmt: skip
KEYS = [*TOKEN_KEYS, "gen_ai.input.messages", "gen_ai.system_instructions", "gen_ai.tool.definitions",
        "turnledger.tenant", "gen_ai.response.model", "x", "input.value"]  # fmt: skip
SCALARS = (
    st.builds(lambda i: {"intValue": str(i)}, st.integers(-(2**70), 2**70) | st.sampled_from([0, MAX_TOKENS, 2**63]))
    | st.builds(lambda f: {"doubleValue": f if math.isfinite(f) else str(f)}, st.floats())
    | st.builds(
        lambda t: {"stringValue": t},
        st.text(max_size=12) | st.sampled_from(["[1, 2]", "{}", "12", "NaN", "\ud800", '["\udfff"]']),
    )
    | st.builds(lambda b: {"boolValue": b}, st.booleans())
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.builds(lambda xs: {"arrayValue": {"values": xs}}, st.lists(inner, max_size=3))
        | st.builds(
            lambda kvs: {"kvlistValue": {"values": [{"key": k, "value": v} for k, v in kvs]}},
            st.lists(st.tuples(st.text(max_size=3), inner), max_size=3),
        )
    ),
    max_leaves=12,
)
EVENTS = st.lists(
    st.builds(
        lambda name, t, attrs: {"name": name, "timeUnixNano": str(t), "attributes": attrs},
        st.sampled_from(["turnledger.loop_detector.trip", "gen_ai.user.message", "e"]),
        st.integers(0, 2**64) | st.just(h.T0),
        st.lists(
            st.builds(lambda k, v: {"key": k, "value": v}, st.sampled_from(["shape", "tool", "content"]), VALUES),
            max_size=3,
        ),
    ),
    max_size=2,
)
HOSTILE = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
_ids = itertools.count(1)


@functools.cache
def _ledger():
    """One real (in-memory) ledger for every example: span ids never repeat across examples."""
    return open_ledger(":memory:")


def _rows_of(con, span_ids: list[str]) -> dict[str, dict[str, int]]:
    out = {}
    for name in ("spans", "charges", "contexts"):
        got = con.execute(
            f"SELECT span_id, count(*) FROM {name} WHERE span_id IN (SELECT unnest(?)) GROUP BY 1", [span_ids]
        ).fetchall()
        out[name] = dict(got)
    return out


@HOSTILE
@given(
    st.lists(st.tuples(st.lists(st.tuples(st.sampled_from(KEYS), VALUES), max_size=4), EVENTS), min_size=1, max_size=4),
    st.booleans(),
)
def test_any_attribute_values_are_written_whole_or_rejected_by_name(spans, as_arrow):
    con = _ledger()
    objs = []
    for attrs, events in spans:
        extra = [{"key": k, "value": v} for k, v in attrs]
        objs.append(h.chat(next(_ids), *extra, events=events))
    try:
        records = decode_json(h.request_json(objs))
    except MalformedInput:
        return
    batch = prepare(records)
    if as_arrow:  # as a decoder process ships it
        batch = batch.to_arrow()
    report = write(con, [batch])  # nothing but MalformedInput above may raise
    ids = [r.span_id for r in records]
    rejected = {r.split(": ", 1)[0].split("/")[1] for r in report.rejected}
    rows = _rows_of(con, ids)
    for r in records:
        if r.span_id in rejected:  # rejected: nothing of it anywhere
            assert all(r.span_id not in rows[t] for t in rows), r.span_id
            continue
        assert rows["spans"][r.span_id] == 1
        assert rows["charges"].get(r.span_id, 0) == 1  # every one of these is a model call
    flagged = con.execute(
        "SELECT span_id, invalid_usage, uncached_input_tokens, output_tokens FROM charges "
        "WHERE span_id IN (SELECT unnest(?))",
        [ids],
    ).fetchall()
    for _, invalid, tokens_in, tokens_out in flagged:  # counts within the ceiling, flagged or not
        assert 0 <= tokens_in <= MAX_TOKENS and 0 <= tokens_out <= MAX_TOKENS
        assert isinstance(invalid, bool)


def test_a_span_whose_row_cannot_be_built_is_rejected_alone_and_its_neighbours_land():
    # A lone surrogate (valid JSON escape, no UTF-8 column holds it) fails the span's own rows.
    bad = h.chat(2, {"key": "note", "value": {"stringValue": "\ud800"}})
    records = decode_json(h.request_json([h.chat(1), bad, h.chat(3)]))
    con = open_ledger(":memory:")
    report = write(con, [prepare(records)])
    assert report.spans_written == 2
    assert [r.split(": ")[0] for r in report.rejected] == [f"{h.TRACE}/{h.span_id(2)}"]
    assert "cannot be stored" in report.rejected[0]
    assert con.execute("SELECT count(*) FROM charges").fetchone() == (2,)


def test_each_token_count_the_issue_names_is_flagged_never_a_silent_zero():
    for value, ok in [(100, True), ("120", True), (3.0, True), (MAX_TOKENS, True), (-5, False), (math.nan, False),
                      (2.5, False), ("many", False), (10**20, False), ("99999999999999999999", False),
                      (True, False), ([1], False), (MAX_TOKENS + 1, False), (math.inf, False)]:  # fmt: skip
        (record,) = decode_json(h.request_json([h.chat(1)]))
        record.attributes["gen_ai.usage.output_tokens"] = value
        call = model_call(record)
        assert call is not None
        assert (call.invalid_usage == "") is ok, value
        assert call.tokens.output == (int(value) if ok else 0)
        if not ok:
            assert "gen_ai.usage.output_tokens" in call.invalid_usage


def test_an_int_past_int64_from_the_sdk_exporter_never_reaches_duckdb(tmp_path):
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("t").start_as_current_span("chat x") as span:
        span.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.request.model": h.MODEL,
                             "gen_ai.usage.input_tokens": 2**63, "gen_ai.usage.output_tokens": 2**70, "big": -(2**64)})  # fmt: skip
    (record,) = span_records(memory.get_finished_spans())
    assert record.attributes["gen_ai.usage.input_tokens"] == str(2**63)  # kept as its digits
    assert record.attributes["big"] == str(-(2**64))
    con = open_ledger(tmp_path / "l.duckdb")
    report = write(con, [prepare([record])])
    assert (report.spans_written, report.rejected) == (1, [])
    assert con.execute("SELECT invalid_usage, uncached_input_tokens FROM charges").fetchall() == [(True, 0)]


def test_an_array_nested_past_the_limit_from_protobuf_rejects_only_its_span():
    records = decode_protobuf(h.must_show_protobuf())
    problems = {r.span_id: r.problem for r in records if r.problem}
    assert problems == {h.span_id(8): "attributes.deep: an attribute value is nested deeper than 32 levels"}


def test_ingest_names_rejected_and_flagged_spans_per_file_and_line(tmp_path, capsys):
    good = h.request_json([h.chat(n) for n in h.GOOD]).decode()
    bad = h.request_json([s for s, _ in h.HOSTILE.values()]).decode()
    path = tmp_path / "spans.jsonl"
    path.write_text(f"{good}\n{bad}\n")
    db = tmp_path / "l.duckdb"
    assert main(["ingest", str(path), "--db", str(db)]) == 0
    err = capsys.readouterr().err
    for n in h.REJECTED:
        assert f"line 2: rejected {h.TRACE}/{h.span_id(n)}" in err
    for n in h.INVALID_USAGE + h.CONTENT_NOT_STORED:
        assert f"line 2: kept, flagged {h.TRACE}/{h.span_id(n)}" in err
    con = open_ledger(db)
    report = build_report(con)
    assert report["invalid_usage_calls"] == len(h.INVALID_USAGE)
    assert con.execute("SELECT count(*) FROM spans").fetchone() == (8,)
    # a file of the wrong shape is named with the problem, and nothing is ingested
    (tmp_path / "bad.json").write_text(json.dumps({"resourceSpans": [{"resource": 7}]}))
    assert main(["ingest", str(tmp_path / "bad.json"), str(path), "--db", str(tmp_path / "other.duckdb")]) != 0
    err = capsys.readouterr().err
    assert "nothing was ingested" in err and "bad.json: resourceSpans[0].resource: expected an object" in err
