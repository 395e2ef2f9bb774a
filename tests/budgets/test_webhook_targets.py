"""Webhook targets: refused when a rule is added and at every delivery, no redirect followed, no DNS rebinding.

Real parts: the ledger file, the collector's budget route, ``turnledger budget add``,
the deliverer's HTTP against a local receiver. The one fake is DNS (a resolver
given to the policy), to make a name resolve to a metadata address on a machine
where none does.
"""

from __future__ import annotations

import argparse
import socket
from decimal import Decimal

import pytest

from collector.cli import main
from collector.cli.serve import add_serve, add_up, build_server, webhook_policy
from collector.client import ServerClient
from collector.receiver.server import ServerConfig
from ledger.budgets import AlertState, Deliverer, DeliveryAttempt, Governor, Rule, Scope, WebhookTarget, transition
from ledger.budgets.rules import BudgetError
from ledger.budgets.service import add_budget, budget_statuses
from ledger.budgets.targets import ForbiddenTarget, TargetPolicy, check_url
from ledger.errors import InputError
from ledger.store import open_ledger

from .test_alerts import DAY, ev

FORBIDDEN = [
    "http://169.254.169.254/latest/meta-data/",
    "http://[::ffff:169.254.169.254]/latest",
    "http://10.0.0.1/hook",
]
NEVER = ["169.254.169.254", "[::ffff:169.254.169.254]", "[::169.254.169.254]", "[fd00:ec2::254]", "[fe80::1]",
         "0.0.0.0", "[::]", "224.0.0.1", "255.255.255.255", "100.100.100.200", "[64:ff9b::a9fe:a9fe]"]  # fmt: skip
PRIVATE = ["10.0.0.1", "172.16.3.4", "192.168.1.1", "127.0.0.1", "[::1]", "[fc00::1]", "100.64.0.1",
           "0x7f.1", "2130706433"]  # fmt: skip
DENY, ALLOW = TargetPolicy(allow_private=False), TargetPolicy(allow_private=True)


def fake_dns(answers: dict[str, list[str]], calls: list[str] | None = None):  # type: ignore[no-untyped-def]
    """A ``getaddrinfo`` answering ``answers[host]`` (a list popped per call when it has several)."""

    def resolve(host: str, port: int, *args: object, **kwargs: object) -> list[tuple[object, ...]]:
        if calls is not None:
            calls.append(host)
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        address = answers[host].pop(0) if len(answers[host]) > 1 else answers[host][0]
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port))]

    return resolve


def deliver(url: str, policy: TargetPolicy) -> list[DeliveryAttempt]:
    """Every attempt the deliverer makes to deliver one alert to ``url``."""
    recorded: list[DeliveryAttempt] = []
    d = Deliverer(recorded.append, base_delay=0.01, max_attempts=3, timeout=5.0, policy=policy)
    _, (event,) = transition(AlertState(), ev(DAY, "0.9"))
    d.submit(event, [WebhookTarget(url)])
    assert d.join(30), "delivery did not finish"
    d.close()
    return recorded


# --- the address policy ----------------------------------------------------------------------
@pytest.mark.parametrize("host", NEVER)
def test_link_local_metadata_and_unroutable_addresses_are_refused_even_when_private_ones_are_allowed(host):
    with pytest.raises(ForbiddenTarget, match="never sent there"):
        check_url(f"http://{host}/x", ALLOW)


@pytest.mark.parametrize("host", PRIVATE)
def test_private_and_loopback_addresses_need_the_setting_and_the_error_names_it(host):
    with pytest.raises(ForbiddenTarget, match=r"TURNLEDGER_ALLOW_PRIVATE_WEBHOOKS=1.*--allow-private-webhooks"):
        check_url(f"http://{host}:8080/x", DENY)
    assert check_url(f"http://{host}:8080/x", ALLOW).port == 8080


def test_public_addresses_pass_and_the_message_never_shows_the_secret_path():
    assert check_url("https://8.8.8.8/services/T0/B0/secret", DENY).addresses == ("8.8.8.8",)
    with pytest.raises(ForbiddenTarget) as caught:
        check_url("https://10.0.0.1/services/T0/B0/secret", DENY)
    assert "secret" not in str(caught.value) and "'10.0.0.1'" in str(caught.value)


