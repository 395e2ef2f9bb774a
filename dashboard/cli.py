"""``turnledger dashboard``: start the Streamlit app; ``launch`` is what ``turnledger up`` calls.

The app reads through a running server when one is given (``--server`` or
TURNLEDGER_SERVER), otherwise it opens the ledger file read-only.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from ledger.errors import TurnledgerError
from ledger.settings import db_path, server_url

__all__ = ["APP", "add_dashboard", "cmd_dashboard", "launch", "streamlit_command"]

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


def add_dashboard(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", type=Path, default=None, help="ledger file (default: $TURNLEDGER_DB or ./turnledger.duckdb)")
    p.add_argument(
        "--server", default=None, help="read through a running `turnledger serve` at this URL ($TURNLEDGER_SERVER)"
    )
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port to serve on (default {DEFAULT_PORT})")
    p.add_argument(
        "--address",
        default="127.0.0.1",
        help="interface to listen on (default 127.0.0.1: captured prompts are shown, keep it local)",
    )
    p.add_argument("--headless", action="store_true", help="do not open a browser window")


def cmd_dashboard(a: argparse.Namespace) -> int:
    server = a.server or server_url()
    db = a.db or db_path()
    if not server and not Path(db).exists():
        raise TurnledgerError(
            f"no ledger at {str(db)!r}: run `turnledger ingest sample_traces/ --db {db}` or start "
            "`turnledger serve` and send spans first"
        )
    print(f"turnledger dashboard on http://{a.address}:{a.port}  (reading {server or db}; Ctrl-C stops it)")
    proc = launch(
        server_url=server, db=None if server else Path(db), port=a.port, headless=a.headless, address=a.address
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
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
