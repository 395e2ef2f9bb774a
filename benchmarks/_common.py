"""What every benchmark prints before its figures: what was measured, at which commit, on how loaded a machine.

A figure without its commit cannot be checked again, and one without the load average cannot be
trusted on a shared machine (2 cores here: a load above 2 means something else ran).
"""

from __future__ import annotations

import datetime as dt
import http.client
import os
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def commit(tree: Path = ROOT) -> str:
    """``tree``'s commit, short, marked ``+changes`` when tracked files differ from it; ``unknown`` outside git."""
    try:
        sha = subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "--short=10", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{sha}+changes" if dirty else sha


def load() -> str:
    """The 1-, 5- and 15-minute load averages and the cores they are shared by."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} cores"


def header(title: str) -> None:
    """``# title`` with the commit, the load average and the time: the line every benchmark starts with."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"# {title}  (commit {commit()}, {load()}, {now})", flush=True)


def footer() -> None:
    """The load average again after the figures: a run the machine got busy during shows it here."""
    print(f"\n(after the run: {load()})", flush=True)


def wait_healthy(port: int, server: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    """Return once the collector on ``port`` answers ``/healthz`` 200; raise if it exits or the hang guard passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("collector did not start") from None
            time.sleep(0.1)
