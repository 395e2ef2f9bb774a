"""Judgments (issue #15): evaluations read from spans at ingest, feedback validated, the review queue."""

from __future__ import annotations

import dataclasses
import math

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collector.demo.samples import build
from ledger.errors import InputError, NotFound
from ledger.ingest import ingest, prepare, write
from ledger.quality import EVALUATION_EVENT, QualityPolicy, feedback_judgment, judgment_row, review
from ledger.redact import default_policy
from ledger.spans import SpanEvent

SECRET = "sk-ant-api03-" + "A1b2C3d4" * 10


def _with_event(spans, attributes, *, on=0):
    """The spans with one ``gen_ai.evaluation.result`` event added to ``spans[on]``."""
    s = spans[on]
    event = SpanEvent(EVALUATION_EVENT, s.end_ns, attributes)
    return [dataclasses.replace(s, events=(*s.events, event)), *spans[:on], *spans[on + 1 :]]


def _evaluations(con):
    return con.execute(
        "SELECT kind, name, score, label, explanation, failed, safety, span_id FROM evaluations ORDER BY eval_id"
    ).fetchall()


def test_an_evaluation_event_becomes_one_row_and_a_redelivery_adds_none(ledger):
    spans = _with_event(
        build("five_turn_run"),
        {
            "gen_ai.evaluation.name": "Relevance",
            "gen_ai.evaluation.score.value": 0.2,
            "gen_ai.evaluation.score.label": "not_relevant",
            "gen_ai.evaluation.explanation": f"the answer leaked {SECRET}",
        },
    )
    ingest(ledger, spans)
    ingest(ledger, spans)
    ((kind, name, score, label, explanation, failed, safety, span_id),) = _evaluations(ledger)
    assert (kind, name, score, label, failed, safety) == ("evaluation", "Relevance", 0.2, "not_relevant", True, False)
    assert span_id == spans[0].span_id
    assert SECRET not in explanation and "[REDACTED" in explanation
    # the failed evaluation queued the run, once
    (item,) = review.items(ledger)
    assert (item["trace_id"], item["reason"], item["status"]) == (spans[0].trace_id, "failed_evaluation", "open")


def test_openinference_evaluation_attributes_are_judgments(ledger):
    s = build("five_turn_run")
    attrs = {
        **s[0].attributes,
        "evaluation.name": "toxicity",
        "evaluation.score": 1.0,
        "evaluation.label": "unsafe",
        "annotations.0.annotation.name": "helpfulness",
        "annotations.0.annotation.score": 0.9,
        "annotations.0.annotation.annotator_kind": "HUMAN",
    }
    ingest(ledger, [dataclasses.replace(s[0], attributes=attrs), *s[1:]])
    rows = ledger.execute("SELECT name, failed, safety, source FROM evaluations ORDER BY name").fetchall()
    assert rows == [("helpfulness", False, False, "human"), ("toxicity", True, True, "openinference")]


@pytest.mark.parametrize(
    "attributes",
    [
        {"gen_ai.evaluation.score.value": 1.0},  # no name
        {"gen_ai.evaluation.name": "x", "gen_ai.evaluation.score.value": math.nan},
        {"gen_ai.evaluation.name": "x", "gen_ai.evaluation.score.value": "high"},
        {"gen_ai.evaluation.name": "x" * 10_000, "gen_ai.evaluation.score.value": 1.0},
    ],
)
def test_a_bad_evaluation_is_flagged_and_its_span_still_stored(ledger, attributes):
    spans = _with_event(build("five_turn_run"), attributes)
    batch = prepare(spans)
    assert not batch.rejected
    assert any("evaluation.result not stored" in note for note in batch.flagged)
    write(ledger, [batch])
    assert ledger.execute("SELECT count(*) FROM evaluations").fetchone() == (0,)
    assert ledger.execute("SELECT count(*) FROM spans").fetchone() == (len(spans),)


def _root(spans):
    return next(s for s in spans if not s.parent_span_id)


def test_an_errored_run_enters_the_queue_with_its_outcome_first(ledger):
    spans = build("five_turn_run")
    root = _root(spans)
    errored = dataclasses.replace(root, status_code="ERROR", attributes={**root.attributes, "error.type": "x"})
    ingest(ledger, [errored, *(s for s in spans if s is not root)])
    (item,) = review.items(ledger)
    assert item["reason"] == "errored"
    healthy = build("budget_warn")
    ingest(ledger, healthy)
    assert [i["trace_id"] for i in review.items(ledger)] == [root.trace_id]