def test_a_name_resolving_to_a_forbidden_address_is_refused():
    with pytest.raises(ForbiddenTarget, match=r"'localhost' resolves to (127\.0\.0\.1|::1)"):
        check_url("http://localhost:9/x", DENY)  # the real resolver
    metadata = TargetPolicy(allow_private=True, resolver=fake_dns({"metadata.google.internal": ["169.254.169.254"]}))
    with pytest.raises(ForbiddenTarget, match=r"resolves to 169\.254\.169\.254\): .*link-local"):
        check_url("http://metadata.google.internal/computeMetadata/v1/", metadata)


def test_every_address_a_name_resolves_to_must_pass():
    def two(host: str, port: int, *args: object, **kwargs: object) -> list[tuple[object, ...]]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in ("8.8.8.8", "169.254.169.254")]

    with pytest.raises(ForbiddenTarget, match=r"169\.254\.169\.254"):
        check_url("http://mixed.example/x", TargetPolicy(allow_private=True, resolver=two))


# --- when a rule is added ----------------------------------------------------------------------
def _request(url: str) -> dict[str, object]:
    return {"name": "acme-daily", "scope": "tenant=acme", "limit": "1", "webhooks": [url]}


@pytest.mark.parametrize("url", FORBIDDEN)
def test_a_rule_with_a_forbidden_webhook_is_not_stored(ledger, url):
    with pytest.raises(ForbiddenTarget):
        add_budget(ledger, _request(url), DENY)
    assert budget_statuses(ledger) == []


@pytest.mark.parametrize("url", FORBIDDEN)
def test_budget_add_on_the_file_refuses_with_an_actionable_line(tmp_path, capsys, monkeypatch, url):
    monkeypatch.delenv("TURNLEDGER_ALLOW_PRIVATE_WEBHOOKS", raising=False)
    monkeypatch.delenv("TURNLEDGER_SERVER", raising=False)
    db = tmp_path / "ledger.duckdb"
    assert main(["budget", "add", "acme-daily", "--limit", "1", "--webhook", url, "--db", str(db)]) != 0
    err = capsys.readouterr().err
    assert "refused" in err and ("never sent there" in err or "TURNLEDGER_ALLOW_PRIVATE_WEBHOOKS=1" in err)
    con = open_ledger(db, read_only=True)
    assert con.execute("SELECT count(*) FROM budgets").fetchone() == (0,)
    con.close()


@pytest.mark.parametrize("url", FORBIDDEN)
def test_post_api_budgets_answers_400_naming_the_fix(tmp_path, url):
    governor = Governor(deliverer=Deliverer(policy=DENY))
    server = build_server(ServerConfig(port=0, db=tmp_path / "ledger.duckdb"), governor=governor).start()
    try:
        client = ServerClient(server.url)
        with pytest.raises(InputError, match="refused") as caught:
            client.add_budget(_request(url))
        assert "never sent there" in str(caught.value) or "--allow-private-webhooks" in str(caught.value)
        assert client.budgets() == []
    finally:
        server.stop()


def test_a_name_that_does_not_resolve_yet_is_accepted_and_checked_at_delivery(ledger):
    policy = TargetPolicy(resolver=fake_dns({}))
    add_budget(ledger, _request("https://hooks.not-yet.example/x"), policy)
    attempt, *_ = deliver("https://hooks.not-yet.example/x", policy)
    assert attempt.status == "retrying" and "does not resolve" in attempt.detail  # DNS may come back


# --- at delivery -------------------------------------------------------------------------------
@pytest.mark.parametrize("url", FORBIDDEN)
def test_a_stored_forbidden_target_is_refused_at_delivery_once_without_retry(url):
    attempts = deliver(url, DENY)  # stored while allowed, or its name now resolves elsewhere
    assert [(a.attempt, a.status, a.http_status) for a in attempts] == [(1, "failed", None)]
    assert attempts[0].detail.startswith("refused: ") and "not retryable" in attempts[0].detail


def test_a_loopback_receiver_gets_the_alert_when_allowed_and_nothing_when_not(receiver):
    assert [a.status for a in deliver(receiver.url + "/ok", ALLOW)] == ["delivered"]
    assert [a.status for a in deliver(receiver.url + "/no", DENY)] == ["failed"]
    assert len(receiver.on("/ok")) == 1 and receiver.on("/no") == []


