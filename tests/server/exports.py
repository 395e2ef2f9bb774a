"""Concurrent OTLP/HTTP clients that keep what each request was answered, for store-fault tests.

A client behaves as a real exporter: a 503 (with Retry-After) is retried, anything else but a
200 is dropped — so a 400 for a valid body is a lost export, and is recorded as ``odd``.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass, field

import duckdb

from .conftest import otlp_json, post_otlp, run_spans

CLIENTS = 8
HANG_S = 120  # hang guards only
RETRY_PAUSE_S = 0.1  # between an exporter's retries of a 503'd body (Retry-After is longer; tests need not wait it)
RETRIES = 200  # a 503'd body is retried this many times at most once the store is back


def span_ids(body: bytes) -> list[str]:
    doc = json.loads(body)
    return [s["spanId"] for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


@dataclass
class Exports:
    """What the clients were answered: each status seen, and the span ids whose request got a 200."""

    url: str
    statuses: Counter[int] = field(default_factory=Counter)
    odd: list[str] = field(default_factory=list)  # any answer neither 200 nor 503 (an exporter drops it)
    acked: list[str] = field(default_factory=list)
    unacked: list[bytes] = field(default_factory=list)  # bodies answered 503, to retry later
    lock: threading.Lock = field(default_factory=threading.Lock)

    def send(self, body: bytes) -> int:
        r = post_otlp(self.url, body)
        with self.lock:
            self.statuses[r.status] += 1
            if r.status == 200:
                self.acked.extend(span_ids(body))
            elif r.status == 503 and r.headers.get("retry-after"):
                pass
            else:
                self.odd.append(f"{r.status} {r.headers.get('retry-after')=}: {r.body[:300]!r}")
        return r.status

    def client(self, tag: str, worker: int, rounds: int | None, stop: threading.Event | None = None) -> None:
        """``rounds`` requests of 5 runs, 20 spans each, a 503'd body kept for ``retry_unacked``.
        Or, with ``stop``, requests until it is set, each 503'd body retried (after a short pause,
        as an exporter does) until it lands or ``stop`` comes; one still refused then is kept."""
        n = 0
        while (rounds is None or n < rounds) and not (stop is not None and stop.is_set()):
            body = otlp_json([s for k in range(5) for s in run_spans(f"{tag}-{worker}-{n}-{k}")])
            status = self.send(body)
            while status == 503 and stop is not None and not stop.wait(RETRY_PAUSE_S):
                status = self.send(body)
            if status == 503:
                with self.lock:
                    self.unacked.append(body)
            n += 1

    def burst(self, tag: str, rounds: int = 6) -> None:
        """8 clients at once, ``rounds`` requests each: their commits coalesce."""
        start = threading.Barrier(CLIENTS)

        def run(worker: int) -> None:
            start.wait(HANG_S)
            self.client(tag, worker, rounds)

        join_all([threading.Thread(target=run, args=(w,)) for w in range(CLIENTS)])

    def retry_unacked(self) -> None:
        """An exporter's retries of every 503'd body, until each lands."""
        with self.lock:
            pending, self.unacked = self.unacked, []
        for body in pending:
            for _ in range(RETRIES):
                if self.send(body) == 200:
                    break
            else:
                raise AssertionError(f"a body was answered 503 {RETRIES} times once the store was back")

    def assert_stored_exactly_once(self, stored: Counter[str]) -> None:
        """Every acknowledged span stored once; none stored twice, none that no 200 acknowledged."""
        assert not [s for s, n in stored.items() if n > 1], "a span stored twice"
        acked = set(self.acked)
        assert len(acked) == len(self.acked), "a span acknowledged twice"
        assert not acked - set(stored), f"{len(acked - set(stored))} acknowledged spans lost"
        assert set(stored) == acked, "spans stored that no 200 acknowledged"


def join_all(threads: list[threading.Thread]) -> None:
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG_S)
        assert not t.is_alive(), "a client hung"


def stored_span_ids(con: duckdb.DuckDBPyConnection) -> Counter[str]:
    return Counter(span_id for (span_id,) in con.execute("SELECT span_id FROM spans").fetchall())
