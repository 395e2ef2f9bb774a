"""One slow webhook target never delays another (#41 item 5): a lane per target, a total
deadline per request, and a circuit breaker per target that ``turnledger alerts`` shows.

The slow receivers are real sockets on loopback: a hung one accepts and reads the request
and never answers; a trickling one answers one byte every 2 s (a read timeout never fires
on it). Waits are hang guards; the order of what the receivers saw is what is asserted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from collector.cli import main
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
from ledger.budgets.breaker import BREAKER_THRESHOLD, Breaker, replay
from ledger.budgets.delivery import DROPPED, HttpResult, post
from ledger.budgets.targets import TargetPolicy
from ledger.ingest import ingest
from ledger.store import open_ledger

from .conftest import PRICES, Receiver, spend_spans
from .slow_receivers import ANSWER, SlowReceiver
from .test_alerts import DAY, ev

GUARD = 120.0  # hang guard, never a figure


@pytest.fixture
def slow() -> Iterator[list[SlowReceiver]]:
    """3 hung and 3 trickling receivers (the issue's case)."""
    receivers = [SlowReceiver("hang") for _ in range(3)] + [SlowReceiver("trickle") for _ in range(3)]
    yield receivers
    for r in receivers:
        r.close()


def _rule(con, targets: list[WebhookTarget]) -> Rule:
    return add_rule(
        con, Rule(new_rule_id(), "acme-daily", Scope("tenant", "acme"), "day", Decimal("1.00"), webhooks=targets)
    )


def test_the_good_target_gets_its_alert_while_hung_and_trickling_targets_block(ledger, receiver: Receiver, slow):
    # The good target comes last: had the slow ones been served first (or by shared workers), it would wait for them.
    targets = [WebhookTarget(r.url) for r in slow] + [WebhookTarget(receiver.url + "/good")]
    _rule(ledger, targets)
    governor = Governor(deliverer=Deliverer(timeout=5.0, max_attempts=1))
    try:
        fired = time.monotonic()
        (alert,) = governor.after_ingest(ledger, ingest(ledger, spend_spans("0.85", at=datetime.now(UTC)), PRICES))
        (good,) = receiver.wait_for("/good", 1, timeout=GUARD)
        assert governor.join(GUARD) and _wait(lambda: all(r.ended for r in slow))
    finally:
        governor.close()
    assert alert.level == "warn"
    assert all(len(r.started) == 1 and len(r.ended) == 1 for r in slow), "every slow target got its one attempt"
    # The good one was served while every slow one was still blocked on its request.
    assert good.at < min(r.ended[0] for r in slow), (
        f"the good target got its alert {good.at - fired:.2f}s after firing, after a slow one ended"
    )
    assert fired <= min(r.started[0] for r in slow)
    rows = {r["target"]: r for r in list_deliveries(ledger, [alert.id])}
    assert rows[WebhookTarget(receiver.url + "/good").label]["status"] == "delivered"
    for r in slow:  # the trickle too: a per-read timeout alone would have waited for all 38 bytes (76 s)
        row = rows[WebhookTarget(r.url).label]
        assert (row["status"], row["http_status"]) == ("failed", None)
        assert "no answer within 5s" in row["detail"]


def test_a_trickling_answer_is_cut_at_the_request_deadline(receiver: Receiver):
    """The deadline is the whole request's: 1 byte every 0.3 s never trips a 1 s read timeout."""
    trickle = SlowReceiver("trickle", every=0.3)
    try:
        result = post(trickle.url, b"{}", 1.0, TargetPolicy(allow_private=True))
        assert trickle.ended or _wait(lambda: trickle.ended)
    finally:
        trickle.close()
    assert result.status is None and result.detail == "no answer within 1s"
    # It was cut, not finished: far fewer than the answer's bytes had gone out.
    assert trickle.ended[0] - trickle.started[0] < len(ANSWER) * 0.3


def _wait(done, guard: float = GUARD) -> bool:
    deadline = time.monotonic() + guard
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_breaker_opens_after_n_failures_half_opens_after_cooldown_and_a_probe_decides():
    b = Breaker(threshold=3, cooldown=10.0)
    for t in (0.0, 1.0):
        b.record(False, t, "HTTP 500")
    assert b.state(1.0) == "closed" and b.wait(1.0) == 0
    b.record(False, 2.0, "HTTP 500")
    assert (b.state(2.0), b.wait(2.0), b.state(11.9)) == ("open", 10.0, "open")
    assert b.state(12.0) == "half-open" and b.wait(12.0) == 0
    b.record(False, 12.5, "no answer within 5s")  # the probe failed: open for another cool-down
    assert (b.state(13.0), b.wait(13.0), b.failures) == ("open", 9.5, 4)
    b.record(True, 23.0)
    assert (b.state(23.0), b.failures) == ("closed", 0)
    replayed = replay([(False, 0.0, "a"), (False, 1.0, "b"), (True, 2.0, ""), (False, 3.0, "c")], threshold=1)
    assert (replayed.state(3.5), replayed.failures, replayed.last_detail) == ("open", 1, "c")


def _alerts_cli(capsys, db: str) -> str:
    assert main(["alerts", "--db", db]) == 0
    return capsys.readouterr().out


def test_an_open_circuit_holds_the_targets_alerts_and_shows_in_turnledger_alerts(tmp_path, receiver, capsys):
    db = str(tmp_path / "breaker.duckdb")
    con = open_ledger(db)
    receiver.script["/down"] = [500] * BREAKER_THRESHOLD
    down, up = WebhookTarget(receiver.url + "/down"), WebhookTarget(receiver.url + "/up")
    _rule(con, [down, up])
    # The breaker's defaults (5 failures, 60 s), which the CLI replays: one alert's 5 attempts open it.
    deliverer = Deliverer(max_attempts=BREAKER_THRESHOLD, base_delay=0.01)
    governor = Governor(deliverer=deliverer)
    try:
        governor.attach(con)
        now = datetime.now(UTC)
        governor.after_ingest(con, ingest(con, spend_spans("0.85", at=now), PRICES))  # warn
        assert _wait(lambda: deliverer.targets().get(down.label, {}).get("state") == "open")
        assert len(receiver.wait_for("/up", 1, timeout=GUARD)) == 1
        governor.after_ingest(con, ingest(con, spend_spans("0.50", at=now), PRICES))  # exceeded
        assert len(receiver.wait_for("/up", 2, timeout=GUARD)) == 2  # the healthy target is not held back
        held = deliverer.targets()[down.label]
        assert (held["state"], held["queued"], held["failures_in_a_row"]) == ("open", 1, BREAKER_THRESHOLD)
        assert len(receiver.on("/down")) == BREAKER_THRESHOLD  # then nothing while the circuit is open
        governor.flush_attempts()
    finally:
        governor.close()
        con.close()
    out = _alerts_cli(capsys, db)
    lines = {line.split()[1]: line for line in out.splitlines() if line.startswith("  ")}
    assert lines[down.label].split()[0] == "open"
    assert f"{BREAKER_THRESHOLD} failed attempts in a row; next probe in" in lines[down.label]
    assert "last: HTTP 500" in lines[down.label]
    assert lines[up.label].split()[0] == "closed"


def test_a_probe_after_the_cooldown_closes_the_circuit_and_the_held_alert_goes(ledger, receiver):
    receiver.script["/flaky"] = [503, 503]
    target = WebhookTarget(receiver.url + "/flaky")
    _rule(ledger, [target])
    deliverer = Deliverer(max_attempts=5, base_delay=0.01, breaker_threshold=2, breaker_cooldown=0.3)
    governor = Governor(deliverer=deliverer)
    try:
        (alert,) = governor.after_ingest(ledger, ingest(ledger, spend_spans("0.85", at=datetime.now(UTC)), PRICES))
        assert governor.join(GUARD)
    finally:
        governor.close()
    rows = list_deliveries(ledger, [alert.id])
    assert [(r["status"], r["http_status"]) for r in rows] == [("retrying", 503), ("retrying", 503), ("delivered", 200)]
    assert "circuit open" in rows[1]["detail"]
    # The probe went no sooner than the cool-down after the failure that opened the circuit.
    assert (rows[2]["attempted_at"] - rows[1]["attempted_at"]).total_seconds() >= 0.3
    assert deliverer.targets()[target.label]["state"] == "closed"


def test_a_full_lane_drops_its_oldest_delivery_recorded_and_logged_and_other_lanes_are_untouched(caplog):
    down, up = WebhookTarget("http://down.example/hook"), WebhookTarget("http://up.example/hook")

    def send(url: str, body: bytes, timeout: float) -> HttpResult:
        return HttpResult(200, "HTTP 200") if url == up.url else HttpResult(503, "HTTP 503")

    recorded: list[DeliveryAttempt] = []
    d = Deliverer(recorded.append, send=send, max_queue=2, breaker_threshold=1, breaker_cooldown=600.0)
    events = [transition(AlertState(), ev(DAY, "0.9"))[1][0] for _ in range(5)]
    try:
        d.submit(events[0], [down])
        # One 503 opened it; its retry waits in the lane.
        assert _wait(lambda: d.targets()[down.label]["state"] == "open" and d.targets()[down.label]["queued"] == 1)
        for e in events[1:]:
            d.submit(e, [down])
        d.submit(events[4], [up])  # beside the full lane
        assert _wait(lambda: any(a.status == "delivered" for a in recorded))
        held = d.targets()[down.label]
    finally:
        d.close()
    dropped = [a for a in recorded if a.status == DROPPED]
    # The lane held the retry of the first alert and alerts 2-5: 5 for 2 places, the 3 oldest dropped.
    assert [(a.alert_id, a.attempt) for a in dropped] == [(events[0].id, 2), (events[1].id, 1), (events[2].id, 1)]
    assert held["queued"] == 2 and held["state"] == "open"
    assert all(a.target == down and "2 newer deliveries already queued" in a.detail for a in dropped)
    assert sum("dropped" in r.getMessage() for r in caplog.records) == 3
    assert [(a.alert_id, a.status) for a in recorded if a.target == up] == [(events[4].id, "delivered")]
