"""Budgets in the collector: evaluated on ingest, alerts delivered to webhooks, the
harness's gate route, and ``turnledger budget``/``alerts`` through a running server."""

from __future__ import annotations

import json
import signal
from datetime import UTC, datetime
from decimal import Decimal

from collector.cli import main
from collector.cli.serve import build_server
from collector.client import ServerClient
from collector.harness.fleet_gate import HttpSource
from collector.receiver import ServerConfig
from collector.receiver.app import ReceiverHTTPServer
from ledger.budgets import BudgetGate, CallScope, Governor, ManualClock, WebhookTarget
from ledger.store import open_ledger
from tests.budgets.conftest import NOON_ISH, spend_spans

from .conftest import free_port, otlp_json, post_otlp, request, start_cli, wait_healthy, wait_until

ACME = CallScope(tenant="acme", agent="support-agent")


def tl(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_turnledger_serve_evaluates_budgets_on_ingest_and_the_cli_goes_through_it(
    tmp_path, monkeypatch, capsys, receiver
):
    db = tmp_path / "ledger.duckdb"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # No sweep runs during the test, so an alert can only come from evaluation on ingest.
    proc = start_cli("serve", "--port", str(port), "--grpc-port", "0", "--db", str(db), "--sweep-interval", "3600")
    try:
        wait_healthy(url)
        # It holds the file: without TURNLEDGER_SERVER the CLI says what to do instead.
        monkeypatch.delenv("TURNLEDGER_SERVER", raising=False)
        code, _, err = tl(capsys, "budget", "list", "--db", str(db))
        assert code == 2 and "another process holds it" in err and f"TURNLEDGER_SERVER={url}" in err  # its port
        code, out, err = tl(capsys, "budget", "list", "--server", url)  # or say where the server is
        assert code == 0 and out.startswith("no budgets in") and f"turnledger: reading server {url}" in err

        monkeypatch.setenv("TURNLEDGER_SERVER", url)
        code, out, _ = tl(capsys, "budget", "add", "acme-daily", "--scope", "tenant=acme", "--limit", "1.00",
                          "--webhook", receiver.url + "/hook")  # fmt: skip
        assert code == 0 and out.startswith("added b_") and "acme-daily (spend >= $1, tenant=acme, day)" in out

        now = datetime.now(UTC)
        assert post_otlp(url, otlp_json(spend_spans("0.85", at=now, root=True))).status == 200
        (warn,) = receiver.wait_for("/hook", 1)  # evaluated as the spans arrived: no sweep runs in this test
        assert warn.body["level"] == "warn" and warn.body["rule"]["name"] == "acme-daily"
        assert post_otlp(url, otlp_json(spend_spans("0.20", at=now, root=True))).status == 200
        levels = [p.body["level"] for p in receiver.wait_for("/hook", 2)]
        assert levels == ["warn", "exceeded"]

        code, out, _ = tl(capsys, "budget", "list", "--json")
        (row,) = json.loads(out)
        assert (row["name"], row["value"], row["level"]) == ("acme-daily", "$1.05", "exceeded")
        code, out, _ = tl(capsys, "budget", "check", "--tenant", "acme")
        assert code == 1 and out.startswith("REFUSED: budget 'acme-daily'")
        code, out, _ = tl(capsys, "budget", "show", "acme-daily")
        assert code == 0 and "-> exceeded" in out and "exceeded $1.05" in out
        # attempts are recorded in small batches: wait until both alerts show theirs
        wait_until(lambda: tl(capsys, "alerts")[1].count("delivered 1/1") == 2)
        target = next(line for line in tl(capsys, "alerts")[1].splitlines() if "/hook#" in line)
        assert target.split()[0] == "closed"  # its circuit breaker, replayed through the server's query route
        code, out, _ = tl(capsys, "alerts", "--deliveries", "--json")
        assert [(a["level"], a["delivered"], a["deliveries"][0]["status"]) for a in json.loads(out)] == [
            ("exceeded", 1, "delivered"),
            ("warn", 1, "delivered"),
        ]
        code, _, err = tl(capsys, "budget", "rm", "nope")
        assert code == 2 and "no budget with id or name 'nope'" in err

        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert not db.with_name(db.name + ".serving").exists()  # said where it served only while it did
    con = open_ledger(db, read_only=True)
    assert con.execute("SELECT count(*) FROM alert_deliveries WHERE status = 'delivered'").fetchone() == (2,)
    con.close()


def test_stop_delivers_and_records_the_last_alert_before_the_ledger_closes(tmp_path, receiver):
    clock = ManualClock(NOON_ISH)
    governor = Governor(clock=clock)
    server = build_server(ServerConfig(port=0, db=tmp_path / "ledger.duckdb"), governor=governor).start()
    ServerClient(server.url).add_budget(
        {"name": "acme-daily", "scope": "tenant=acme", "limit": "1", "webhooks": [receiver.url + "/last"]}
    )
    receiver.script["/last"] = ["slow:1.0", "slow:1.0"]  # still in flight when the server is told to stop
    assert post_otlp(server.url, otlp_json(spend_spans("1.10", at=clock()))).status == 200
    server.stop()
    assert sorted(p.body["level"] for p in receiver.on("/last")) == ["exceeded", "warn"]  # delivered concurrently
    con = open_ledger(tmp_path / "ledger.duckdb", read_only=True)
    rows = con.execute(
        "SELECT a.level, d.status FROM alerts a JOIN alert_deliveries d ON d.alert_id = a.id ORDER BY a.level"
    ).fetchall()
    con.close()
    assert rows == [("exceeded", "delivered"), ("warn", "delivered")]


def test_budget_routes_need_the_token_and_name_what_is_wrong(tmp_path):
    clock = ManualClock(NOON_ISH)
    server = build_server(
        ServerConfig(port=0, db=tmp_path / "ledger.duckdb", token="s3cret"), governor=Governor(clock=clock)
    ).start()
    try:
        check = f"{server.url}/v1/budgets/check"
        body = json.dumps(ACME.to_dict()).encode()
        assert request(check, "POST", body, {"Content-Type": "application/json"}).status == 401
        assert request(f"{server.url}/api/budgets").status == 401
        assert BudgetGate(HttpSource(server.url, token="wrong")).check(ACME).unavailable  # refused: fails open

        client = ServerClient(server.url, token="s3cret")
        added = client.add_budget({"name": "acme-daily", "scope": "tenant=acme", "limit": "1.00"})
        assert added["description"] == "acme-daily (spend >= $1, tenant=acme, day)"
        client.add_budget(
            {"name": "initech-daily", "scope": "tenant=initech", "limit": "5",
             "webhooks": [{"url": "https://hooks.example/services/T0/B0/secret", "format": "slack"}]}
        )  # fmt: skip
        assert "secret" not in json.dumps(client.budgets()) + json.dumps(client.budget("initech-daily"))
        ingested = post_otlp(
            server.url, otlp_json(spend_spans("1.00", at=clock())), headers={"Authorization": "Bearer s3cret"}
        )
        assert ingested.status == 200 and server.writer.drained(10)

        d = BudgetGate(HttpSource(server.url, token="s3cret")).check(ACME)
        assert not d.allowed and d.rule.name == "acme-daily" and d.spent == Decimal(1)
        assert d.window["key"] == "day:2026-09-21@UTC"  # the governor's clock, not the wall clock

        auth = {"Authorization": "Bearer s3cret", "Content-Type": "application/json"}
        bad = request(check, "POST", b"{nope", auth)
        assert bad.status == 400 and "not JSON" in bad.json()["error"]
        bad = request(check, "POST", json.dumps({"tenant": "acme", "budget": 1}).encode(), auth)
        assert bad.status == 400 and "'budget'" in bad.json()["error"]
        bad = request(f"{server.url}/api/budgets", "POST", json.dumps({"name": "x", "limit": "lots"}).encode(), auth)
        assert bad.status == 400 and bad.json()["error"] == "limit='lots' is not a number"
        missing = request(f"{server.url}/api/budgets/nope", "GET", None, auth)
        assert missing.status == 404 and "'nope'" in missing.json()["error"]
        bad = request(f"{server.url}/api/alerts?level=loud", "GET", None, auth)
        assert bad.status == 400 and "'loud'" in bad.json()["error"]
        for limit in ("-1", "0", "10001", str(2**63)):  # 2**63 overflowed DuckDB's BIGINT: it was a 500
            bad = request(f"{server.url}/api/alerts?limit={limit}", "GET", None, auth)
            assert bad.status == 400 and "must be between 1 and 10,000" in bad.json()["error"], limit

        swept = client.sweep(wait=0)
        assert swept["alerts"] == []  # the ingest already alerted: a sweep repeats nothing
        assert [a["level"] for a in client.alerts()] == ["exceeded", "warn"]
        assert client.remove_budget("acme-daily")["name"] == "acme-daily"
        assert [r["name"] for r in client.budgets()] == ["initech-daily"]
    finally:
        server.stop()


def test_a_collector_without_a_governor_still_answers_checks_but_cannot_sweep(make_server):
    server = make_server()
    assert BudgetGate(HttpSource(server.url)).check(ACME).detail == "no budget covers this call"
    swept = request(f"{server.url}/api/budgets/sweep", "POST", b"{}", {"Content-Type": "application/json"})
    assert swept.status == 409 and "evaluates no budgets" in swept.json()["error"]


def test_the_listen_backlog_takes_a_burst_of_connections():
    # At 64, 500 simultaneous connections saw up to 204 resets (see tests/budgets/test_must_show.py).
    assert ReceiverHTTPServer.request_queue_size >= 1024


def test_webhook_targets_given_to_the_governor_get_every_alert(tmp_path, receiver):
    clock = ManualClock(NOON_ISH)
    governor = Governor(clock=clock, webhooks=[WebhookTarget(receiver.url + "/all", "slack")])
    server = build_server(ServerConfig(port=0, db=tmp_path / "ledger.duckdb"), governor=governor).start()
    try:
        ServerClient(server.url).add_budget({"name": "global-daily", "limit": "0.50", "soft_fraction": 1})
        assert post_otlp(server.url, otlp_json(spend_spans("0.60", at=clock()))).status == 200
        (post,) = receiver.wait_for("/all", 1)
        assert "EXCEEDED" in post.body["text"] and "global-daily" in post.body["text"]
    finally:
        server.stop()


def test_a_rule_added_or_edited_past_its_limit_alerts_at_once_warn_then_exceeded(tmp_path, receiver):
    """#31: a rule added in the UI (through the API, as the Budgets page does) waited for the next sweep.
    No sweep runs here (the governor's sweeper is never started): only saving the rule can alert."""
    clock = ManualClock(NOON_ISH)
    server = build_server(ServerConfig(port=0, db=tmp_path / "ledger.duckdb"), governor=Governor(clock=clock)).start()
    try:
        client = ServerClient(server.url)
        assert post_otlp(server.url, otlp_json(spend_spans("1.10", at=clock()))).status == 200
        assert server.writer.drained(120)
        hook = receiver.url + "/saved"
        client.add_budget({"name": "past-already", "scope": "tenant=acme", "limit": "1", "webhooks": [hook]})
        client.add_budget({"name": "raised", "scope": "tenant=acme", "limit": "5", "webhooks": [hook]})
        assert sorted(p.body["level"] for p in receiver.wait_for("/saved", 2)) == ["exceeded", "warn"]
        client.edit_budget("raised", {"limit": "1.05"})  # lowered past its figure: alerts on the edit
        receiver.wait_for("/saved", 4)
        alerts = client.alerts(limit=10)  # newest first
        fired = [(a["budget"], a["level"]) for a in reversed(alerts)]
        assert fired == [
            ("past-already", "warn"),
            ("past-already", "exceeded"),
            ("raised", "warn"),
            ("raised", "exceeded"),
        ]
        causes = [json.loads(a["figures"]) if isinstance(a["figures"], str) else a["figures"] for a in alerts]
        assert all(c["cause"].keys() == {"rule_saved"} for c in causes), causes
    finally:
        server.stop()
