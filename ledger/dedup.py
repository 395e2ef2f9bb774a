"""Charge each billed call once: group a commit's model-call copies with those stored, keep one charge.

Runs inside ``ledger.write``'s transaction, before the batch's ``call_copies``
and ``charges`` rows are inserted (``ledger.billed`` says what a copy and its
key are, and which copy is charged). Every decision is a function of the copies
(stored and new), not of arrival order, so a batch redelivered (replayed with
INSERT OR IGNORE), coalesced with the request holding the other copy, or
arriving minutes after it, ends in the same single charge:

1. nesting: a copy directly under another model-call copy of the same model,
   overlapping in time and without two different response ids, takes one key
   with it (the most specific of the two; the stored copies of the other key
   are re-keyed); then containment: where no id or parent joins them, a copy
   reporting usage whose interval lies inside another's, of the same model and
   trace, is the same call (a framework's span around the SDK's sibling span:
   OpenInference does not make its span current, so the SDK's is no child of it).
   An outer copy takes at most one inner call (the tightest fit, then the
   richest usage); copies reporting no usage (failed attempts) are never joined
   this way, so retries stay their own charges, nor two copies from one
   instrumentation scope (a source reports a call once: two of its spans, one
   inside the other, are two calls run in parallel);
2. the copies of each key are split into islands of overlapping times; in each
   island the best copy is charged and the others name it in ``duplicate_of``;
3. a stored charge whose copy is no longer the charged one is deleted (its
   trace's runs row is rebuilt), and only the batch's charged copies keep their
   charge rows.

Cost per commit: at most ONE query, for the stored copies that share a key
with the batch or are a batch copy's parent or child. Copies of one billed call
time the same HTTP exchange, so they start within ``WINDOW_NS`` of each other:
the bound lets DuckDB skip older row groups by their min/max. The query still
reads every copy of the window (about 0.1 µs each, per commit), so the single
writer keeps a ``CopyIndex``: the keys and traces of the copies stored lately,
in memory, and the query runs only for a batch that shares one with them (or
reaches back before what the index covers). Usually nothing is shared and the
batch holds no two copies of one call, and that is all. Otherwise the grouping
runs here in Python over the few rows found, and an UPDATE and a DELETE follow
only for stored copies that changed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from .billed import KEY_KINDS

__all__ = ["WINDOW_NS", "Charged", "CopyIndex", "charge_once", "copy_with_context"]

# Copies of one billed call time the same HTTP exchange, so they start within the
# longest call of each other (in practice, milliseconds). The lookup reads every
# copy that started this long before the batch's first one: its cost grows with the
# copies stored in this window, so it is kept to what a long streamed call needs.
WINDOW_NS = 15 * 60 * 10**9

_COLUMNS = "trace_id, span_id, parent_span_id, billed_call, model, epoch_ns(start_time), epoch_ns(end_time), " \
    "usage_terms, scope_name, duplicate_of_trace, duplicate_of"  # fmt: skip
_RESPONSE = KEY_KINDS[0]
# The stored copies that may be related to the batch's: same key, or same trace (a parent or a
# child of one is picked out in Python: two plain semi joins cost half of asking DuckDB for it).
# Two copies that both carry response ids are one call only if the ids are equal (the key
# join), so when every batch copy has one, only the stored copies without one can nest with them.
_NEIGHBOURS = f"""
SELECT {_COLUMNS} FROM call_copies c WHERE c.start_time >= {{since}} AND (
    c.billed_call IN (SELECT billed_call FROM _new_copies)
    OR ({{nest}}c.trace_id IN (SELECT trace_id FROM _new_copies)))
"""
_WITHOUT_RESPONSE_ID = f"NOT starts_with(c.billed_call, '{_RESPONSE}') AND "
_OF_KEYS = f"SELECT {_COLUMNS} FROM call_copies WHERE start_time >= {{since}} AND billed_call IN (SELECT unnest($keys))"
_UPDATE = """
UPDATE call_copies SET billed_call = u.billed_call, duplicate_of_trace = u.duplicate_of_trace,
    duplicate_of = u.duplicate_of FROM _updated u
