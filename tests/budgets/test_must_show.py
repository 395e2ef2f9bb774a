"""Issue 6, "Must show": a tenant day budget under a burst of concurrent exports, end to end.

The real collector runs as ``turnledger serve`` builds it
(``collector.cli.serve.build_server``: the budget hook ``Governor.on_ingested``
registered, the governor closed between the writer and the ledger); a local receiver takes the webhooks
in both body formats. 500 threads each export one batch worth $0.0025 over
OTLP/HTTP at the same moment, against a $1.00 tenant day budget with soft 0.8.
Exactly one warn ($0.80 is the 320th batch) and one exceeded ($1.00 the 400th)
reach each webhook, each after the commit whose spend crossed its line; more
spend changes nothing until the (injected) clock rolls the day over.

How soon an alert arrives is a speed figure, not a test condition (it took
5.3 s once on a loaded machine): ``benchmarks/alert_latency.py`` measures it
from the earliest request of the commit in which the running total crossed the line.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from datetime import timedelta
from decimal import Decimal

import pytest

from collector.cli.serve import build_server
from collector.receiver import CollectorServer, ServerConfig
from ledger.budgets import Governor, Rule, Scope, WebhookTarget, add_rule, list_alerts, list_deliveries, new_rule_id

from .conftest import Received, Sent, post_spans, spend_spans

BATCHES = 500
EACH = Decimal("0.0025")


@pytest.fixture
def world(tmp_path, clock, receiver):
    governor = Governor(clock=clock)
    # Built as `turnledger serve` builds it; the sweeps are the test's own (the clock is manual).
    server = build_server(ServerConfig(port=0, db=tmp_path / "ledger.duckdb"), governor=governor, sweep_interval=0)
    con = server.con.cursor()
    hooks = (WebhookTarget(receiver.url + "/json"), WebhookTarget(receiver.url + "/slack", "slack"))
    rule = add_rule(
        con, Rule(new_rule_id(), "acme-daily", Scope("tenant", "acme"), "day", Decimal("1.00"), webhooks=hooks)
    )
    server.start()
    yield server, con, rule, governor
    server.writer.drained(10)
    con.close()
    server.stop()  # closes the writer, then the governor, then the ledger


def _burst(server: CollectorServer, clock, n: int) -> dict[str, Sent]:
    """n concurrent exports of one $0.0025 model call each; trace id -> what happened."""
    batches = [spend_spans(EACH, at=clock()) for _ in range(n)]
    barrier = threading.Barrier(n)
    sent: dict[str, Sent] = {}

    def export(spans):
        barrier.wait()
        sent[spans[0].trace_id] = post_spans(server.url, spans)

    threads = [threading.Thread(target=export, args=(b,)) for b in batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(sent) == n and {s.status for s in sent.values()} == {200}
    assert server.writer.drained(30)
    return sent


def _crossing_commits(con, sent: dict[str, Sent]) -> dict[str, float]:
    """For each line ($0.80, $1.00): the earliest send time among the requests of the commit that crossed it."""
    commits: dict[object, list[str]] = defaultdict(list)
    for trace_id, ingested_at in con.execute(
        "SELECT trace_id, ingested_at FROM spans WHERE tenant = 'acme'"
    ).fetchall():
        commits[ingested_at].append(trace_id)
    total, crossed = Decimal(0), {}
    for at in sorted(commits):
        total += EACH * len(commits[at])
        for level, line in (("warn", Decimal("0.80")), ("exceeded", Decimal("1.00"))):
            if level not in crossed and total >= line:
                crossed[level] = min(sent[t].sent_at for t in commits[at])
    return crossed


def levels_of(path: str, posts: list[Received]) -> list[str]:
    """Each webhook post's level, from either body format."""
    return [
        p.body["level"] if path == "/json" else ("warn" if "warning" in p.body["text"] else "exceeded") for p in posts
    ]


def test_one_warn_and_one_exceeded_after_their_crossing_under_500_concurrent_exports(world, clock, receiver):
    server, con, rule, governor = world
    post_spans(server.url, spend_spans("0.50", at=clock(), tenant="globex"))  # another tenant never counts
    sent = _burst(server, clock, BATCHES)
    assert governor.join(10)

    spent = con.execute(
        "SELECT sum(usd_input + usd_output + usd_cache_write + usd_cache_read) FROM charges WHERE tenant = 'acme'"
    ).fetchone()[0]
    assert spent == BATCHES * EACH == Decimal("1.25")

    alerts = list_alerts(con, budget=rule.id)
    assert sorted(a["level"] for a in alerts) == ["exceeded", "warn"]
    by_level = {a["level"]: a for a in alerts}
    assert by_level["warn"]["threshold"] == Decimal("0.80") and by_level["warn"]["value"] >= Decimal("0.80")
    assert by_level["exceeded"]["threshold"] == Decimal("1.00") and by_level["exceeded"]["value"] >= Decimal("1.00")

    crossed = _crossing_commits(con, sent)
    for path in ("/json", "/slack"):
        got = receiver.on(path)
        assert len(got) == 2, f"{path} received {len(got)} posts"
        for post, level in zip(got, levels_of(path, got), strict=True):
            assert post.at >= crossed[level], f"{level} reached {path} before the spend that caused it was sent"
        assert sorted(levels_of(path, got)) == ["exceeded", "warn"], f"{path}: one alert per level"
    assert {r["status"] for r in list_deliveries(con, [a["id"] for a in alerts])} == {"delivered"}

    # More spend and more sweeps: nothing new until the window rolls over.
    _burst(server, clock, 50)
    governor.sweep(con)
    clock.advance(timedelta(hours=9, minutes=59))  # 23:59 UTC, still the same day
    governor.sweep(con)
    assert governor.join(5)
    assert len(list_alerts(con, budget=rule.id)) == 2
    assert len(receiver.on("/json")) == 2

    # Midnight: the sweep sees the new day at $0 and says so once; the new day alerts afresh.
    clock.advance(timedelta(minutes=2))
    (back,) = governor.sweep(con)
    assert (back.level, back.previous_level, back.window_key) == ("ok", "exceeded", "day:2026-09-22@UTC")
    assert governor.sweep(con) == []
    assert post_spans(server.url, spend_spans("0.85", at=clock())).status == 200
    assert server.writer.drained(10) and governor.join(5)
    levels = [(a["level"], a["window_key"]) for a in list_alerts(con, budget=rule.id)]
    assert levels[:2] == [("warn", "day:2026-09-22@UTC"), ("ok", "day:2026-09-22@UTC")]
    assert len(levels) == 4
    assert [p.body["level"] for p in receiver.on("/json")][2:] == ["ok", "warn"]
