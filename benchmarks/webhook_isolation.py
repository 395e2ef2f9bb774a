"""A good webhook target's alert latency, alone and beside 3 hung and 3 trickling targets (#41 item 5).

Each repeat fires one alert through the real path (an ingest into a DuckDB ledger, the
governor's evaluation, the deliverer) to the good target, alone or listed LAST after six
slow ones (the order in which shared workers would have served them). Latency: from just
before the ingest call to the good receiver reading the alert. The slow targets are real
sockets: hung (accept, read, never answer) and trickling (1 byte every 2 s); every request
has a 5 s total deadline, one attempt each. The two modes alternate; medians and ranges.
Before #41 the good target got its alert 70 s after it fired.

Run: ``.venv/bin/python benchmarks/webhook_isolation.py [--repeats N]`` (default 5).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import footer, header
from ledger.settings import ALLOW_PRIVATE_WEBHOOKS

os.environ.setdefault(ALLOW_PRIVATE_WEBHOOKS, "1")  # the receivers listen on loopback

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread
from typing import Any

from ledger.budgets import Deliverer, Governor, Rule, Scope, WebhookTarget, add_rule, new_rule_id
from ledger.ingest import ingest
from ledger.store import open_ledger
from tests.budgets.conftest import PRICES, spend_spans
from tests.budgets.slow_receivers import SlowReceiver

DEADLINE = 5.0


def good_receiver() -> tuple[str, list[float], ThreadingHTTPServer]:
    got: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            got.append(time.monotonic())
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/good", got, server


def fire(slow: list[SlowReceiver], good: str, got: list[float]) -> tuple[float, float | None]:
    """(good target's latency, when the first slow exchange ended) in seconds after firing."""
    with tempfile.TemporaryDirectory() as tmp:
        con = open_ledger(Path(tmp) / "bench.duckdb")
        targets = [WebhookTarget(s.url) for s in slow] + [WebhookTarget(good)]
        add_rule(con, Rule(new_rule_id(), "acme-daily", Scope("tenant", "acme"), "day", Decimal("1.00"),
                           webhooks=targets))  # fmt: skip
        governor = Governor(deliverer=Deliverer(timeout=DEADLINE, max_attempts=1))
        governor.attach(con)
        ended_before = [len(s.ended) for s in slow]
        before = len(got)
        spans = spend_spans("0.85", at=datetime.now(UTC))
        try:
            fired = time.monotonic()
            governor.after_ingest(con, ingest(con, spans, PRICES))
            guard = time.monotonic() + 120
            while len(got) == before and time.monotonic() < guard:
                time.sleep(0.001)
            governor.join(120)
            while any(len(s.ended) == n for s, n in zip(slow, ended_before, strict=True)) and time.monotonic() < guard:
                time.sleep(0.01)
        finally:
            governor.close()
            con.close()
        latency = got[before] - fired
        slow_end = min((s.ended[n] for s, n in zip(slow, ended_before, strict=True)), default=None)
        return latency, None if slow_end is None else slow_end - fired


def fmt(xs: list[float], unit: float = 1000.0) -> str:
    return f"{statistics.median(xs) * unit:8.1f} ms (range {min(xs) * unit:.1f}–{max(xs) * unit:.1f})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    repeats = ap.parse_args().repeats
    logging.basicConfig(level=logging.ERROR)
    header("webhook isolation: a good target's alert latency beside hung and trickling targets")
    good, got, server = good_receiver()
    slow = [SlowReceiver("hang") for _ in range(3)] + [SlowReceiver("trickle", every=2.0) for _ in range(3)]
    alone: list[float] = []
    beside: list[float] = []
    slow_ends: list[float] = []
    try:
        for _ in range(repeats):  # alternating, so a busy moment of the machine hits both
            alone.append(fire([], good, got)[0])
            latency, slow_end = fire(slow, good, got)
            beside.append(latency)
            if slow_end is not None:
                slow_ends.append(slow_end)
    finally:
        for s in slow:
            s.close()
        server.shutdown()
    print(f"\n{repeats} repeats, one alert each; request deadline {DEADLINE:g} s, one attempt")
    print(f"  good target alone                        {fmt(alone)}")
    print(f"  good target beside 3 hung + 3 trickling  {fmt(beside)}")
    print(f"  ratio beside / alone (medians)           {statistics.median(beside) / statistics.median(alone):8.2f}x")
    print(f"  first slow exchange cut at               {fmt(slow_ends)}")
    print(f"  good before every slow one ended: {sum(b < e for b, e in zip(beside, slow_ends, strict=False))}"
          f"/{len(slow_ends)} repeats; goal: within 2 s of firing (before #41: 70 s)")  # fmt: skip
    footer()


if __name__ == "__main__":
    main()
