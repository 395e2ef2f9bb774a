"""How the Streamlit app is started: ``python -m dashboard`` execs ``streamlit_command``.

``turnledger dashboard`` and ``turnledger up`` run ``python -m dashboard`` (the
collector never imports this package); ``launch`` starts it from Python (tests).

The app reads through a running server when one is given (``--server`` or
TURNLEDGER_SERVER), otherwise it opens the ledger file read-only.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["APP", "DEFAULT_PORT", "launch", "main", "streamlit_command"]

APP = Path(__file__).with_name("app.py")
DEFAULT_PORT = 8501


def streamlit_command(*, db: Path | None, port: int, headless: bool = True, address: str = "127.0.0.1") -> list[str]:
    cmd = [
        sys.executable, "-m", "streamlit", "run", str(APP),
        f"--server.port={port}", f"--server.address={address}",
        f"--server.headless={'true' if headless else 'false'}",
        "--server.fileWatcherType=none", "--server.runOnSave=false",
        "--browser.gatherUsageStats=false", "--client.toolbarMode=viewer",
    ]  # fmt: skip
    if db is not None:
        cmd += ["--", "--db", str(Path(db).resolve())]
    return cmd


def launch(
    *,
    server_url: str | None = None,
    db: Path | None = None,
    port: int = DEFAULT_PORT,
    headless: bool = True,
    address: str = "127.0.0.1",
) -> subprocess.Popen[bytes]:
    """Start the dashboard in the background and return its process (the caller stops it).

    With ``server_url`` the app reads through that server's query API; without,
    it opens ``db`` (default: TURNLEDGER_DB or ./turnledger.duckdb) read-only.
    """
    env = dict(os.environ)
    if server_url:
        env["TURNLEDGER_SERVER"] = server_url
    return subprocess.Popen(
        streamlit_command(db=db, port=port, headless=headless, address=address),
        env=env,
        stdin=subprocess.DEVNULL,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m dashboard [--db PATH] [--port N] [--address A] [--headless]``: become Streamlit."""
    p = argparse.ArgumentParser(prog="python -m dashboard", description="Run the turnledger dashboard (Streamlit).")
    p.add_argument("--db", type=Path, default=None, help="ledger file (default: $TURNLEDGER_SERVER, else the file)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.add_argument("--address", default="127.0.0.1")
    p.add_argument("--headless", action="store_true")
    a = p.parse_args(argv)
    cmd = streamlit_command(db=a.db, port=a.port, headless=a.headless, address=a.address)
    os.execv(cmd[0], cmd)  # the same process (and pid) becomes Streamlit, so a parent's terminate() reaches it