def test_the_setting_reaches_the_default_deliverer(receiver, monkeypatch):
    monkeypatch.setenv("TURNLEDGER_ALLOW_PRIVATE_WEBHOOKS", "0")
    assert Deliverer().policy == DENY
    monkeypatch.setenv("TURNLEDGER_ALLOW_PRIVATE_WEBHOOKS", "maybe")
    with pytest.raises(ValueError, match="TURNLEDGER_ALLOW_PRIVATE_WEBHOOKS='maybe'"):
        Deliverer()


def test_a_redirect_is_not_followed_and_is_a_failure_naming_the_location(receiver):
    receiver.script["/hook"] = ["redirect:" + receiver.url + "/elsewhere"]
    attempts = deliver(receiver.url + "/hook", ALLOW)
    assert [(a.status, a.http_status) for a in attempts] == [("failed", 302)]  # recorded, not retried
    assert f"redirect to '{receiver.url}/elsewhere' not followed" in attempts[0].detail
    assert receiver.on("/elsewhere") == []  # the redirect target receives nothing


def test_the_connection_goes_to_the_address_checked_not_to_a_second_lookup(receiver):
    port = receiver.url.rsplit(":", 1)[1]
    calls: list[str] = []
    rebinding = fake_dns({"hooks.rebind.test": ["127.0.0.1", "169.254.169.254"]}, calls)
    attempts = deliver(f"http://hooks.rebind.test:{port}/pinned", TargetPolicy(allow_private=True, resolver=rebinding))
    assert [a.status for a in attempts] == ["delivered"] and calls == ["hooks.rebind.test"]
    assert len(receiver.on("/pinned")) == 1


# --- the setting on the command line ---------------------------------------------------------
@pytest.mark.parametrize(
    ("command", "argv", "env", "allowed"),
    [
        ("serve", [], None, False),
        ("up", [], None, True),  # `turnledger up` is the local, all-on-one-machine start
        ("serve", ["--allow-private-webhooks"], "0", True),
        ("up", ["--no-allow-private-webhooks"], None, False),
        ("up", [], "0", False),
        ("serve", [], "1", True),
    ],
)
def test_serve_and_up_choose_the_policy_flag_first_then_the_environment(monkeypatch, command, argv, env, allowed):
    if env is None:
        monkeypatch.delenv("TURNLEDGER_ALLOW_PRIVATE_WEBHOOKS", raising=False)
    else:
        monkeypatch.setenv("TURNLEDGER_ALLOW_PRIVATE_WEBHOOKS", env)
    p = argparse.ArgumentParser()
    (add_up if command == "up" else add_serve)(p)
    assert webhook_policy(p.parse_args(argv), local_default=command == "up").allow_private is allowed


def test_rules_built_in_code_keep_their_syntax_check():
    with pytest.raises(BudgetError, match="http"):
        Rule("r1", "n", Scope(), "day", Decimal(1), webhooks=(WebhookTarget("ftp://10.0.0.1/x"),))


# --- TLS: connected to the checked address, verified for the name ------------------------------
@pytest.fixture
def tls_receiver(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """An HTTPS receiver on 127.0.0.1 whose certificate is for ``hooks.pinned.test`` (trusted via SSL_CERT_FILE);
    it records the TLS server name and Host header of each POST."""
    import ssl
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import trustme

    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    seen: dict[str, list[str]] = {"sni": [], "host": []}
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("hooks.pinned.test").configure_cert(context)
    context.sni_callback = lambda sock, name, ctx: seen["sni"].append(name)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen["host"].append(self.headers["Host"])
            self.send_response(204)
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield server.server_address[1], seen
    server.shutdown()
    server.server_close()


def test_https_goes_to_the_checked_address_with_the_name_in_sni_host_and_certificate(tls_receiver):
    port, seen = tls_receiver
    dns = fake_dns({"hooks.pinned.test": ["127.0.0.1"], "wrong.pinned.test": ["127.0.0.1"]})
    policy = TargetPolicy(allow_private=True, resolver=dns)
    assert [a.status for a in deliver(f"https://hooks.pinned.test:{port}/x", policy)] == ["delivered"]
    assert seen == {"sni": ["hooks.pinned.test"], "host": [f"hooks.pinned.test:{port}"]}
    (first, *_) = deliver(f"https://wrong.pinned.test:{port}/x", policy)  # same address, a name the cert lacks
    assert first.status == "retrying" and "certificate verify failed" in first.detail
    assert seen["host"] == [f"hooks.pinned.test:{port}"]  # nothing was posted under the wrong name
