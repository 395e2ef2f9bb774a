"""The Quality and Review pages through AppTest, on a real ledger with judgments and a review queue."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from collector.demo.samples import build
from ledger.ingest import ingest, write
from ledger.quality import EVALUATION_EVENT, feedback_judgment, review
from ledger.rows import judgment_batch
from ledger.spans import SpanEvent
from ledger.store import open_ledger

from .test_pages import app, figures, metrics, table  # noqa: F401  (app: a fixture)


def judged_ledger(path: Path) -> tuple[Path, str, str]:
    """Two runs: one judged unsafe by an evaluation event and given negative feedback, one healthy."""
    judged, healthy = build("five_turn_run"), build("budget_warn")
    chat = judged[0]
    event = SpanEvent(
        EVALUATION_EVENT,
        chat.end_ns,
        {
            "gen_ai.evaluation.name": "toxicity",
            "gen_ai.evaluation.score.value": 0.0,
            "gen_ai.evaluation.score.label": "unsafe",
        },
    )
    con = open_ledger(path)
    try:
        ingest(con, [dataclasses.replace(chat, events=(*chat.events, event)), *judged[1:]])
        ingest(con, healthy)
        trace = chat.trace_id
        write(con, [judgment_batch([feedback_judgment({"trace_id": trace, "score": -1, "id": "f1"}, None)])])
    finally:
        con.close()
    return path, trace, healthy[0].trace_id


@pytest.fixture
def quality_db(tmp_path: Path) -> tuple[Path, str, str]:
    return judged_ledger(tmp_path / "quality.duckdb")


def test_quality_page_shows_success_scores_and_the_violation(app, quality_db):  # noqa: F811
    db, trace, _ = quality_db
    at = app(db, "quality")
    shown = metrics(at)
    assert shown["Task success"][0] == "100.0%"  # both runs completed
    assert shown["Passed evaluation"][0] == "0.0%" and shown["Safety violations"][0] == "1"
    assert set(figures(at)) == {"Task success rate per day", "“toxicity”: mean score per day"}
    violations = table(at, "trace_id", "name")
    assert violations["trace_id"].tolist() == [trace]


def test_quality_page_says_how_to_send_judgments_when_there_are_none(app, tmp_path):  # noqa: F811
    con = open_ledger(tmp_path / "plain.duckdb")
    ingest(con, build("five_turn_run"))
    con.close()
    at = app(tmp_path / "plain.duckdb", "quality")
    assert any("POST /v1/feedback" in i.value and "gen_ai.evaluation.result" in i.value for i in at.info)


def test_review_page_lists_the_queue_and_tags_a_run(app, quality_db):  # noqa: F811
    db, trace, healthy = quality_db
    at = app(db, "review")
    assert table(at, "trace_id", "reason")["trace_id"].tolist() == [trace]
    at.selectbox(key="review_trace").set_value(trace)
    at.multiselect(key="review_tags").set_value(["hallucination"])
    at.text_area(key="review_note").set_value("invented a date")
    at.button[0].click().run()  # Save tags
    assert not at.exception, [e.value for e in at.exception]
    con = open_ledger(db, read_only=True)
    try:
        (item,) = review.items(con)
    finally:
        con.close()
    assert (item["tags"], item["note"]) == (["hallucination"], "invented a date")
    assert healthy not in {item["trace_id"]}


def test_review_page_lists_an_item_whose_spans_have_not_arrived(app, quality_db):  # noqa: F811
    """A run queued by hand (or by feedback) ahead of its spans is listed, filters or not, saying so."""
    db, trace, _ = quality_db
    early = "ab" * 16
    con = open_ledger(db)
    try:
        review.add(con, early, note="user says it hung")
    finally:
        con.close()
    at = app(db, "review")
    queue = table(at, "trace_id", "reason").set_index("trace_id")
    assert queue.index.tolist() == [early, trace]  # newest first
    assert (
        queue.loc[early, "stop_cause"] == "spans not received yet"
        and queue.loc[trace, "stop_cause"] != queue.loc[early, "stop_cause"]
    )
    at.sidebar.selectbox(key="f_tenant").set_value("acme").run()
    assert early in table(at, "trace_id", "reason")["trace_id"].tolist()


def test_the_run_explorer_shows_the_runs_judgments(app, quality_db):  # noqa: F811
    db, trace, _ = quality_db
    at = app(db, "run_explorer", trace=trace)
    shown = table(at, "kind", "name", "failed")
    assert sorted(zip(shown["kind"], shown["name"], strict=True)) == [
        ("evaluation", "toxicity"),
        ("feedback", "user_feedback"),
    ]
    assert shown["failed"].all()
