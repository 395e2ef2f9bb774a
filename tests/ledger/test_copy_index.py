"""The single writer's CopyIndex (ledger.dedup): a commit skips the neighbour query only when no stored copy can meet it.

The index must never know less than the table: across commits, restarts (loaded
again from ``call_copies``) and what it drops to stay within ``max_copies``, the
charges come out exactly as without it (tests/ledger/test_billed_once.py).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import ledger.dedup as dedup
from ledger.dedup import WINDOW_NS, CopyIndex
from ledger.ingest import prepare, write
from ledger.store import open_ledger

from .test_billed_once import BILL, MS, T0, charges, marks, official_span, openinference_span, root_span, sdk_span

# Each: the copies of one billed call (and their run's root), in no particular order.
_SCENARIOS = {
    "nested, and in another trace": [
        lambda: official_span("a", "1", "9"),
        lambda: sdk_span("a", "2", "1"),
        lambda: openinference_span("b", "3"),
        lambda: root_span("a"),
    ],
    "no id, under the copy with one": [
        lambda: sdk_span("a", "2", "1", response_id=None),
        lambda: official_span("a", "1", "9"),
        lambda: openinference_span("b", "3"),
        lambda: root_span("a"),
    ],
}
_CHARGED = [("a", "2", BILL)]
_MARKS = {("a", "1"): ("a", "2"), ("a", "2"): None, ("b", "3"): ("a", "2")}
_LATER = T0 + 3 * WINDOW_NS  # another call, windows later: an index of one copy drops the scenario's window


@settings(max_examples=60, deadline=None)
@given(
    scenario=st.sampled_from(sorted(_SCENARIOS)),
    order=st.permutations(range(4)),
    cuts=st.lists(st.booleans(), min_size=4, max_size=4),
    restarts=st.lists(st.booleans(), min_size=4, max_size=4),
    evict=st.booleans(),
    redeliver=st.lists(st.integers(0, 3), max_size=2),
)
def test_with_the_writers_index_any_order_restart_or_eviction_ends_in_the_same_single_charge(
    scenario, order, cuts, restarts, evict, redeliver
):
    copies = _SCENARIOS[scenario]
    con = open_ledger(":memory:")
    max_copies = 1 if evict else 500_000
    index = CopyIndex.load(con, max_copies)
    if evict:
        write(
            con, [prepare([sdk_span("c", "4", response_id="msg_9", start=_LATER, end=_LATER + MS)])], copy_index=index
        )
    batches: list[list[int]] = [[]]
    for i, cut in zip(order, cuts, strict=True):
        batches[-1].append(i)
        if cut:
            batches.append([])
    batches = [b for b in batches if b] + [[i] for i in redeliver]
    for n, batch in enumerate(batches):
        if restarts[n % len(restarts)]:  # the collector restarted: the index is loaded from the table
            index = CopyIndex.load(con, max_copies)
        write(con, [prepare([copies[i]() for i in batch])], copy_index=index)
    assert [c for c in charges(con) if c[0] != "c"] == _CHARGED
    assert {k: v for k, v in marks(con).items() if k[0] != "c"} == _MARKS


def test_a_commit_of_new_calls_does_not_query_the_stored_copies(monkeypatch):
    con = open_ledger(":memory:")
    index = CopyIndex.load(con)
    queried: list[int] = []
    real = dedup._neighbours
    monkeypatch.setattr(dedup, "_neighbours", lambda *a: queried.append(1) or real(*a))
    for n in range(3):  # calls of their own, each with its response id: nothing stored can meet them
        start = T0 + n * 100 * MS
        span = sdk_span("a", str(n + 1), "9", response_id=f"msg_{n}", start=start, end=start + 50 * MS)
        write(con, [prepare([span])], copy_index=index)
    assert queried == []
    write(con, [prepare([openinference_span("b", "5", response_id="msg_0")])], copy_index=index)
    assert queried == [1]  # a copy of a stored call: queried, and charged once
    assert [c[:2] for c in charges(con)] == [("a", "1"), ("a", "2"), ("a", "3")]


def test_the_index_stays_within_max_copies_and_answers_for_what_it_dropped_by_querying():
    index = CopyIndex(max_copies=2)
    for w in range(4):  # one copy per window
        index.add([f"response:msg_{w}"], [f"trace{w}"], [T0 + w * WINDOW_NS])
    assert index.covered_from is not None and index.covered_from > T0 + WINDOW_NS
    assert not index.may_meet(T0 + 2 * WINDOW_NS, ["response:msg_new"], ["trace_new"])
    assert index.may_meet(T0 + 2 * WINDOW_NS, ["response:msg_3"], ["trace_new"])  # still held
    assert index.may_meet(T0, ["response:msg_new"], ["trace_new"])  # reaches back before what it covers


def test_copies_a_commit_adds_on_both_sides_of_what_the_index_covers_are_kept_from_there_on():
    index = CopyIndex(covered_from=T0 + 10 * MS)  # as loaded at start: a bound inside a window
    index.add(["response:old", "response:new"], ["t1", "t2"], [T0, T0 + 20 * MS])
    assert index.may_meet(T0 + 15 * MS, ["response:new"], ["t3"])
    assert index.may_meet(T0 + 15 * MS, ["span:x"], ["t2"])


def test_a_window_holding_more_than_max_copies_is_dropped_and_queried_until_the_next():
    index = CopyIndex(max_copies=2)
    index.add(["response:a", "response:b", "response:c"], ["t1", "t1", "t1"], [T0, T0 + MS, T0 + 2 * MS])
    assert index.may_meet(T0 + 3 * MS, ["response:new"], ["t9"])  # not answered from memory any more
    assert not index.may_meet(T0 + 3 * WINDOW_NS, ["response:new"], ["t9"])  # past it, answered again
