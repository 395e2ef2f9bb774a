"""Issue 15, item 6: alerts on health and quality through the budget rules.

Feedback is written as ``POST /v1/feedback`` writes it (``ledger.quality`` →
``ledger.write``) and the governor hears of it like of any commit; evaluation rows
are also inserted directly (``judge``) beside an ingest of their trace.
The latency rule reads the committed harness scenario ``pto_happy_path`` (2.15 s)
and the same run with its first tool scripted to take 5 s longer.
"""

from __future__ import annotations

import dataclasses
import itertools
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from collector.cli import main
from collector.otlp import read_file
from ledger.budgets import Governor, Rule, Scope, WebhookTarget, add_rule, list_alerts, new_rule_id
from ledger.budgets.evaluate import evaluate
from ledger.budgets.rules import BudgetError, format_metric
from ledger.budgets.windows import ManualClock
from ledger.ingest import ingest
from ledger.quality import feedback_judgment
from ledger.rows import judgment_batch
from ledger.spans import SpanRecord
from ledger.store import open_ledger
from ledger.write import IngestReport, write

from .conftest import NOON_ISH, ns, spend_spans

HARNESS = Path(__file__).resolve().parents[2] / "sample_traces" / "harness"
_ids = itertools.count()


def judge(con, trace_id: str, *, failed: bool, safety: bool, at, name: str = "safety") -> None:  # type: ignore[no-untyped-def]
    """One evaluation row, as the quality helper's writers store it (migration 14's contract)."""
    con.execute(
        "INSERT INTO evaluations (eval_id, kind, trace_id, span_id, tenant, name, score, label, explanation, tags, "
        "source, failed, safety, time, ingested_at) VALUES (?, 'evaluation', ?, NULL, 'acme', ?, ?, ?, NULL, '[]', "
        "'test', ?, ?, make_timestamp_ns(?), now())",
        [
            f"ev-{next(_ids)}",
            trace_id,
            name,
            0.0 if failed else 1.0,
            "fail" if failed else "pass",
            failed,
            safety,
            ns(at),
        ],
    )


def feedback(con, trace_id: str, *, score: float, name: str, at) -> IngestReport:  # type: ignore[no-untyped-def]
    """One feedback judgment committed the way the receiver's ``POST /v1/feedback`` commits it."""
    doc = {"trace_id": trace_id, "score": score, "name": name}
    return write(con, [judgment_batch([feedback_judgment(doc, None, now_ns=ns(at))])])


def test_a_safety_evaluation_with_a_violation_fires_exactly_one_alert_delivered_to_the_webhook(
    tmp_path, clock, receiver
):
    con = open_ledger(tmp_path / "ledger.duckdb")
    governor = Governor(clock=clock)
    rule = Rule(
        new_rule_id(), "no-unsafe", Scope(), "rolling_5m", Decimal(1), metric="safety_violations",
        webhooks=(WebhookTarget(receiver.url + "/hook"),),
    )  # fmt: skip
    add_rule(con, rule)
    first = spend_spans("0.01", at=NOON_ISH, key="safe-run", root=True)
    assert governor.after_ingest(con, ingest(con, first)) == []  # a run with no judgment: nothing to say
    trace = first[0].trace_id
    # Failed but not a safety judgment; then a safety judgment that passed.
    assert governor.after_ingest(con, feedback(con, trace, score=-1, name="helpfulness", at=clock())) == []
    assert governor.after_ingest(con, feedback(con, trace, score=1, name="safety", at=clock())) == []

    clock.advance(timedelta(seconds=30))
    fired = governor.after_ingest(con, feedback(con, trace, score=-1, name="safety", at=clock()))  # the violation
    assert [(e.level, e.value) for e in fired] == [("exceeded", Decimal(1))]

    clock.advance(timedelta(seconds=30))  # a second violation in the same episode, through an ingest
    later = spend_spans("0.01", at=clock(), key="unsafe-run", root=True)
    judge(con, later[0].trace_id, failed=True, safety=True, at=clock())
    assert governor.after_ingest(con, ingest(con, later)) == []
    assert evaluate(con, rule, clock()).value == Decimal(2)

    governor.join(10)
    assert [r.body["level"] for r in receiver.wait_for("/hook", 1)] == ["exceeded"]
    assert len(list_alerts(con)) == 1
    assert "safety_violations rule 'no-unsafe'" in fired[0].text() and "EXCEEDED: 1 of 1" in fired[0].text()
    governor.close()
    con.close()


def _slow_tool(spans: list[SpanRecord], extra_ns: int) -> list[SpanRecord]:
    """The same run under a new trace id, its first tool taking ``extra_ns`` longer (later spans shift)."""
    tool = min((s for s in spans if s.name.startswith("execute_tool")), key=lambda s: s.start_ns)
    out = []
    for s in spans:
        start = s.start_ns + (extra_ns if s.start_ns >= tool.end_ns else 0)
        end = s.end_ns + (extra_ns if s.end_ns >= tool.end_ns else 0)
        out.append(dataclasses.replace(s, trace_id="5" * 32, start_ns=start, end_ns=end))
    return out


