"""The dashboard protected when exposed: the decision, every way of starting it, the app's gate, a real browser.

Bound to a non-loopback address the dashboard needs a login (the shared password
TURNLEDGER_DASHBOARD_PASSWORD, or Streamlit's OIDC) and refuses to start without
one; on loopback nothing changes unless a password is set.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from streamlit import config
from streamlit.testing.v1 import AppTest

import dashboard.loaders as loaders
from collector.cli import main
from collector.cli.dashboard import start_dashboard, stop_process
from collector.client import make_source
from dashboard import login_throttle
from dashboard.login_throttle import LoginThrottle
from ledger import queries as q
from ledger.exposure import DashboardExposed, dashboard_login, is_loopback, oidc_configured
from ledger.settings import DASHBOARD_PASSWORD

from .conftest import wait_healthy
from .test_browser import ARGS, CHROMIUM

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def fresh_throttle(monkeypatch):  # type: ignore[no-untyped-def]
    """Wrong passwords of one test do not throttle the next (the throttle is per process)."""
    monkeypatch.setattr(login_throttle, "THROTTLE", LoginThrottle())


# --- the decision ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("address", "loopback"),
    [("127.0.0.1", True), ("127.1.2.3", True), ("localhost", True), ("::1", True), ("[::1]", True),
     ("0.0.0.0", False), ("::", False), ("", False), (None, False), ("192.168.1.20", False), ("example.org", False)],
)  # fmt: skip
def test_which_addresses_are_loopback(address, loopback):
    assert is_loopback(address) is loopback


def test_exposed_without_a_login_is_refused_with_both_fixes_named():
    for address in ("0.0.0.0", None, "10.1.2.3"):
        with pytest.raises(DashboardExposed, match=f"set {DASHBOARD_PASSWORD}.*OIDC.*127.0.0.1"):
            dashboard_login(address, password=None, oidc=False)


def test_which_login_each_address_asks_for():
    assert dashboard_login("127.0.0.1", password=None, oidc=False) == "none"
    assert dashboard_login("127.0.0.1", password=None, oidc=True) == "none"  # loopback: nothing changes
    assert dashboard_login("127.0.0.1", password=PASSWORD, oidc=False) == "password"  # unless a password is set
    assert dashboard_login("0.0.0.0", password=PASSWORD, oidc=True) == "password"
    assert dashboard_login("0.0.0.0", password=None, oidc=True) == "oidc"


def test_oidc_counts_as_configured_when_a_secrets_file_has_an_auth_section(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert not oidc_configured(tmp_path)
    secrets = tmp_path / ".streamlit" / "secrets.toml"
    secrets.parent.mkdir()
    secrets.write_text('[auth]\nredirect_uri = "http://h:8501/oauth2callback"\n')
    assert not oidc_configured(tmp_path)  # no cookie secret: st.login would fail
    secrets.write_text(secrets.read_text() + 'cookie_secret = "s"\nclient_id = "c"\n')
    assert oidc_configured(tmp_path)
    secrets.write_text("[auth\n")
    assert not oidc_configured(tmp_path)  # a broken file configures nothing


# --- every way of starting it refuses ----------------------------------------------------------
def test_start_dashboard_refuses_before_starting_a_process(sample_db, monkeypatch):
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: pytest.fail("a process was started"))
    with pytest.raises(DashboardExposed):
        start_dashboard(db=sample_db, port=1, address="0.0.0.0")


def test_turnledger_dashboard_and_up_refuse_with_one_actionable_line(sample_db, tmp_path, capsys):
    assert main(["dashboard", "--db", str(sample_db), "--address", "0.0.0.0", "--port", "1"]) != 0
    assert DASHBOARD_PASSWORD in capsys.readouterr().err
    db = tmp_path / "up.duckdb"
    assert main(["up", "--db", str(db), "--port", "0", "--dashboard-address", "0.0.0.0", "--no-samples"]) != 0
    assert DASHBOARD_PASSWORD in capsys.readouterr().err
    assert not db.exists()  # refused before the collector opened anything


def test_python_m_dashboard_refuses_before_becoming_streamlit(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != DASHBOARD_PASSWORD}
    done = subprocess.run(
        [sys.executable, "-m", "dashboard", "--address", "0.0.0.0", "--port", "1", "--headless"],
        env={**env, "HOME": str(tmp_path)}, cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and DASHBOARD_PASSWORD in done.stderr


# --- the app's own gate (streamlit run dashboard/app.py --server.address 0.0.0.0) ---------------
@pytest.fixture
def exposed_app(sample_db, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """The app as served on 0.0.0.0, on its own copy of the samples; ``.queries`` counts the reads."""
    db = shutil.copy(sample_db, tmp_path / "ledger.duckdb")  # its own file: no cached result from another test
    monkeypatch.setenv("TURNLEDGER_DB", str(db))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("TURNLEDGER_SERVER", raising=False)
    config.set_option("server.address", "0.0.0.0")  # restored by the autouse dashboard_on_loopback
    queries: list[str] = []

    class Counting:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> Any:
            queries.append(name)
            return getattr(self.inner, name)

    monkeypatch.setattr(loaders, "make_source", lambda spec: Counting(make_source(spec)))

    def run(secrets: dict[str, Any] | None = None) -> AppTest:
        at = AppTest.from_file(str(APP), default_timeout=60)
        for key, value in (secrets or {}).items():
            at.secrets[key] = value
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        return at

    run.queries = queries  # type: ignore[attr-defined]
    return run


def _shows_data(at: AppTest) -> bool:
    return bool(at.metric or at.dataframe or at.get("plotly_chart") or at.sidebar.selectbox)


def test_the_app_served_on_all_interfaces_without_a_login_shows_only_why(exposed_app, monkeypatch):
    monkeypatch.delenv(DASHBOARD_PASSWORD, raising=False)
    at = exposed_app()
    assert DASHBOARD_PASSWORD in at.error[0].value and not _shows_data(at) and not at.text_input
    assert exposed_app.queries == []


def test_the_password_login_gates_every_read_and_logs_out(exposed_app, monkeypatch):
    monkeypatch.setenv(DASHBOARD_PASSWORD, PASSWORD)
    at = exposed_app()
    assert at.text_input[0].label == "Password" and not _shows_data(at) and exposed_app.queries == []

    at.text_input[0].input("wrong horse")
    at.button[0].click().run()
    assert [e.value for e in at.error] == ["Wrong password."] and not _shows_data(at)
    assert exposed_app.queries == []

    at.text_input[0].input(PASSWORD)
    at.button[0].click().run()
    assert not at.exception and not at.error and not at.text_input
    assert "Runs" in {m.label for m in at.metric} and exposed_app.queries  # the overview, read now

    (logout,) = [b for b in at.sidebar.button if b.label == "Log out"]
    logout.click().run()
    assert at.text_input[0].label == "Password" and not _shows_data(at)


def test_wrong_passwords_through_the_login_form_are_throttled_and_the_right_one_waits_too(exposed_app, monkeypatch):
    """The real form and gate, on the throttle's own clock: 5 free wrong guesses, then a wait
    that not even the right password skips (it is not compared), then it logs in (#41 item 6)."""
    clock = [1000.0]
    throttle = LoginThrottle(clock=lambda: clock[0])
    monkeypatch.setattr(login_throttle, "THROTTLE", throttle)
    monkeypatch.setenv(DASHBOARD_PASSWORD, PASSWORD)
    at = exposed_app()

    def submit(password: str) -> list[str]:
        at.text_input[0].input(password)
        at.button[0].click().run()
        return [e.value for e in at.error]

    answers = [submit(f"guess {i}") for i in range(8)]
    assert answers[:5] == [["Wrong password."]] * 5
    assert answers[5:] == [["Too many wrong passwords: try again in 1 s."]] * 3
    assert submit(PASSWORD) == ["Too many wrong passwords: try again in 1 s."] and not _shows_data(at)
    assert exposed_app.queries == []
    assert throttle.stats() | {"clients_waiting": None} == {
        "wrong_passwords": 5, "refused_attempts": 4, "clients_waiting": None, "wrong_last_minute": 5,
        "everyone_waits_s": 0.0,
    }  # fmt: skip

    clock[0] += 1.0
    assert submit(PASSWORD) == [] and "Runs" in {m.label for m in at.metric}
    assert throttle.stats()["clients_waiting"] == 0
    at.switch_page("views/health.py").run()  # what the operator sees
    assert any(
        "Login: 5 wrong password(s) and 4 throttled attempt(s) since the dashboard started" in c.value
        for c in at.caption
    ), [c.value for c in at.caption]


def test_on_loopback_nothing_changes(exposed_app, monkeypatch):
    monkeypatch.delenv(DASHBOARD_PASSWORD, raising=False)
    config.set_option("server.address", "127.0.0.1")
    at = exposed_app()
    assert not at.text_input and "Runs" in {m.label for m in at.metric}


# --- a real browser ----------------------------------------------------------------------------
def _own_ip() -> str:
    """This machine's address on its default route (no packet is sent), or 0.0.0.0's loopback view."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
            return str(s.getsockname()[0])
        except OSError:
            return "127.0.0.1"


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium")
def test_in_a_browser_the_exposed_dashboard_shows_the_login_and_no_data_before_it(sample_db, rows, monkeypatch):
    from playwright.sync_api import sync_playwright

    from dashboard.ui import usd

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    monkeypatch.delenv(DASHBOARD_PASSWORD, raising=False)
    with pytest.raises(DashboardExposed):
        start_dashboard(db=sample_db, port=port, address="0.0.0.0")

    monkeypatch.setenv(DASHBOARD_PASSWORD, PASSWORD)
    proc = start_dashboard(db=sample_db, port=port, address="0.0.0.0")
    url = f"http://{_own_ip()}:{port}"  # reached from outside loopback when the machine has an address
    total = usd(rows(sample_db, q.cost_per_run()).to_dict("records")[0]["total_usd"])
    try:
        wait_healthy(url, proc, timeout=90)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            page = browser.new_page()
            page.goto(f"{url}/overview")  # a deep link goes through the gate too
            page.get_by_label("Password", exact=True).wait_for(timeout=60_000)
            page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=30_000)
            for selector in (".js-plotly-plot", "[data-testid='stMetric']", "[data-testid='stDataFrame']",
                             "[data-testid='stSidebarNav']"):  # fmt: skip
                assert page.locator(selector).count() == 0, selector
            assert total not in page.inner_text("body")

            page.get_by_label("Password", exact=True).fill("wrong horse")
            page.get_by_role("button", name="Log in").click()
            page.get_by_text("Wrong password.").wait_for(timeout=30_000)
            assert page.locator(".js-plotly-plot").count() == 0

            page.get_by_label("Password", exact=True).fill(PASSWORD)
            page.get_by_role("button", name="Log in").click()
            page.get_by_text("Where the money goes").wait_for(timeout=60_000)
            page.get_by_text(total, exact=True).first.wait_for(timeout=30_000)
            page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 1", timeout=30_000)
            assert page.get_by_test_id("stSidebar").get_by_role("button", name="Log out").count() == 1
            browser.close()
    finally:
        stop_process(proc)


def test_exposed_with_oidc_configured_the_app_asks_for_the_provider_login_first(exposed_app, tmp_path, monkeypatch):
    monkeypatch.delenv(DASHBOARD_PASSWORD, raising=False)
    auth = {"redirect_uri": "http://h:8501/oauth2callback", "cookie_secret": "s", "client_id": "c",
            "client_secret": "x", "server_metadata_url": "https://idp.example/.well-known/openid-configuration"}  # fmt: skip
    (tmp_path / ".streamlit").mkdir()
    (tmp_path / ".streamlit" / "secrets.toml").write_text(
        "[auth]\n" + "".join(f'{k} = "{v}"\n' for k, v in auth.items())
    )  # in HOME, where both turnledger and Streamlit look
    at = exposed_app(secrets={"auth": auth})
    assert [b.label for b in at.button] == ["Log in"] and not _shows_data(at) and exposed_app.queries == []