WHERE call_copies.trace_id = u.trace_id AND call_copies.span_id = u.span_id AND call_copies.start_time >= {since}
"""
_UNCHARGE = """
DELETE FROM charges WHERE start_time >= {since}
  AND EXISTS (SELECT 1 FROM _uncharged u WHERE u.trace_id = charges.trace_id AND u.span_id = charges.span_id)
"""
# What a CopyIndex starts from: the copies that started in the newest stretch of two windows.
_EARLIEST_RECENT = f"SELECT epoch_ns(max(start_time)) - {2 * WINDOW_NS} FROM call_copies"
_RECENT = (
    "SELECT billed_call, trace_id, epoch_ns(start_time) FROM call_copies WHERE start_time >= make_timestamp_ns($since)"
)
# The copies of the same billed call as one span (same key, same charged copy) that have a captured payload.
_COPY_WITH_CONTEXT = """
WITH me AS (
    SELECT billed_call, coalesce(duplicate_of_trace, trace_id) AS ct, coalesce(duplicate_of, span_id) AS cs
    FROM call_copies WHERE trace_id = $trace AND span_id = $span
)
SELECT x.trace_id, x.span_id FROM call_copies x JOIN me ON x.billed_call = me.billed_call
    AND coalesce(x.duplicate_of_trace, x.trace_id) = me.ct AND coalesce(x.duplicate_of, x.span_id) = me.cs
