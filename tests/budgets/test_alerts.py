"""The alert state machine: one event per (rule, level, window), with its figures."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from ledger.budgets import AlertBook, AlertState, Governor, Rule, Scope, add_rule, list_alerts, new_rule_id, transition
from ledger.budgets.evaluate import Evaluation, evaluate
from ledger.budgets.rules import level_for
from ledger.budgets.windows import window_for
from ledger.ingest import ingest

from .conftest import spend_spans

DAY = Rule("b_day", "acme-daily", Scope("tenant", "acme"), "day", Decimal("1.00"))
ROLLING = Rule("b_roll", "acme-hourly", Scope("tenant", "acme"), "rolling_hour", Decimal("1.00"))
T = datetime(2026, 9, 21, 14, tzinfo=UTC)


def ev(rule: Rule, value: str, at: datetime = T) -> Evaluation:
    v = Decimal(value)
    return Evaluation(rule, window_for(rule, at), v, level_for(rule, v), at, {"charges": 1})


def run(rule: Rule, values: list[tuple[str, datetime]], state: AlertState | None = None):
    state = state or AlertState()
    fired = []
    for value, at in values:
        state, events = transition(state, ev(rule, value, at))
        fired += [(e.previous_level, e.level, e.window_key) for e in events]
    return state, fired


def test_ok_warn_exceeded_each_once_per_day():
    minutes = [T + timedelta(minutes=i) for i in range(8)]
    values = ["0.10", "0.79", "0.80", "0.85", "0.99", "1.00", "1.20", "5.00"]
    state, fired = run(DAY, list(zip(values, minutes, strict=True)))
    key = "day:2026-09-21@UTC"
    assert fired == [("ok", "warn", key), ("warn", "exceeded", key)]
    assert state == AlertState("exceeded", key, frozenset({"warn", "exceeded"}))


def test_a_jump_past_the_limit_fires_warn_and_exceeded():
    _, fired = run(DAY, [("0.10", T), ("1.25", T)])
    assert [f[1] for f in fired] == ["warn", "exceeded"]


def test_rollover_announces_ok_once_then_the_new_day_alerts_again():
    tomorrow = T + timedelta(days=1)
    state, fired = run(DAY, [("1.20", T), ("0.00", tomorrow), ("0.00", tomorrow), ("0.90", tomorrow)])
    assert fired == [
        ("ok", "warn", "day:2026-09-21@UTC"),
        ("ok", "exceeded", "day:2026-09-21@UTC"),
        ("exceeded", "ok", "day:2026-09-22@UTC"),
        ("ok", "warn", "day:2026-09-22@UTC"),
    ]
    assert state.level == "warn"


def test_a_quiet_day_after_a_quiet_day_says_nothing():
    _, fired = run(DAY, [("0.10", T), ("0.00", T + timedelta(days=1))])
    assert fired == []


def test_within_a_calendar_window_a_level_never_fires_twice():
    # ok -> warn -> ok -> warn in the same day (a limit raised, charges removed): one warn, one ok.
    _, fired = run(DAY, [("0.9", T), ("0.1", T), ("0.9", T), ("1.5", T), ("0.9", T)])
    assert [f[1] for f in fired] == ["warn", "ok", "exceeded"]


def test_rolling_windows_dedup_per_episode():
    t = [T + timedelta(minutes=10 * i) for i in range(6)]
    _, fired = run(ROLLING, [("0.9", t[0]), ("1.1", t[1]), ("0.9", t[2]), ("0.1", t[3]), ("0.9", t[4])])
    levels = [(prev, lvl) for prev, lvl, _ in fired]
    # exceeded -> warn is silent (the level is tracked, not announced); back to ok closes the episode.
    assert levels == [("ok", "warn"), ("warn", "exceeded"), ("warn", "ok"), ("ok", "warn")]
    episodes = {key for *_, key in fired}
    assert len(episodes) == 2  # the second warn opened a new episode


def test_floor_rules_without_a_warn_band_go_straight_to_exceeded():
    floor = Rule("b_cache", "cache", Scope(), "rolling_day", Decimal("0.7"), metric="cache_hit_rate")
    _, fired = run(floor, [("0.745", T), ("0.2", T), ("0.1", T), ("0.8", T)])
    assert [f[1] for f in fired] == ["exceeded", "ok"]


def test_events_carry_the_figures_that_caused_them():
    _, events = transition(AlertState(), ev(DAY, "0.82"), {"traces": ["ab" * 16]})
    (e,) = events
    assert e.level == "warn" and e.value == Decimal("0.82") and e.threshold == Decimal("0.80")
    body = e.to_dict()
    assert body["rule"]["name"] == "acme-daily" and body["value"] == "0.82" and body["limit"] == "1"
    assert body["figures"]["cause"] == {"traces": ["ab" * 16]}
    assert body["figures"]["figures"] == {"charges": 1}
    assert body["window"]["dedup_key"] == "day:2026-09-21@UTC"
    assert "$0.82 of $1.00 (82%)" in e.text() and "acme-daily" in e.text()


def test_the_book_restores_its_state_after_a_restart(ledger, clock):
    rule = add_rule(ledger, Rule(new_rule_id(), "acme-daily", Scope("tenant", "acme"), "day", Decimal("1.00")))
    ingest(ledger, spend_spans("0.90", at=clock()))
    first = AlertBook().observe(ledger, evaluate(ledger, rule, clock()))
    assert [e.level for e in first] == ["warn"]
    restarted = AlertBook()  # a new process: nothing in memory
    assert restarted.observe(ledger, evaluate(ledger, rule, clock())) == []
    ingest(ledger, spend_spans("0.20", at=clock()))
    assert [e.level for e in restarted.observe(ledger, evaluate(ledger, rule, clock()))] == ["exceeded"]
    stored = list_alerts(ledger, budget="acme-daily")
    assert [(a["level"], a["previous_level"]) for a in stored] == [("exceeded", "warn"), ("warn", "ok")]
    assert stored[0]["value"] == Decimal("1.10") and stored[0]["threshold"] == Decimal("1.00")
    assert stored[0]["window_key"] == "day:2026-09-21@UTC"


def test_per_run_rules_alert_once_per_run(ledger, clock):
    add_rule(ledger, Rule(new_rule_id(), "run-cap", Scope("tenant", "acme"), "run", Decimal("0.50")))
    governor = Governor(clock=clock)
    try:
        a = spend_spans("0.30", at=clock(), key="run-a")
        b = spend_spans("0.60", at=clock(), key="run-b")
        events = governor.after_ingest(ledger, ingest(ledger, a + b))
        assert sorted((e.level, e.state_key) for e in events) == [
            ("exceeded", b[0].trace_id),
            ("warn", b[0].trace_id),
        ]
        more_a = spend_spans("0.15", at=clock(), key="run-a-2")
        more_a = [replace(s, trace_id=a[0].trace_id) for s in more_a]
        events = governor.after_ingest(ledger, ingest(ledger, more_a + spend_spans("0.01", at=clock(), key="b2")))
        assert [(e.level, e.state_key) for e in events] == [("warn", a[0].trace_id)]
    finally:
        governor.close()
