"""`turnledger feedback`, `review` and `cases export` on the ledger file (no server)."""

from __future__ import annotations

import json

import pytest

from collector.cli import main
from collector.demo.samples import build
from ledger.content import load_turn
from ledger.errors import InputError
from ledger.ingest import ingest
from ledger.store import open_ledger


def test_feedback_queue_tag_close_and_export_on_the_file(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TURNLEDGER_SERVER", raising=False)
    db = tmp_path / "l.duckdb"
    spans = build("five_turn_run")
    con = open_ledger(db)
    ingest(con, spans)
    con.close()
    trace = spans[0].trace_id
    db_args = ["--db", str(db)]

    assert main(["feedback", trace, "--score", "-1", "--comment", "wrong refund amount", "--id", "u1", *db_args]) == 0
    assert main(["feedback", trace, "--score", "-1", "--id", "u1", *db_args]) == 0  # the same id: stored once
    assert main(["feedback", "not-a-trace", "--score", "1", *db_args]) == 2
    assert "trace_id" in capsys.readouterr().err
    unseen = "f" * 32  # #31: kept (its spans may come later), with a warning rather than a silent success
    assert main(["feedback", unseen, "--score", "1", *db_args]) == 0
    assert f"warning: no run with trace id {unseen}" in capsys.readouterr().err
    assert main(["review", "add", unseen, *db_args]) == 0
    assert "warning: no run with trace id" in capsys.readouterr().err
    assert main(["review", "close", unseen, *db_args]) == 0
    capsys.readouterr()
    assert main(["review", "list", "--status", "open", "--json", *db_args]) == 0
    (item,) = json.loads(capsys.readouterr().out)
    assert (item["trace_id"], item["reason"]) == (trace, "negative_feedback")

    assert main(["review", "tag", trace, "bad_plan", "tool_misuse", "--note", "refunded twice", *db_args]) == 0
    assert main(["review", "tag", trace, "made_up", *db_args]) == 2
    assert main(["review", "close", trace, "--reviewer", "ana", *db_args]) == 0
    capsys.readouterr()
    out = tmp_path / "cases.jsonl"
    assert main(["cases", "export", "--tag", "tool_misuse", "--out", str(out), *db_args]) == 0
    (case,) = [json.loads(line) for line in out.read_text().splitlines()]
    con = open_ledger(db, read_only=True)
    try:
        last = load_turn(con, trace, case["span_id"])
        (feedbacks,) = con.execute(
            "SELECT count(*) FROM evaluations WHERE kind = 'feedback' AND trace_id = ?", [trace]
        ).fetchone()
        (last_call,) = con.execute(
            "SELECT span_id FROM charges WHERE trace_id = ? ORDER BY start_time DESC LIMIT 1", [trace]
        ).fetchone()
    finally:
        con.close()
    assert feedbacks == 1
    assert (case["turn"], case["span_id"]) == ("last_call", last_call)  # feedback judged the run, not a call
    assert case["request"] == last.request and case["response"] == last.response
    assert case["tags"] == ["bad_plan", "tool_misuse"] and case["outcome"]["stop_cause"] == "completed"
    assert main(["cases", "export", "--tag", "hallucination", "--out", str(out), *db_args]) == 0
    assert out.read_text() == ""


@pytest.mark.parametrize(
    ("setting", "field"),
    [
        ('{"evaluation_pass_at_least": "high"}', "evaluation_pass_at_least"),
        ('{"feedback_fail_at_or_below": true}', "feedback_fail_at_or_below"),
        ('{"evaluation_pass_thresholds": [0.5]}', "evaluation_pass_thresholds"),
        ('{"evaluation_pass_thresholds": {"helpful": null}}', "evaluation_pass_thresholds"),
        ('{"review_tags": "slow"}', "review_tags"),
        ('{"safety_names": [1, 2]}', "safety_names"),
        ('{"colour": "blue"}', "give a JSON object"),
        ("[1", "not JSON"),
    ],
)
def test_serve_refuses_a_wrong_quality_policy_at_start_naming_the_field(setting, field, tmp_path, monkeypatch):
    """A wrong TURNLEDGER_QUALITY stops `serve` before it listens, in one line naming the field; found
    only at the first judgment, it would fail every feedback post instead."""
    import argparse

    from collector.cli.serve import _config, add_serve
    from ledger.quality import policy

    parser = argparse.ArgumentParser()
    add_serve(parser)
    monkeypatch.setenv("TURNLEDGER_QUALITY", setting)
    policy.cache_clear()
    try:
        with pytest.raises(InputError, match=f"TURNLEDGER_QUALITY.*{field}"):
            _config(parser.parse_args(["--db", str(tmp_path / "x.duckdb")]))
    finally:
        policy.cache_clear()
