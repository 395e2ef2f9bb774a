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
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector.receiver.decode_budget import DecodeBudget, inflated_estimate
from ledger.errors import MalformedInput
from tests.conftest import copy_ledger
from tests.server.conftest import count, gz, otlp_json, post_otlp, run_spans
from tests.server.test_invalid_utf8 import SPANS, corrupted, corruptions
from tests.test_otlp_hostile import SAMPLE_PB

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
    # b and c are granted together (b first, c then fits beside it): their threads log in either order.
    _until(lambda: sorted(log) == ["a", "b", "c"])
    assert budget.waiting == 2 and budget.free == 100 - 60 - 10
    b.release()
    assert len(log) == 3  # big still waits for c
    c.release()
    _until(lambda: len(log) == 4)
    assert log[3] == "big" and budget.free == 0 and budget.waiting == 1
    big.release()
    _until(lambda: len(log) == 5)
    e.release()
    assert log[3:] == ["big", "e"]
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


def _stored(server) -> dict[str, list[tuple]]:
    """Every row of the tables a body's spans fill, in a set order, without the time of ingest."""
    con = server.con.cursor()
    tables = ["spans", "charges", "call_copies", "contexts", "content_blocks", "run_blocks", "runs"]
    stored = {}
    for name in tables:
        columns = [c for (c,) in con.execute(f"SELECT column_name FROM (DESCRIBE {name})").fetchall()]
        kept = ", ".join(f'"{c}"' for c in columns if c not in ("ingested_at", "updated_at", "refreshed_at"))
        stored[name] = con.execute(f"SELECT {kept} FROM {name} ORDER BY ALL").fetchall()
    return stored


def test_a_large_body_made_into_rows_a_part_at_a_time_stores_what_it_would_at_once(
    make_server, migrated_ledger, tmp_path, monkeypatch
):
    """A body of more spans than ``SPANS_AT_ONCE`` is prepared in parts (each Arrow before the next is
    built): the ledger holds exactly what the whole body prepared at once gives, runs split between
    parts and content blocks repeated in several parts included, and its answer counts every span."""
    from collector.receiver import signals

    exports = [s for i in range(40) for s in run_spans(f"part-{i}", turns=3)]  # 5 spans a run
    exports.append(replace(exports[7], span_id="", name="no span id"))  # rejected, in the last part
    body = gz(otlp_json(exports))
    whole, parted = make_server(), make_server(db=copy_ledger(migrated_ledger, tmp_path / "parted.duckdb"))
    assert post_otlp(whole.url, body, headers={"Content-Encoding": "gzip"}).status == 200
    parts = []
    prepare = signals.prepare
    monkeypatch.setattr(signals, "SPANS_AT_ONCE", 17)  # 201 spans: 12 parts, runs across their bounds
    monkeypatch.setattr(signals, "prepare", lambda spans, *a, **k: parts.append(1) or prepare(spans, *a, **k))
    reply = post_otlp(parted.url, body, headers={"Content-Encoding": "gzip"})
    assert reply.status == 200 and len(parts) == 12
    assert "rejectedSpans" in reply.json().get("partialSuccess", {})
    whole_rows, parted_rows = _stored(whole), _stored(parted)
    assert whole_rows["spans"] and whole_rows["charges"] and whole_rows["run_blocks"] and whole_rows["runs"]
    assert parted_rows == whole_rows


def test_a_large_commit_is_checkpointed_at_once_small_ones_wait_for_the_wal_threshold(make_server, monkeypatch):
    """After a large request's commit (once it is answered) the writer checkpoints, so that DuckDB frees
    the committed rows it held in memory: the write-ahead log empties; after a small one it still holds
    the commit. (Hang guard only: without the checkpoint the log keeps its bytes, and the test fails.)"""
    from collector.receiver import writer

    server = make_server()
    wal = Path(f"{server.db_path}.wal")
    assert post_otlp(server.url, otlp_json(run_spans("small", turns=2))).status == 200
    assert wal.exists() and wal.stat().st_size > 0  # below every threshold: left to DuckDB's own
    monkeypatch.setattr(writer, "GIVE_BACK_AFTER_BYTES", 0)  # every request counts as large
    assert post_otlp(server.url, otlp_json(run_spans("large", turns=2))).status == 200
    _until(lambda: not wal.exists() or wal.stat().st_size == 0)  # done after the answer
    assert count(server, "SELECT count(*) FROM spans") == 8


def _decoded_both_ways(body: bytes) -> list[object]:
    """``decode_protobuf(body)`` parsed whole and a span at a time (``STREAMED_BYTES``): the spans, or
    "refused" for a MalformedInput (its wording names the place differently)."""
    from collector import otlp

    outcomes: list[object] = []
    for streamed_from in (1 << 40, 0):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(otlp, "STREAMED_BYTES", streamed_from)
            try:
                outcomes.append(otlp.decode_protobuf(body))
            except MalformedInput:
                outcomes.append("refused")
    return outcomes


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**corruptions(8))
def test_a_large_body_parsed_a_span_at_a_time_decodes_as_when_parsed_whole(spoilt, scopes, resources):
    """Bodies past ``STREAMED_BYTES`` are parsed a span at a time (their message is never whole in memory):
    the same spans in the same order, invalid UTF-8 in any place costing the same spans (2 resources ×
    2 scopes × 3 spans, as tests/server/test_invalid_utf8.py corrupts them)."""
    body = corrupted(spoilt, scopes, resources)
    whole, streamed = _decoded_both_ways(body)
    assert whole != "refused" and len(whole) == len(SPANS)
    assert streamed == whole


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.binary(max_size=300)
    | st.builds(lambda i, b: SAMPLE_PB[:i] + b + SAMPLE_PB[i:], st.integers(0, 2000), st.binary(max_size=8))
)
def test_any_bytes_parsed_a_span_at_a_time_are_refused_or_decoded_as_when_parsed_whole(body):
    whole, streamed = _decoded_both_ways(body)
    assert streamed == whole
