"""``turnledger dashboard``: start the Streamlit app in its own process.

The collector never imports the dashboard: this command (and ``turnledger up``)
runs ``python -m dashboard``, which execs Streamlit on the app. The app reads
through a running server when one is given (``--server`` or TURNLEDGER_SERVER),
otherwise it opens the ledger file read-only.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from ledger import lake
from ledger.errors import TurnledgerError
from ledger.exposure import dashboard_login, oidc_configured
from ledger.settings import dashboard_password, db_path, server_url

from .args import add_db, require_free_port

__all__ = [
    "DEFAULT_DASHBOARD_PORT",
    "add_browser_flags",
    "add_dashboard",
    "cmd_dashboard",
    "start_dashboard",
    "stop_process",
]

DEFAULT_DASHBOARD_PORT = 8501


def start_dashboard(
    *, server: str | None = None, db: Path | None = None, port: int = DEFAULT_DASHBOARD_PORT,
    address: str = "127.0.0.1", headless: bool = True, usage_stats: bool = False,
) -> subprocess.Popen[bytes]:  # fmt: skip
    """The dashboard as a child process (``python -m dashboard``); the caller stops it.

    Headless (no browser window, so Streamlit never stops at its first-run e-mail
    question) and without Streamlit's usage statistics, unless asked.

    Raises :class:`~ledger.exposure.DashboardExposed` before starting anything when
    ``address`` is not loopback and no login is configured."""
    dashboard_login(address, password=dashboard_password(), oidc=oidc_configured())
    env = dict(os.environ)
    if server:
        env["TURNLEDGER_SERVER"] = server
    cmd = [sys.executable, "-m", "dashboard", "--port", str(port), "--address", address]
    if db is not None and not server:
        cmd += ["--db", lake.resolved(db)]
    cmd.append("--headless" if headless else "--no-headless")
    if usage_stats:
        cmd.append("--usage-stats")
    return subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL)


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """Terminate a child, then kill it if it has not gone after 10 s."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def add_dashboard(p: argparse.ArgumentParser) -> None:
    """Open the Streamlit dashboard."""
    add_db(p)
    p.add_argument(
        "--server", default=None, help="read through a running `turnledger serve` at this URL ($TURNLEDGER_SERVER)"
    )
    p.add_argument(
        "--port", type=int, default=DEFAULT_DASHBOARD_PORT, help=f"port to serve on (default {DEFAULT_DASHBOARD_PORT})"
    )
    p.add_argument(
        "--address",
        default="127.0.0.1",
        help="interface to listen on (default 127.0.0.1: captured prompts are shown). Any other address "
        "requires a login: $TURNLEDGER_DASHBOARD_PASSWORD, or Streamlit's OIDC ([auth] in .streamlit/secrets.toml)",
    )
    add_browser_flags(p)


def add_browser_flags(p: argparse.ArgumentParser) -> None:
    """How Streamlit starts (``dashboard`` and ``up``): headless, no usage statistics, unless asked."""
    p.add_argument(
        "--headless",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="headless (the default) opens no browser window and asks nothing; --no-headless opens one "
        "(Streamlit may then ask its one-time e-mail question in this terminal)",
    )
    p.add_argument(
        "--usage-stats", action="store_true", help="let Streamlit send its usage statistics (off by default)"
    )


def _check_ledger(db: str) -> None:
    """Open the ledger as the app will, once, so a file that is no ledger (or one a collector holds)
    is one line here rather than an error page in the browser after "dashboard on ..." was printed."""
    from ledger.store import open_ledger

    open_ledger(lake.resolved(Path(db)), read_only=True).close()


def cmd_dashboard(a: argparse.Namespace) -> int:
    server = a.server or server_url()
    db = a.db or db_path()
    if not server and not lake.is_lake_target(str(db)) and not Path(db).exists():
        raise TurnledgerError(
            f"no ledger at {str(db)!r}: run `turnledger ingest sample_traces/ --db {db}` or start "
            "`turnledger serve` and send spans first"
        )
    require_free_port(a.address, a.port, "dashboard", "--port")
    if not server:
        _check_ledger(str(db))
    proc = start_dashboard(
        server=server, db=Path(db), port=a.port, address=a.address, headless=a.headless, usage_stats=a.usage_stats
    )
    print(
        f"turnledger dashboard on http://{a.address}:{a.port}  (reading {server or lake.shown(str(db))}; Ctrl-C stops it)"
    )

    def _stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # a TERM stops the app as Ctrl-C does, never leaving it orphaned

    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
        stop_process(proc)
