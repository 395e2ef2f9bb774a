"""Webhook delivery: retried with backoff, every attempt recorded, never in ingest's way."""

from __future__ import annotations

import threading
import time
from decimal import Decimal

from ledger.budgets import (
    AlertState,
    Deliverer,
    DeliveryAttempt,
    Governor,
    Rule,
    Scope,
    WebhookTarget,
    add_rule,
    list_deliveries,
    new_rule_id,
    transition,
)
from ledger.budgets.delivery import HttpResult
from ledger.ingest import ingest

from .conftest import PRICES, spend_spans
from .test_alerts import DAY, ev


def _rule(con, *targets: WebhookTarget) -> Rule:
    return add_rule(
        con, Rule(new_rule_id(), "acme-daily", Scope("tenant", "acme"), "day", Decimal("1.00"), webhooks=targets)
    )


def test_a_webhook_failing_twice_is_retried_then_succeeds(ledger, clock, receiver):
    receiver.script["/flaky"] = [500, 500]
    _rule(ledger, WebhookTarget(receiver.url + "/flaky"))
    governor = Governor(clock=clock, deliverer=Deliverer(base_delay=0.05, timeout=2.0, clock=clock))
    try:
        (alert,) = governor.after_ingest(ledger, ingest(ledger, spend_spans("0.85", at=clock()), PRICES))
        assert governor.join(10)
    finally:
        governor.close()
    assert [r.body["alert_id"] for r in receiver.on("/flaky")] == [alert.id] * 3  # the same alert, 3 POSTs
    rows = list_deliveries(ledger, [alert.id])
    assert [(r["attempt"], r["status"], r["http_status"]) for r in rows] == [
        (1, "retrying", 500),
        (2, "retrying", 500),
        (3, "delivered", 200),
    ]
    assert "retry 2/5 in" in rows[0]["detail"] and rows[0]["target"].startswith("json:http://127.0.0.1:")
    assert all(r["latency_ms"] >= 0 for r in rows)


def test_a_client_error_is_not_retried(ledger, clock, receiver):
    receiver.script["/gone"] = [404]
    _rule(ledger, WebhookTarget(receiver.url + "/gone"))
    governor = Governor(clock=clock, deliverer=Deliverer(base_delay=0.05))
    try:
        (alert,) = governor.after_ingest(ledger, ingest(ledger, spend_spans("0.85", at=clock()), PRICES))
        assert governor.join(10)
    finally:
        governor.close()
    rows = list_deliveries(ledger, [alert.id])
    assert [(r["status"], r["http_status"]) for r in rows] == [("failed", 404)]
    assert "not retryable" in rows[0]["detail"]


def test_retry_after_is_honoured_and_attempts_are_capped():
    answers = [HttpResult(503, "HTTP 503", retry_after=0.2), HttpResult(None, "connection failed")]
    recorded: list[DeliveryAttempt] = []
    d = Deliverer(recorded.append, max_attempts=2, base_delay=0.01, send=lambda url, body, timeout: answers.pop(0))
    _, (event,) = transition(AlertState(), ev(DAY, "0.9"))
    started = time.monotonic()
    d.submit(event, [WebhookTarget("http://127.0.0.1:9/x")])
    assert d.join(5)
    d.close()
    assert time.monotonic() - started >= 0.2
    assert [(a.attempt, a.status) for a in recorded] == [(1, "retrying"), (2, "failed")]
    assert "retry 2/2 in 0.20s" in recorded[0].detail and "giving up" in recorded[1].detail


def test_generic_json_and_slack_bodies(ledger, clock, receiver):
    _rule(ledger, WebhookTarget(receiver.url + "/json"), WebhookTarget(receiver.url + "/slack", "slack"))
    governor = Governor(clock=clock)
    try:
        (alert,) = governor.after_ingest(ledger, ingest(ledger, spend_spans("0.82", at=clock()), PRICES))
        assert governor.join(10)
    finally:
        governor.close()
    (generic,) = receiver.on("/json")
    (slack,) = receiver.on("/slack")
    assert set(slack.body) == {"text"}
    assert slack.body["text"] == alert.text() and "$0.82 of $1.00 (82%)" in slack.body["text"]
    assert generic.body["type"] == "turnledger.alert" and generic.body["level"] == "warn"
    assert generic.body["value"] == "0.82" and generic.body["threshold"] == "0.8" and generic.body["limit"] == "1"
    assert generic.body["rule"]["scope"] == "tenant=acme" and generic.body["window"]["key"] == "day:2026-09-21@UTC"
    assert generic.body["figures"]["projection"]["remaining_usd"] == "0.18"
    assert generic.body["figures"]["cause"]["spans_written"] == 1


def test_a_webhook_that_never_answers_does_not_hold_up_ingest(ledger, clock, receiver):
    receiver.script["/hang"] = ["hang"]
    _rule(ledger, WebhookTarget(receiver.url + "/hang"), WebhookTarget(receiver.url + "/ok"))
    governor = Governor(clock=clock, deliverer=Deliverer(timeout=1.0, max_attempts=1, clock=clock))
    try:
        (alert,) = governor.after_ingest(ledger, ingest(ledger, spend_spans("0.85", at=clock()), PRICES))
        assert receiver.hanging.wait(5), "the hung webhook was never called"
        # While it hangs: the other target is served and ingest carries on, batch after batch.
        assert receiver.wait_for("/ok", 1)
        done = 0
        for _ in range(10):
            report = ingest(ledger, spend_spans("0.001", at=clock()), PRICES)
            governor.after_ingest(ledger, report)
            done += report.charges_written
        assert done == 10 and not receiver.release.is_set()
        assert threading.active_count() > 1
        assert governor.join(5)  # the hung attempt times out after 1 s
    finally:
        governor.close()
    rows = {r["target"].split("/")[-1].split("#")[0]: r for r in list_deliveries(ledger, [alert.id])}
    assert rows["hang"]["status"] == "failed" and "no answer within 1s" in rows["hang"]["detail"]
    assert rows["ok"]["status"] == "delivered"
