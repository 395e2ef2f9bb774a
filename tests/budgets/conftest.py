"""Fixtures for the budget tests: a manual clock, spans of known cost, a local
webhook receiver with scriptable behaviour, and an OTLP/HTTP exporter for the
real collector.
"""

from __future__ import annotations

import http.client
import itertools
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from collector.demo.samples import Trace
from collector.otlp import encode_json
from ledger.budgets import ManualClock
from ledger.pricing import PriceBook
from ledger.spans import SpanRecord

# 2026-09-21 14:00 UTC: the day the sample traces were recorded on.
NOON_ISH = datetime(2026, 9, 21, 14, 0, tzinfo=UTC)
PRICES = PriceBook.default()
_keys = itertools.count()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOON_ISH)


def ns(when: datetime) -> int:
    return int(when.timestamp()) * 1_000_000_000 + when.microsecond * 1_000


def spend_spans(
    usd: Decimal | str,
    *,
    at: datetime,
    tenant: str = "acme",
    agent: str = "support-agent",
    model: str = "claude-haiku-4-5",
    label: str = "agent",
    key: str | None = None,
    root: bool = False,
) -> list[SpanRecord]:
    """One model call costing exactly ``usd`` (uncached input on a $1/MTok model), and its root if asked."""
    tokens = Decimal(usd) * 1_000_000
    assert tokens == tokens.to_integral(), f"{usd} is not a whole number of $1/MTok tokens"
    t = Trace(key or f"spend-{next(_keys)}", agent=agent, tenant=tenant, start=ns(at))
    t.chat(model, (int(tokens), 0, 0, 0), finish="end_turn", label=label)
    return t.finish("completed") if root else list(t.spans)


# --- a webhook receiver ------------------------------------------------------------------------
@dataclass
class Received:
    path: str
    body: dict[str, Any]
    at: float  # time.monotonic()


@dataclass
class Receiver:
    url: str
    received: list[Received] = field(default_factory=list)
    # path -> list of statuses to answer in turn (then 200); "hang" blocks until `release` is set;
    # "slow:S" answers 200 after S seconds (recorded when the answer goes out); "redirect:URL" a 302 there
    script: dict[str, list[int | str]] = field(default_factory=dict)
    release: threading.Event = field(default_factory=threading.Event)
    hanging: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on(self, path: str) -> list[Received]:
        with self.lock:
            return [r for r in self.received if r.path == path]

    def wait_for(self, path: str, count: int, timeout: float = 10.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.on(path)
            if len(got) >= count:
                return got
            time.sleep(0.01)
        return self.on(path)


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    """A webhook receiver on 127.0.0.1; loopback targets are allowed while it runs (as `turnledger up` does)."""
    monkeypatch.setenv("TURNLEDGER_ALLOW_PRIVATE_WEBHOOKS", "1")
    state = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def do_GET(self) -> None:  # what a client following a 302 sends: recorded, so a test can see it
            with state.lock:
                state.received.append(Received(self.path, {}, time.monotonic()))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            with state.lock:
                plan = state.script.get(self.path, [])
                step = plan.pop(0) if plan else 200
                if step != "hang" and not str(step).startswith("slow:"):
                    state.received.append(Received(self.path, body, time.monotonic()))
            if step == "hang":
                state.hanging.set()
                state.release.wait(30)
                return  # never answers: the client times out
            if isinstance(step, str) and step.startswith("slow:"):
                time.sleep(float(step.removeprefix("slow:")))
                with state.lock:
                    state.received.append(Received(self.path, body, time.monotonic()))
                step = 200
            if isinstance(step, str) and step.startswith("redirect:"):
                self.send_response(302)
                self.send_header("Location", step.removeprefix("redirect:"))
            else:
                self.send_response(int(step))
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield state
    state.release.set()
    server.shutdown()
    server.server_close()


# --- talking to the real collector ----------------------------------------------------------
@dataclass
class Sent:
    """One OTLP/HTTP export: when its body was on the wire, and the server's answer."""

    sent_at: float  # time.monotonic() once the whole body of the answered attempt was written
    status: int
    body: bytes
    attempts: int = 1


def post_spans(url: str, spans: list[SpanRecord], *, attempts: int = 5) -> Sent:
    """POST spans as OTLP/JSON to ``/v1/traces``, as an exporter does: a connection
    refused or reset is retried after a short backoff (ingest is idempotent)."""
    host, port = url.removeprefix("http://").split(":")
    body = json.dumps(encode_json(spans)).encode()
    for attempt in range(1, attempts + 1):
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            conn.request("POST", "/v1/traces", body=body, headers={"Content-Type": "application/json"})
            sent_at = time.monotonic()
            r = conn.getresponse()
            return Sent(sent_at, r.status, r.read(), attempt)
        except (ConnectionResetError, ConnectionRefusedError, BrokenPipeError):
            if attempt == attempts:
                raise
            time.sleep(0.05 * 2**attempt)
        finally:
            conn.close()
    raise AssertionError("unreachable")
