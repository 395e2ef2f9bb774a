"""How the Streamlit app is started: ``python -m dashboard`` execs ``streamlit_command``.

``turnledger dashboard`` and ``turnledger up`` run ``python -m dashboard`` (the
collector never imports this package: ``collector.cli.dashboard.start_dashboard``).

The app reads through a running server when one is given (``turnledger dashboard --server`` or
TURNLEDGER_SERVER), otherwise it opens the ledger file read-only.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ledger import lake
from ledger.exposure import DashboardExposed, dashboard_login, oidc_configured
from ledger.settings import dashboard_password

__all__ = ["APP", "DEFAULT_PORT", "main", "streamlit_command"]

APP = Path(__file__).with_name("app.py")
DEFAULT_PORT = 8501


def streamlit_command(
    *, db: Path | None, port: int, headless: bool = True, address: str = "127.0.0.1", usage_stats: bool = False
) -> list[str]:
    """Streamlit on the app: headless unless asked (a window would stop at Streamlit's first-run e-mail
    question), usage statistics off unless asked."""
    cmd = [
        sys.executable, "-m", "streamlit", "run", str(APP),
        f"--server.port={port}", f"--server.address={address}",
        f"--server.headless={'true' if headless else 'false'}",
        "--server.fileWatcherType=none", "--server.runOnSave=false",
        f"--browser.gatherUsageStats={'true' if usage_stats else 'false'}", "--client.toolbarMode=viewer",
    ]  # fmt: skip
    if db is not None:
        cmd += ["--", "--db", lake.resolved(db)]
    return cmd


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m dashboard [--db PATH] [--port N] [--address A] [--no-headless] [--usage-stats]``: become Streamlit."""
    p = argparse.ArgumentParser(prog="python -m dashboard", description="Run the turnledger dashboard (Streamlit).")
    p.add_argument("--db", type=Path, default=None, help="ledger file (default: $TURNLEDGER_SERVER, else the file)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.add_argument(
        "--address",
        default="127.0.0.1",
        help="default 127.0.0.1; any other needs $TURNLEDGER_DASHBOARD_PASSWORD or OIDC",
    )
    p.add_argument("--headless", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--usage-stats", action="store_true")
    a = p.parse_args(argv)
    try:  # the app refuses too, but a process that cannot serve anyone should not start
        dashboard_login(a.address, password=dashboard_password(), oidc=oidc_configured())
    except DashboardExposed as exc:
        p.exit(2, f"{p.prog}: error: {exc}\n")
    cmd = streamlit_command(db=a.db, port=a.port, headless=a.headless, address=a.address, usage_stats=a.usage_stats)
    os.execv(cmd[0], cmd)  # the same process (and pid) becomes Streamlit, so a parent's terminate() reaches it
