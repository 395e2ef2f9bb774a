"""Rules measured over real ledgers loaded from the sample traces."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from collector.demo.samples import cache_pair
from collector.otlp import read_file
from ledger import conventions as c
from ledger import queries as q
from ledger.budgets import Governor, Rule, Scope, add_rule, evaluate, get_rule, new_rule_id
from ledger.budgets import governor as governor_module
from ledger.budgets.evaluate import touched_by
from ledger.budgets.rules import covers
from ledger.ingest import ingest
from tests.conftest import SAMPLES

from .conftest import NOON_ISH, spend_spans


def make(con, name, scope="global", window="rolling_day", limit="1", **kw) -> Rule:
    return add_rule(con, Rule(new_rule_id(), name, Scope.parse(scope), window, Decimal(limit), **kw))


def test_budget_warn_sample_is_082_and_warns(ledger, load, clock):
    load("budget_warn")
    r = make(ledger, "initech-day", "tenant=initech", "day", "1.00")
    ev = evaluate(ledger, r, clock())
    assert ev.value == Decimal("0.82")
    assert ev.level == "warn" and ev.fraction == pytest.approx(0.82)
    assert ev.figures["charges"] == 1 and ev.figures["runs"] == 1
    assert ev.projection is not None and ev.projection.remaining_usd == Decimal("0.18")


def test_spend_by_every_scope_kind_matches_the_ledger(ledger, load, clock):
    load("five_turn_run", "long_tail", "cache_pair")

    def total(**f):
        return q.records(ledger, q.cost_per_run(q.Filters(**f)))[0]["total_usd"]

    now = clock() + timedelta(hours=5)  # long_tail runs are an hour apart
    assert round(total(agent="cache-audit"), 4) == Decimal("0.0584") + Decimal("0.1412")  # seed ex. 7
    cases = {
        "global": total(),
        "tenant=globex": total(tenant="globex"),
        "agent=cache-audit": total(agent="cache-audit"),
        "model=claude-opus-5": total(),
        "call_site=agent": total(),
        "tenant=nobody": Decimal(0),
    }
    for n, (scope, expected) in enumerate(cases.items()):
        assert evaluate(ledger, make(ledger, f"scope-{n}", scope), now).value == expected, scope
    five = read_file(SAMPLES / "five_turn_run.json")[0].trace_id
    assert evaluate(ledger, make(ledger, "one-run", f"run={five}", limit="0.05"), now).value == Decimal("0.0997")


def test_tenant_scope_falls_back_to_the_runs_tenant(ledger, clock):
    spans = spend_spans("0.25", at=clock(), tenant="acme", root=True)
    for s in spans[:-1]:  # a third-party instrumentation: tenant only on the root span
        del s.attributes[c.TENANT]
    ingest(ledger, spans)
    assert ledger.execute("SELECT tenant FROM charges").fetchone()[0] is None
    assert evaluate(ledger, make(ledger, "acme", "tenant=acme", "day"), clock()).value == Decimal("0.25")


def test_run_metrics_over_the_long_tail(ledger, load, clock):
    load("long_tail", "retry_and_loop")
    now = clock() + timedelta(hours=5)
    p95 = evaluate(ledger, make(ledger, "p95", "tenant=globex", limit="5", metric="p95_run_cost"), now)
    assert round(p95.value, 2) == Decimal("9.93") and p95.level == "exceeded"  # seed ex. 3: task a93
    per_success = evaluate(
        ledger, make(ledger, "cpsr", "tenant=globex", limit="10", metric="cost_per_successful_run"), now
    )
    globex = q.records(ledger, q.cost_per_successful_run(q.Filters(tenant="globex")))[0]
    assert globex["successful_runs"] == 2  # a93 hit the step cap
    assert per_success.value == globex["total_usd"] / 2  # all spend (failures too) / successes, exact
    assert round(per_success.value, 2) == Decimal("5.20")
    assert per_success.level == "ok"
    steps = evaluate(ledger, make(ledger, "steps", "tenant=globex", limit="0.25", metric="step_cap_rate"), now)
    assert steps.value == Decimal(1) / Decimal(3) and steps.level == "exceeded"
    loops = evaluate(ledger, make(ledger, "loops", "agent=support-agent", limit="0.5", metric="loop_trip_rate"), now)
    assert loops.value == Decimal(1) and loops.level == "exceeded"  # retry_and_loop tripped the detector
    # globex's agent reports no guard events, but each of its three runs repeats the same tool call:
    # the trips detected in its spans raise the alert (issue #27: they read 0 before)
    detected = evaluate(
        ledger, make(ledger, "loops-globex", "tenant=globex", limit="0.5", metric="loop_trip_rate"), now
    )
    assert detected.value == Decimal(1) and detected.level == "exceeded"


def _split_cache_pair():
    spans = cache_pair()
    healthy_trace = spans[0].trace_id
    healthy = [s for s in spans if s.trace_id == healthy_trace]
    broken = [s for s in spans if s.trace_id != healthy_trace]
    return healthy, broken


@pytest.mark.parametrize(("scenario", "fires"), [("healthy", False), ("broken", True)])
def test_cache_hit_rate_floor_fires_on_the_broken_cache_only(ledger, clock, scenario, fires):
    healthy, broken = _split_cache_pair()
    floor = make(ledger, "cache-floor", "agent=cache-audit", "rolling_day", "0.7", metric="cache_hit_rate")
    governor = Governor(clock=clock)
    try:
        report = ingest(ledger, healthy if scenario == "healthy" else broken)
        events = governor.after_ingest(ledger, report)
        rate = evaluate(ledger, floor, clock()).value
    finally:
        governor.close()
    if fires:
        assert rate == 0
        assert [(e.rule.name, e.level) for e in events] == [("cache-floor", "exceeded")]
        assert "floor 70.0%" in events[0].text()
    else:
        assert rate == Decimal(18_400) / Decimal(210 + 6_100 + 18_400)  # 0.745: healthy
        assert events == []


def test_per_run_cache_floor_over_the_sample_pair_names_the_broken_run(ledger, clock):
    make(ledger, "cache-per-run", "agent=cache-audit", "run", "0.7", metric="cache_hit_rate")
    governor = Governor(clock=clock)
    try:
        events = governor.after_ingest(ledger, ingest(ledger, read_file(SAMPLES / "cache_pair.json")))
    finally:
        governor.close()
    _, broken = _split_cache_pair()
    assert [(e.level, e.state_key) for e in events] == [("exceeded", broken[0].trace_id)]


def test_the_cache_floor_waits_for_the_run_to_finish(ledger, clock):
    # Turn 1 of any run writes the cache and reads nothing: judged mid-way, every run looks broken.
    make(ledger, "cache-per-run", "agent=support-agent", "run", "0.7", metric="cache_hit_rate")
    spans = read_file(SAMPLES / "five_turn_run.json")
    root = [s for s in spans if not s.parent_span_id]
    first_call = [s for s in spans if s.name.startswith("chat")][:1]
    governor = Governor(clock=clock)
    try:
        assert governor.after_ingest(ledger, ingest(ledger, first_call)) == []
        assert governor.after_ingest(ledger, ingest(ledger, spans)) == []  # finished: 0.765, healthy
        ev = evaluate(ledger, get_rule(ledger, "cache-per-run"), clock(), trace_id=root[0].trace_id)
        assert round(ev.value, 3) == Decimal("0.765")  # the seed's figure
    finally:
        governor.close()


def test_touched_scopes_and_covers(ledger, clock):
    report = ingest(ledger, spend_spans("0.01", at=clock(), tenant="acme", label="summarizer", root=True))
    touched = touched_by(ledger, report.traces)
    assert touched.tenants == {"acme"} and touched.call_sites == {"summarizer"}
    assert touched.models == {"claude-haiku-4-5"} and touched.agents == {"support-agent"}
    assert covers(make(ledger, "g", "global"), touched)
    assert covers(make(ledger, "a", "tenant=acme"), touched)
    assert not covers(make(ledger, "b", "tenant=globex"), touched)
    assert covers(make(ledger, "s", "call_site=summarizer"), touched)
    assert not covers(make(ledger, "m", "model=claude-opus-5"), touched)


def test_ingest_re_evaluates_only_rules_the_batch_touched(ledger, clock, monkeypatch):
    for tenant in ("acme", "globex", "initech"):
        make(ledger, f"{tenant}-day", f"tenant={tenant}", "day", "1.00")
    make(ledger, "opus", "model=claude-opus-5", "day", "1.00")
    seen: list[str] = []
    real = governor_module.evaluate

    def spy(con, rule, now, **kw):
        seen.append(rule.name)
        return real(con, rule, now, **kw)

    monkeypatch.setattr(governor_module, "evaluate", spy)
    governor = Governor(clock=clock)
    try:
        governor.after_ingest(ledger, ingest(ledger, spend_spans("0.01", at=NOON_ISH, tenant="globex")))
        assert seen == ["globex-day"]
        seen.clear()
        again = ingest(ledger, spend_spans("0.01", at=NOON_ISH, tenant="globex", key="dup"))
        governor.after_ingest(ledger, again)
        seen.clear()
        duplicate = ingest(ledger, spend_spans("0.01", at=NOON_ISH, tenant="globex", key="dup"))
        assert duplicate.spans_written == 0
        governor.after_ingest(ledger, duplicate)  # a re-sent batch changes nothing
        assert seen == []
    finally:
        governor.close()


def test_without_budgets_an_ingest_measures_nothing(ledger, clock, monkeypatch):
    # Measuring what a batch touched scans its runs and charges: with no budget
    # to compare against, the governor must not pay that after every commit.
    calls: list[object] = []
    real = governor_module.touched_by
    monkeypatch.setattr(governor_module, "touched_by", lambda con, ids: calls.append(ids) or real(con, ids))
    governor = Governor(clock=clock)
    try:
        assert governor.after_ingest(ledger, ingest(ledger, spend_spans("0.01", at=NOON_ISH, tenant="acme"))) == []
        assert calls == []
        make(ledger, "acme-day", "tenant=acme", "day", "0.001")
        events = governor.after_ingest(ledger, ingest(ledger, spend_spans("0.01", at=NOON_ISH, tenant="acme", key="2")))
        assert len(calls) == 1 and {e.rule.name for e in events} == {"acme-day"}
    finally:
        governor.close()