def test_a_p99_latency_rule_fires_on_a_scripted_slow_tool_and_not_on_the_healthy_scenario(tmp_path):
    healthy = read_file(HARNESS / "pto_happy_path.json")
    start = min(s.start_ns for s in healthy)
    clock = ManualClock(datetime.fromtimestamp(start / 1e9, UTC) + timedelta(minutes=1))
    con = open_ledger(tmp_path / "ledger.duckdb")
    governor = Governor(clock=clock)
    rule = Rule(new_rule_id(), "p99-3s", Scope(), "rolling_5m", Decimal(3000), metric="p99_run_latency")
    add_rule(con, rule)

    assert governor.after_ingest(con, ingest(con, healthy)) == []
    ok = evaluate(con, rule, clock())
    assert ok.level == "ok" and format_metric(rule.metric, ok.value) == "2,153 ms"

    fired = governor.after_ingest(con, ingest(con, _slow_tool(healthy, 5_000_000_000)))
    assert [e.level for e in fired] == ["warn", "exceeded"]  # ok straight past the limit: both lines crossed
    assert format_metric(rule.metric, fired[-1].value) == "7,153 ms"
    clock.advance(timedelta(minutes=10))  # both runs leave the 5-minute window
    assert [e.level for e in governor.sweep(con)] == ["ok"]
    governor.close()
    con.close()


def test_tool_error_and_success_rates_follow_their_scripted_failures(tmp_path):
    """recovering_date_error: one of its 2 tool calls fails; looping_search's loop is soft failures."""
    con = open_ledger(tmp_path / "ledger.duckdb")
    for name in ("recovering_date_error", "looping_search", "retry_storm"):
        ingest(con, read_file(HARNESS / f"{name}.json"))
    tools = {
        t: con.execute(
            "SELECT count(*), count(*) FILTER (WHERE status_code = 'ERROR' OR soft_failure) FROM spans WHERE tool = ?",
            [t],
        ).fetchone()
        for (t,) in con.execute("SELECT DISTINCT tool FROM spans WHERE tool IS NOT NULL").fetchall()
    }
    for tool, (calls, failures) in tools.items():
        rule = Rule(
            new_rule_id(), f"t-{tool}", Scope("tool", tool), "month", Decimal("0.5"), metric="tool_failure_rate"
        )
        value = evaluate(con, rule, NOON_ISH).value
        assert value == Decimal(failures) / Decimal(calls), tool
    everything = Rule(new_rule_id(), "all", Scope(), "month", Decimal("0.5"), metric="tool_failure_rate")
    total = sum(c for c, _ in tools.values()), sum(f for _, f in tools.values())
    assert evaluate(con, everything, NOON_ISH).value == Decimal(total[1]) / Decimal(total[0])
    errors = Rule(new_rule_id(), "err", Scope(), "month", Decimal("0.1"), metric="model_call_error_rate")
    attempts, failed = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE status_code = 'ERROR') FROM charges"
    ).fetchone()
    assert failed > 0 and evaluate(con, errors, NOON_ISH).value == Decimal(failed) / Decimal(attempts)
    success = Rule(new_rule_id(), "ok", Scope(), "month", Decimal("0.9"), metric="task_success_rate")
    done = con.execute("SELECT count(*) FILTER (WHERE stop_cause = 'completed'), count(*) FROM runs").fetchone()
    assert evaluate(con, success, NOON_ISH).value == Decimal(done[0]) / Decimal(done[1])
    trace = con.execute("SELECT trace_id FROM runs WHERE stop_cause = 'completed' LIMIT 1").fetchone()[0]
    judge(con, trace, failed=True, safety=False, at=NOON_ISH, name="task_success")  # a completed run judged failed
    assert evaluate(con, success, NOON_ISH).value == Decimal(done[0] - 1) / Decimal(done[1])
    con.close()


@pytest.mark.parametrize(
    ("metric", "value", "shown"),
    [
        ("p99_run_latency", "3200.5", "3,200 ms"),
        ("safety_violations", "2", "2"),
        ("tool_failure_rate", "0.25", "25.0%"),
    ],
)
def test_each_health_metric_is_shown_in_its_own_unit(metric, value, shown):
    assert format_metric(metric, Decimal(value)) == shown


def test_a_count_limit_is_whole_and_a_tool_scope_belongs_to_the_tool_failure_rate():
    with pytest.raises(BudgetError, match="whole count"):
        Rule(new_rule_id(), "x", Scope(), "rolling_5m", Decimal("0.5"), metric="safety_violations")
    with pytest.raises(BudgetError, match="tool_failure_rate"):
        Rule(new_rule_id(), "y", Scope("tool", "search"), "day", Decimal(1), metric="spend")
    assert (
        "p99_run_latency >= 3,000 ms"
        in Rule(new_rule_id(), "z", Scope(), "rolling_5m", Decimal(3000), metric="p99_run_latency").describe()
    )


def test_the_cli_adds_health_rules_and_shows_them_in_their_units(tmp_path, capsys):
    db = str(tmp_path / "ledger.duckdb")
    now = datetime.now(UTC)
    for argv in (
        ["p99", "--metric", "p99_run_latency", "--limit", "3000", "--window", "rolling_5m"],
        ["unsafe", "--metric", "safety_violations", "--limit", "1", "--window", "rolling_5m"],
    ):
        assert main(["budget", "add", *argv, "--db", db]) == 0
    con = open_ledger(db)
    spans = spend_spans("0.01", at=now - timedelta(minutes=1), key="judged", root=True)
    ingest(con, spans)
    judge(con, spans[0].trace_id, failed=True, safety=True, at=now - timedelta(seconds=30))
    con.close()
    capsys.readouterr()
    assert main(["budget", "sweep", "--db", db]) == 0
    assert main(["budget", "list", "--db", db]) == 0
    listed = capsys.readouterr().out
    assert "3,000 ms" in listed and "p99_run_latency" in listed
    assert main(["alerts", "--db", db]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert "exceeded unsafe" in line and "value 1 threshold 1" in line
