"""Budgets across collectors on one lake: one alert per rule, level and window, whichever collector
received the spend; the harness's budget gate answers the same at every collector."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

from collector.harness.fleet_gate import HttpSource
from collector.otlp import encode_json
from ledger.budgets import BudgetGate, Rule, Scope, add_rule, new_rule_id
from ledger.budgets.gate import CallScope
from ledger.store import open_ledger
from tests.budgets.conftest import spend_spans

from .team import JSON, Body, collectors, post_in_parallel

EACH = Decimal("0.025")  # 40 batches reach the $1.00 limit, 32 the warn line at 0.8


def test_a_tenant_day_budget_crossed_at_two_collectors_alerts_warn_once_and_exceeded_once(lake_target):
    target, data = lake_target
    con = open_ledger(target, data_path=str(data))
    try:
        rule = add_rule(con, Rule(new_rule_id(), "acme-daily", Scope("tenant", "acme"), "day", Decimal("1.00")))
    finally:
        con.close()
    now = datetime.now(UTC)
    bodies = [Body(JSON, json.dumps(encode_json(spend_spans(EACH, at=now))).encode()) for _ in range(60)]
    with collectors(target, data, 2) as (a, b):
        statuses = post_in_parallel({a: bodies[0::2], b: bodies[1::2]})
        assert all(s == 200 for got in statuses.values() for s in got), statuses
        scope = CallScope(tenant="acme", model="claude-haiku-4-5")
        decisions = [BudgetGate(HttpSource(c.url, fail_open=False)).check(scope) for c in (a, b)]
    assert [(d.allowed, d.rule.id if d.rule else None, d.spent) for d in decisions] == [(False, rule.id, 60 * EACH)] * 2
    con = open_ledger(target, read_only=True)
    try:
        levels = con.execute("SELECT level FROM alerts WHERE budget_id = ? ORDER BY level", [rule.id]).fetchall()
    finally:
        con.close()
    assert levels == [("exceeded",), ("warn",)]
