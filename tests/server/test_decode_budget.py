"""Admission by memory (#41 item 7): every body is admitted exactly once, first come first served, a body
larger than the whole budget alone, none forever waiting; the shares always come back.

Counts and order only: the waits below are hang guards, never figures.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from hypothesis import given, settings
from hypothesis import strategies as st

from collector.receiver.decode_budget import DecodeBudget, inflated_estimate
from tests.server.conftest import count, gz, otlp_json, post_otlp, run_spans

GUARD_S = 120


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + GUARD_S
    while not condition():
        assert time.monotonic() < deadline, "hang guard: the budget never got there"
        time.sleep(0.002)


class _Holder(threading.Thread):
    """Acquires ``share`` (logging its name once granted), holds it until told to release."""

    def __init__(self, budget: DecodeBudget, name: str, share: int, log: list[str], timeout: float = GUARD_S):
        super().__init__(daemon=True)
        self.budget, self.label, self.share, self.log, self.timeout = budget, name, share, log, timeout
        self.granted: bool | None = None
        self.done = threading.Event()

    def run(self) -> None:
        self.granted = self.budget.green_acquire(self.share, timeout=self.timeout)
        if self.granted:
            self.log.append(self.label)
            self.done.wait(GUARD_S)
            self.budget.release(self.share)

    def release(self) -> None:
        self.done.set()
        self.join(GUARD_S)


def _queue(budget: DecodeBudget, name: str, share: int, log: list[str], timeout: float = GUARD_S) -> _Holder:
    """Start a holder and wait until it is granted or waiting (so arrivals are in a known order)."""
    before = budget.waiting
    h = _Holder(budget, name, budget.share(share), log, timeout)
    h.start()
    _until(lambda: name in log or budget.waiting > before)
    return h


def test_first_come_first_served_and_a_body_larger_than_the_budget_decodes_alone():
    budget, log = DecodeBudget(100), []
    a = _queue(budget, "a", 60, log)
    b = _queue(budget, "b", 60, log)  # does not fit beside a: waits
    c = _queue(budget, "c", 10, log)  # would fit, but never overtakes b
    big = _queue(budget, "big", 1000, log)  # larger than the budget: takes all of it, once alone
    e = _queue(budget, "e", 1, log)  # behind big
    assert log == ["a"] and budget.waiting == 4
    a.release()
    _until(lambda: log == ["a", "b", "c"])
    assert budget.waiting == 2 and budget.free == 100 - 60 - 10
    b.release()
    assert log == ["a", "b", "c"]  # big still waits for c
    c.release()
    _until(lambda: len(log) == 4)
    assert log == ["a", "b", "c", "big"] and budget.free == 0 and budget.waiting == 1
    big.release()
    _until(lambda: len(log) == 5)
    e.release()
    assert log == ["a", "b", "c", "big", "e"]
    assert budget.free == 100 and budget.waiting == 0


def test_a_waiter_that_gives_up_lets_those_behind_it_in():
    budget, log = DecodeBudget(100), []
    a = _queue(budget, "a", 90, log)
    head = _queue(budget, "head", 50, log, timeout=5)  # gives up: a is never released meanwhile
    behind = _queue(budget, "behind", 5, log)  # fits in what a leaves, but waits behind head
    assert log == ["a"] and budget.waiting == 2
    head.join(GUARD_S)
    assert head.granted is False
    _until(lambda: log == ["a", "behind"])
    assert budget.free == 5 and budget.waiting == 0
    a.release()
    behind.release()
    assert budget.free == 100


@settings(max_examples=20, deadline=None)
@given(shares=st.lists(st.integers(1, 300), min_size=1, max_size=12))
def test_every_body_is_admitted_exactly_once_never_past_the_budget(shares):
    budget = DecodeBudget(100)
    lock = threading.Lock()
    in_use, most, admitted = [0], [0], [0] * len(shares)

    def one(i: int) -> bool:
        share = budget.share(shares[i])
        if not budget.green_acquire(share, timeout=GUARD_S):
            return False
        with lock:
            in_use[0] += share
            most[0] = max(most[0], in_use[0])
            admitted[i] += 1
        time.sleep(0.001)
        with lock:
            in_use[0] -= share
        budget.release(share)
        return True

    with ThreadPoolExecutor(len(shares)) as pool:
        assert all(pool.map(one, range(len(shares))))
    assert admitted == [1] * len(shares)
    assert most[0] <= 100
    assert budget.free == 100 and budget.waiting == 0


def test_the_estimate_is_the_inflated_size_within_the_limits():
    raw = b"x" * 100_000
    assert inflated_estimate(raw, None, 1 << 20) == 100_000
    assert inflated_estimate(gzip.compress(raw), "gzip", 1 << 20) == 100_000
    assert inflated_estimate(gzip.compress(raw), "gzip", 50_000) == 50_000  # never past the limit
    liar = gzip.compress(raw)[:-4] + (1).to_bytes(4, "little")
    assert inflated_estimate(liar, "gzip", 1 << 20) == len(liar)  # never below the compressed size
    assert inflated_estimate(zlib.compress(raw), "deflate", 1 << 20) == 1 << 20  # unknown: the limit


def test_large_bodies_through_the_receiver_decode_one_at_a_time_each_stored_once(make_server):
    """Each body is larger than the budget: all four are answered 200, decoded one at a time, every span
    stored once, and the budget is whole again afterwards (failures included)."""
    server = make_server(decode_budget_bytes=1024, max_concurrent_decodes=4)
    decoding, most, lock = [0], [0], threading.Lock()
    prepare = server.decoder.prepare

    def counted(*args, **kwargs):
        with lock:
            decoding[0] += 1
            most[0] = max(most[0], decoding[0])
        try:
            time.sleep(0.05)  # widens the window in which a second decode would overlap
            return prepare(*args, **kwargs)
        finally:
            with lock:
                decoding[0] -= 1

    server.decoder.prepare = counted
    exports = [run_spans(f"big-{i}", turns=8) for i in range(4)]
    bodies = [gz(otlp_json(spans)) for spans in exports]
    assert all(inflated_estimate(b, "gzip", server.config.max_decoded_bytes) > 1024 for b in bodies)
    with ThreadPoolExecutor(4) as pool:
        statuses = list(
            pool.map(lambda b: post_otlp(server.url, b, headers={"Content-Encoding": "gzip"}).status, bodies)
        )
    assert statuses == [200] * 4
    assert most[0] == 1
    ids = [s.span_id for spans in exports for s in spans]
    assert count(server, "SELECT count(*) FROM spans") == len(ids)
    assert count(server, "SELECT count(DISTINCT span_id) FROM spans") == len(set(ids))
    assert post_otlp(server.url, b"{not json").status == 400
    not_otlp = gz(json.dumps({"x": "y" * 100}).encode())
    assert post_otlp(server.url, not_otlp, headers={"Content-Encoding": "gzip"}).status == 400
    assert server.decode_budget.free == 1024 and server.decode_budget.waiting == 0