WHERE EXISTS (SELECT 1 FROM contexts k WHERE k.trace_id = x.trace_id AND k.span_id = x.span_id)
ORDER BY x.trace_id <> $trace, x.scope_name, x.trace_id, x.span_id LIMIT 1
"""


@dataclass(frozen=True, slots=True)
class _Copy:
    trace_id: str
    span_id: str
    parent_span_id: str
    key: str
    model: str
    start: int
    end: int
    usage_terms: int
    scope: str
    dup_trace: str | None
    dup_span: str | None

    @property
    def id(self) -> tuple[str, str]:
        return self.trace_id, self.span_id

    def rank(self) -> tuple[int, str, str, str]:
        """The charged copy of an island sorts first: most usage terms, then scope name, trace id, span id."""
        return -self.usage_terms, self.scope, self.trace_id, self.span_id


@dataclass
class _Slice:
    """The stored copies that started in one ``WINDOW_NS`` of time: hashes of their keys and traces."""

    keys: set[int] = field(default_factory=set)
    traces: set[int] = field(default_factory=set)
    bare_traces: set[int] = field(default_factory=set)  # traces of copies keyed by no response id

    def __len__(self) -> int:
        return len(self.keys)


class CopyIndex:
    """Which billed-call keys and traces the stored copies hold, for those that started since ``covered_from``.

    Only the ledger's one writer may keep one (``collector.receiver.LedgerWriter``
    does, from ``load`` at start): it must see every copy committed after it was
    loaded. It may hold more than the table (a rolled-back commit's copies, a
    hash that collides), which only costs the query it saves; never less. Memory
    is bounded (~70 bytes a copy): past ``max_copies`` keys, the oldest window's
    slice is dropped and ``covered_from`` moves past it, so a batch reaching back
    there is queried as without an index.
    """

    def __init__(self, max_copies: int = 500_000, covered_from: int | None = None) -> None:
        self.max_copies = max_copies
        self.covered_from = covered_from  # None: every stored copy is covered
        self._slices: dict[int, _Slice] = {}  # start_ns // WINDOW_NS -> its copies
        self._size = 0

    @classmethod
    def load(cls, con: duckdb.DuckDBPyConnection, max_copies: int = 500_000) -> CopyIndex:
        """The index of a ledger's copies that started within two windows of the newest."""
        earliest = con.execute(_EARLIEST_RECENT).fetchall()[0][0]
        index = cls(max_copies, covered_from=None if earliest is None else int(earliest))
        if earliest is not None:
            rows = con.execute(_RECENT, {"since": int(earliest)}).fetchall()
            index.add(*zip(*rows, strict=True))
        return index

    def add(self, keys: Sequence[str], traces: Sequence[str], starts: Sequence[int]) -> None:
        """Note copies stored (or about to be) with these keys, traces and start times (ns)."""
        if not starts:
            return
        low, high = min(starts), max(starts)
        covered = self.covered_from is None or low >= self.covered_from
        if covered and low // WINDOW_NS == high // WINDOW_NS:  # the usual commit: all in one window, at once
            self._add_to(low, keys, traces)
        else:
            for key, trace, start in zip(keys, traces, starts, strict=True):
                self._add_to(start, (key,), (trace,))
        while self._size > self.max_copies:  # even the newest window: its batches are queried until the next
            oldest = min(self._slices)
            self._size -= len(self._slices.pop(oldest))
            self.covered_from = max(self.covered_from or 0, (oldest + 1) * WINDOW_NS)

    def _add_to(self, start: int, keys: Sequence[str], traces: Sequence[str]) -> None:
        if self.covered_from is not None and start < self.covered_from:
            return  # older than what the index answers for: a query covers it
        part = self._slices.get(start // WINDOW_NS)
        if part is None:
            part = self._slices[start // WINDOW_NS] = _Slice()
        before = len(part.keys)
        part.keys.update(map(hash, keys))
        self._size += len(part.keys) - before
        part.traces.update(map(hash, traces))
        part.bare_traces.update(hash(t) for k, t in zip(keys, traces, strict=True) if not k.startswith(_RESPONSE))

    def may_meet(self, since: int, keys: list[str], traces: list[str]) -> bool:
        """Whether a stored copy that started at ``since`` or later may share a key or, as the
        neighbour query asks, a trace with these copies (False: it surely does not)."""
        if self.covered_from is not None and since < self.covered_from:
            return True
        key_hashes = {hash(k) for k in keys}
        trace_hashes = {hash(t) for t in traces}
        every_trace = any(not k.startswith(_RESPONSE) for k in keys)  # as _NEIGHBOURS' nest filter
        first = since // WINDOW_NS
        for n, part in self._slices.items():
            if n < first:
                continue
            if not key_hashes.isdisjoint(part.keys):
                return True
            if not trace_hashes.isdisjoint(part.traces if every_trace else part.bare_traces):
                return True
        return False


@dataclass
class Charged:
    """The batch's rows as they go in, and the stored charges taken back."""

    copies: pa.Table  # with their final keys and marks
    charges: pa.Table  # of the charged copies only
    uncharged: dict[str, int] = field(default_factory=dict)  # trace id -> earliest start of a charge deleted
    changed: list[_Copy] = field(default_factory=list)  # stored copies given another key or mark


def charge_once(
    con: duckdb.DuckDBPyConnection, copies: pa.Table, charges: pa.Table, index: CopyIndex | None = None
) -> Charged:
    """Decide which of this batch's copies (and the stored ones they join) are charged; the rows to insert.

    ``index``: the writer's ``CopyIndex`` (the neighbour query runs only when it
    may find something), which learns this batch's copies; None: always query.
    """
    first = int(pc.min(copies["start_time"]).cast(pa.int64()).as_py()) - WINDOW_NS
    since = f"make_timestamp_ns({first})"  # a literal: a constant the scan prunes row groups by
    keys, traces = copies["billed_call"].to_pylist(), copies["trace_id"].to_pylist()
    stored: list[tuple[Any, ...]] = []
    if index is None or index.may_meet(first, keys, traces):
        stored = _neighbours(con, copies, since, keys)
    charged = _charge(con, copies, charges, since, stored, keys, traces)
    if index is not None:  # before the commit: a rollback leaves the index holding more, never less
        final = keys if charged.copies is copies else charged.copies["billed_call"].to_pylist()
        index.add(final, traces, _ns(copies["start_time"]))
        changed = charged.changed
        index.add([c.key for c in changed], [c.trace_id for c in changed], [c.start for c in changed])
    return charged


def _neighbours(con: duckdb.DuckDBPyConnection, copies: pa.Table, since: str, keys: list[str]) -> list[tuple[Any, ...]]:
    nest = "" if any(not k.startswith(_RESPONSE) for k in keys) else _WITHOUT_RESPONSE_ID
    _new_copies = copies.select(["trace_id", "billed_call"])  # read by name (as ledger.write._insert)
    return con.execute(_NEIGHBOURS.format(since=since, nest=nest)).fetchall()


def _charge(
    con: duckdb.DuckDBPyConnection,
    copies: pa.Table,
    charges: pa.Table,
    since: str,
    stored: list[tuple[Any, ...]],
    keys: list[str],
    traces: list[str],
) -> Charged:
    key_set = set(keys)
    span_ids, parent_ids = copies["span_id"].to_pylist(), copies["parent_span_id"].to_pylist()
    if (
        not stored and len(key_set) == len(keys) and set(parent_ids).isdisjoint(span_ids)
        and not _contains_any(traces, copies)
    ):  # fmt: skip
        return Charged(copies, charges)  # the common case: nothing to group (no copy under or inside another)
    ids = set(zip(traces, span_ids, strict=True))
    parents = set(zip(traces, parent_ids, strict=True))
    # A parent or child of a batch copy, or a copy of one of its calls.
    batch = [_Copy(*row) for row in _rows(copies)]
    spans = _Intervals(batch)
    related = [
        r for r in stored
        if r[3] in key_set or (r[0], r[1]) in parents or (r[0], r[2]) in ids or spans.meets(_Copy(*r))
    ]  # fmt: skip
    if not related and len(key_set) == len(keys) and not (parents & ids) and not _contained(batch):
        return Charged(copies, charges)
    old = {c.id: c for c in (_Copy(*row) for row in related)}
    more = {c.key for c in old.values()} - set(keys)  # keys the batch may join through nesting
    if more:
        rows = con.execute(_OF_KEYS.format(since=since), {"keys": sorted(more)}).fetchall()
        old.update((c.id, c) for c in (_Copy(*row) for row in rows))
    copies_now = {**{c.id: c for c in batch}, **old}  # a redelivered copy: its stored row is the truth
    decided = _decide(copies_now)
    changed = [decided[i] for i, c in old.items() if decided[i] != c]
    uncharged: dict[str, int] = {}
    if changed:
        _with_rows(con, _UPDATE.format(since=since), "_updated", [(c.trace_id, c.span_id, c.key, c.dup_trace,
                   c.dup_span) for c in changed], ("trace_id", "span_id", "billed_call", "duplicate_of_trace",
                   "duplicate_of"))  # fmt: skip
        taken_back = [c for c in changed if c.dup_span is not None and old[c.id].dup_span is None]
        if taken_back:
            _with_rows(con, _UNCHARGE.format(since=since), "_uncharged", [c.id for c in taken_back])
            for c in taken_back:
                uncharged[c.trace_id] = min(c.start, uncharged.get(c.trace_id, c.start))
    fresh = [decided[c.id] for c in batch]
    copies = _replace_marks(copies, fresh)
    charged = [c.dup_span is None for c in fresh]
    if not all(charged):
        charges = _charged_rows(charges, {c.id for c in fresh if c.dup_span is None})
    return Charged(copies, charges, uncharged, changed)


def _ns(times: pa.ChunkedArray) -> list[int]:
    return times.cast(pa.int64()).to_pylist()  # type: ignore[no-any-return]


def _rows(copies: pa.Table) -> Iterable[tuple[Any, ...]]:
    cols = [copies[n].to_pylist() for n in ("trace_id", "span_id", "parent_span_id", "billed_call", "model")]
    times = [_ns(copies[n]) for n in ("start_time", "end_time")]
    rest = [copies[n].to_pylist() for n in ("usage_terms", "scope_name", "duplicate_of_trace", "duplicate_of")]
    return zip(*cols, *times, *rest, strict=True)


def _decide(copies: dict[tuple[str, str], _Copy]) -> dict[tuple[str, str], _Copy]:
    """Every copy with its final key (nesting and containment, step 1) and its mark (islands, step 2)."""
    rekey = _containment_keys(copies.values(), _nesting_keys(copies.values(), copies))
    by_key: dict[str, list[_Copy]] = defaultdict(list)
    for c in copies.values():
        by_key[rekey.get(c.key, c.key)].append(c)
    out: dict[tuple[str, str], _Copy] = {}
    for key, group in by_key.items():
        group.sort(key=lambda c: (c.start, c.trace_id, c.span_id))
        island: list[_Copy] = []
        reach = -1
        for c in group:
            if island and c.start > reach:  # starts after every earlier copy ended: a new island
                _mark(island, key, out)
                island, reach = [], -1
            island.append(c)
            reach = max(reach, c.end)
        _mark(island, key, out)
    return out


def _mark(island: list[_Copy], key: str, out: dict[tuple[str, str], _Copy]) -> None:
    best = min(island, key=_Copy.rank)
    for m in island:
        dup = (None, None) if m is best else best.id
        out[m.id] = replace(m, key=key, dup_trace=dup[0], dup_span=dup[1])


def _nesting_keys(copies: Iterable[_Copy], by_id: dict[tuple[str, str], _Copy]) -> dict[str, str]:
    """Key -> the key it joins: a copy nested directly in another of the same call shares its key."""
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while key in parent:
            key = parent[key]
        return key

    for child in copies:
        up = by_id.get((child.trace_id, child.parent_span_id))
        if up is None or not _same_call(child, up):
            continue
        a, b = root(child.key), root(up.key)
        if a != b:
            first, second = sorted((a, b), key=_specificity)
            parent[second] = first
    return {key: root(key) for key in parent}


def _reports_usage(c: _Copy) -> bool:
    return c.usage_terms != 0  # INCOMPLETE_TERMS (< 0) reports usage too


def _inside(inner: _Copy, outer: _Copy) -> bool:
    """``inner``'s interval within ``outer``'s (equal intervals: only the smaller id is inside)."""
    if not (outer.start <= inner.start and inner.end <= outer.end):
        return False
    return (inner.start, inner.end) != (outer.start, outer.end) or inner.id < outer.id


def _containable(inner: _Copy, outer: _Copy) -> bool:
    return (
        inner.trace_id == outer.trace_id and inner.model == outer.model and inner.scope != outer.scope
        and _reports_usage(inner) and _reports_usage(outer) and _inside(inner, outer)
    )  # fmt: skip


def _inside_pairs(copies: Iterable[_Copy]) -> list[tuple[_Copy, _Copy]]:
    """(inner, outer) of every containable pair, found by a sweep per trace and model (calls in
    sequence never overlap, so each copy is compared with the few that overlap it)."""
    groups: dict[tuple[str, str], list[_Copy]] = defaultdict(list)
    for c in copies:
        if _reports_usage(c):
            groups[(c.trace_id, c.model)].append(c)
    pairs = []
    for group in groups.values():
        if len(group) < 2:
            continue
        group.sort(key=lambda c: (c.start, -c.end, c.trace_id, c.span_id))
        for n, outer in enumerate(group):
            for inner in group[n + 1 :]:
                if inner.start > outer.end:
                    break
                if inner.scope == outer.scope:
                    continue  # one source reports a call once: two of its spans are two calls (run in parallel)
                for a, b in ((inner, outer), (outer, inner)):
                    if _inside(a, b):
                        pairs.append((a, b))
    return pairs


def _contained(batch: list[_Copy]) -> bool:
    return bool(_inside_pairs(batch))


def _contains_any(traces: list[str], copies: pa.Table) -> bool:
    """Whether two of the batch's copies may be containable (cheap: only a trace holding two is looked at)."""
    if len(set(traces)) == len(traces):
        return False
    return _contained([_Copy(*row) for row in _rows(copies)])


class _Intervals:
    """The batch's copies by trace and model, to find a stored copy inside or around one of them."""

    def __init__(self, batch: list[_Copy]) -> None:
        self.by: dict[tuple[str, str], list[_Copy]] = defaultdict(list)
        for c in batch:
            if _reports_usage(c):
                self.by[(c.trace_id, c.model)].append(c)

    def meets(self, stored: _Copy) -> bool:
        return any(
            _containable(stored, c) or _containable(c, stored) for c in self.by.get((stored.trace_id, stored.model), ())
        )


def _containment_keys(copies: Iterable[_Copy], rekey: dict[str, str]) -> dict[str, str]:
    """``rekey`` (key -> the key it joins) with the joins containment adds: each outer copy takes the
    inner one that fits it tightest (then the richest, then by ids), unless it holds a call already."""
    parent = dict(rekey)

    def root(key: str) -> str:
        while key in parent:
            key = parent[key]
        return key

    pairs = _inside_pairs(copies)
    if not pairs:
        return rekey
    groups: dict[str, list[_Copy]] = defaultdict(list)
    for c in copies:
        groups[root(c.key)].append(c)
    # An outer copy whose own key joins a copy inside it (by id or nesting) holds that call already.
    taken_outer = {
        o.id for _, o in pairs if any(c is not o and _reports_usage(c) and _inside(c, o) for c in groups[root(o.key)])
    }
    taken_inner: set[tuple[str, str]] = set()
    ranked = sorted(pairs, key=lambda p: ((p[1].end - p[1].start) - (p[0].end - p[0].start), p[0].rank(), p[1].id))
    for inner, outer in ranked:
        a, b = root(inner.key), root(outer.key)
        if a == b or outer.id in taken_outer or inner.id in taken_inner or _different_responses(a, b):
            continue
        first, second = sorted((a, b), key=_specificity)
        parent[second] = first
        taken_outer.add(outer.id)
        taken_inner.add(inner.id)
    return {key: root(key) for key in parent}


def _different_responses(a: str, b: str) -> bool:
    return a.startswith(_RESPONSE) and b.startswith(_RESPONSE) and a != b


def _same_call(child: _Copy, up: _Copy) -> bool:
    both_responses = child.key.startswith(KEY_KINDS[0]) and up.key.startswith(KEY_KINDS[0])
    overlap = child.start <= up.end and up.start <= child.end
    return child.model == up.model and overlap and not (both_responses and child.key != up.key)


def _specificity(key: str) -> tuple[int, str]:
    """Response ids first, then request ids, then span keys; ties by the key itself (deterministic)."""
    kind = next((i for i, prefix in enumerate(KEY_KINDS) if key.startswith(prefix)), len(KEY_KINDS))
    return kind, key


def _replace_marks(copies: pa.Table, decided: list[_Copy]) -> pa.Table:
    for name, values in (
        ("billed_call", [c.key for c in decided]),
        ("duplicate_of_trace", [c.dup_trace for c in decided]),
        ("duplicate_of", [c.dup_span for c in decided]),
    ):
        i = copies.schema.get_field_index(name)
        copies = copies.set_column(i, copies.schema.field(i), pa.array(values, pa.string()))
    return copies


def _charged_rows(charges: pa.Table, charged: set[tuple[str, str]]) -> pa.Table:
    ids = zip(charges["trace_id"].to_pylist(), charges["span_id"].to_pylist(), strict=True)
    return charges.filter(pa.array([i in charged for i in ids], pa.bool_()))


def _with_rows(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    name: str,
    rows: list[tuple[str | None, ...]],
    names: tuple[str, ...] = ("trace_id", "span_id"),
) -> None:
    """Run ``sql`` with ``rows`` registered as the table ``name`` (strings only)."""
    columns = list(zip(*rows, strict=True))
    con.register(name, pa.table({n: pa.array(col, pa.string()) for n, col in zip(names, columns, strict=True)}))
    try:
        con.execute(sql)
    finally:
        con.unregister(name)


def copy_with_context(con: duckdb.DuckDBPyConnection, trace_id: str, span_id: str) -> tuple[str, str] | None:
    """Another copy of this span's billed call that captured the request, as (trace id, span id).

    The charged copy is the one with the most complete usage, which need not be
    the one that captured content (the anthropic SDK records none by default):
    a turn's context is read from whichever copy has it.
    """
    row = con.execute(_COPY_WITH_CONTEXT, {"trace": trace_id, "span": span_id}).fetchone()
    return (str(row[0]), str(row[1])) if row else None