def test_tag_and_close_by_hand(ledger):
    spans = build("five_turn_run")
    ingest(ledger, spans)
    trace = spans[0].trace_id
    assert review.items(ledger) == []
    added = review.add(ledger, trace, note="customer complained")
    assert (added["reason"], added["status"], added["note"]) == ("manual", "open", "customer complained")
    tagged = review.tag(ledger, trace, ["wrong_tool", "hallucination"], note=f"key {SECRET}", reviewer="ana")
    assert tagged["tags"] == ["wrong_tool", "hallucination"] and SECRET not in tagged["note"]
    with pytest.raises(InputError, match="not_a_tag"):
        review.tag(ledger, trace, ["not_a_tag"])
    closed = review.close(ledger, trace, reviewer="ana")
    assert closed["status"] == "closed" and closed["closed_at"]
    assert [i["trace_id"] for i in review.items(ledger, tag="wrong_tool")] == [trace]
    assert review.items(ledger, status="open") == []
    with pytest.raises(NotFound):
        review.close(ledger, "f" * 32)


def test_review_tags_are_extensible():
    p = QualityPolicy.from_json('{"review_tags": ["slow"], "negative_labels": ["meh"]}')
    assert p.review_tags[-1] == "slow" and "bad_plan" in p.review_tags
    assert p.failed("feedback", "x", None, "MEH")


TRACE = "ab" * 16


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ([], "JSON object"),
        ({"score": 1}, "trace_id"),
        ({"trace_id": "zz", "score": 1}, "trace_id"),
        ({"trace_id": "0" * 32, "score": 1}, "trace_id"),
        ({"trace_id": TRACE}, "score"),
        ({"trace_id": TRACE, "score": "1"}, "score"),
        ({"trace_id": TRACE, "score": True}, "score"),
        ({"trace_id": TRACE, "score": math.inf}, "score"),
        ({"trace_id": TRACE, "score": 10**400}, "score"),
        ({"trace_id": TRACE, "score": 1, "span_id": "12"}, "span_id"),
        ({"trace_id": TRACE, "score": 1, "comment": "x" * 100_000}, "comment"),
        ({"trace_id": TRACE, "score": 1, "comment": {"nested": [1]}}, "comment"),
        ({"trace_id": TRACE, "score": 1, "tags": ["a"] * 1000}, "tags"),
        ({"trace_id": TRACE, "score": 1, "tags": [["a"]]}, "tags"),
        ({"trace_id": TRACE, "score": 1, "label": "\ud800"}, "label"),
        ({"trace_id": TRACE, "score": 1, "id": ""}, "id"),
        ({"trace_id": TRACE, "score": 1, "scroe": 1}, "scroe"),
    ],
)
def test_feedback_names_the_field_at_fault(doc, field):
    with pytest.raises(InputError, match=field):
        feedback_judgment(doc, default_policy())


@pytest.mark.parametrize(
    ("score", "label", "failed"),
    [
        (-1, None, True),
        (0, None, True),
        (0.4, None, False),
        (1, None, False),
        (None, "thumbs_down", True),
        (1, "bad", True),
    ],
)
def test_negative_feedback(score, label, failed):
    j = feedback_judgment({"trace_id": TRACE, "score": score, "label": label}, None)
    assert j.kind == "feedback" and judgment_row(j, 0)[11] is failed  # the row's `failed` column


def test_feedback_text_is_redacted():
    j = feedback_judgment({"trace_id": TRACE, "score": 1, "comment": f"my key is {SECRET}"}, default_policy())
    assert SECRET not in (j.explanation or "")


def test_the_judged_sample_is_committed_up_to_date_and_fills_quality_and_review(ledger):
    from pathlib import Path

    from collector.demo.samples import QUALITY_FOLDER, judged_runs
    from collector.otlp import encode_json, read_file

    path = Path(__file__).resolve().parents[2] / "sample_traces" / QUALITY_FOLDER / "judged_runs.json"
    committed = orjson.loads(path.read_bytes())
    committed.pop("_generated")
    assert committed == orjson.loads(orjson.dumps(encode_json(judged_runs())))
    ingest(ledger, read_file(path))
    assert [i["reason"] for i in review.items(ledger)] == ["failed_evaluation", "failed_evaluation"]
    violations = ledger.execute("SELECT name, label FROM evaluations WHERE safety AND failed").fetchall()
    assert violations == [("safety", "unsafe")]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
_FIELDS = st.sampled_from(["id", "trace_id", "span_id", "score", "label", "tags", "comment", "source", "name"])


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        _JSON,
        st.dictionaries(_FIELDS, _JSON, max_size=9),
        st.dictionaries(_FIELDS, _JSON, max_size=9).map(lambda d: {**d, "trace_id": TRACE}),  # past the id check
    )
)
def test_any_feedback_body_is_a_judgment_or_an_input_error(doc):
    try:
        j = feedback_judgment(doc, default_policy())
    except InputError as exc:
        assert str(exc)  # names the field at fault
    else:
        assert len(j.trace_id) == 32 and (j.score is None or math.isfinite(j.score))
        judgment_row(j, 0)
