"""Charge each billed call once: group a commit's model-call copies with those stored, keep one charge.

Runs inside ``ledger.write``'s transaction, after the batch's ``call_copies``
rows are inserted and before its charges are (``ledger.billed`` says what a
copy and its key are, and which copy is charged). Every decision is a function
of the stored copies, not of arrival order, so a batch redelivered (replayed
with INSERT OR IGNORE), or coalesced with the request holding the other copy,
or arriving minutes after it, ends in the same single charge:

1. nesting: a batch copy directly under (or directly over) another model-call
   copy of the same model, overlapping in time and without two different
   response ids, takes one key with it (the most specific of the two; the
   stored rows of the other key are re-keyed);
2. the copies of each key the batch touches are split into islands of
   overlapping times; in each island the best copy is charged and the others
   name it in ``duplicate_of``;
3. a stored charge whose copy is no longer the charged one is deleted (its
   trace's runs row is rebuilt), and only the batch's charged copies keep their
   charge rows.

Cost per commit: two queries (links, then islands) over the copies of the
batch's traces and keys, bounded by start time, plus an UPDATE and a DELETE
only when some copy changed. Copies of one billed call time the same HTTP
exchange, so they start within ``WINDOW_NS`` of each other: the bound lets
DuckDB skip older row groups by their min/max instead of reading the table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from .billed import KEY_KINDS

__all__ = ["WINDOW_NS", "Charged", "charge_once", "copy_with_context"]

WINDOW_NS = 3_600 * 10**9  # copies of one billed call start within an hour of each other (in practice: ms)

_LINKS = """
WITH b AS (SELECT trace_id, span_id FROM _new_copies),
cc AS (
    SELECT trace_id, span_id, parent_span_id, billed_call, model, start_time, end_time FROM call_copies
    WHERE start_time >= {since} AND trace_id IN (SELECT trace_id FROM b)
)
SELECT DISTINCT ch.billed_call, pa.billed_call
FROM cc ch JOIN cc pa ON pa.trace_id = ch.trace_id AND pa.span_id = ch.parent_span_id
WHERE ch.billed_call <> pa.billed_call AND ch.model = pa.model
  AND ch.start_time <= pa.end_time AND pa.start_time <= ch.end_time
  AND NOT (starts_with(ch.billed_call, '{response}') AND starts_with(pa.billed_call, '{response}'))
  AND EXISTS (SELECT 1 FROM b WHERE b.trace_id = ch.trace_id AND b.span_id IN (ch.span_id, pa.span_id))
"""

# Gaps and islands: ordered by start, a copy opens a new island when it starts after
# every earlier copy of its key has ended. Returns the copies whose mark is or becomes set.
_ISLANDS = """
WITH k AS (
    SELECT DISTINCT c.billed_call FROM call_copies c SEMI JOIN _new_copies b USING (trace_id, span_id)
    WHERE c.start_time >= {since}
),
g AS (SELECT c.* FROM call_copies c SEMI JOIN k USING (billed_call) WHERE c.start_time >= {since}),
opened AS (
    SELECT *, coalesce(start_time > max(end_time) OVER (PARTITION BY billed_call ORDER BY start_time, trace_id,
               span_id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), TRUE)::INTEGER AS opens
    FROM g
),
islands AS (
    SELECT *, sum(opens) OVER (PARTITION BY billed_call ORDER BY start_time, trace_id, span_id) AS island
    FROM opened
),
ranked AS (
    SELECT *, first_value(trace_id) OVER w AS win_trace, first_value(span_id) OVER w AS win_span FROM islands
    WINDOW w AS (PARTITION BY billed_call, island ORDER BY usage_terms DESC, scope_name, trace_id, span_id)
),
marked AS (
    SELECT trace_id, span_id, epoch_ns(start_time) AS start_ns, duplicate_of_trace, duplicate_of,
           CASE WHEN win_trace = trace_id AND win_span = span_id THEN NULL ELSE win_trace END AS new_trace,
           CASE WHEN win_trace = trace_id AND win_span = span_id THEN NULL ELSE win_span END AS new_span
    FROM ranked
)
SELECT * FROM marked WHERE duplicate_of IS NOT NULL OR new_span IS NOT NULL
"""

_MARK = """
UPDATE call_copies SET duplicate_of_trace = m.new_trace, duplicate_of = m.new_span FROM _marks m
WHERE call_copies.trace_id = m.trace_id AND call_copies.span_id = m.span_id AND call_copies.start_time >= {since}
"""
_UNCHARGE = """
DELETE FROM charges WHERE start_time >= {since}
  AND EXISTS (SELECT 1 FROM _uncharged u WHERE u.trace_id = charges.trace_id AND u.span_id = charges.span_id)
"""
_REKEY = """
UPDATE call_copies SET billed_call = r.new_key FROM _rekeyed r
WHERE call_copies.billed_call = r.old_key AND call_copies.start_time >= {since}
"""

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


@dataclass
class Charged:
    """What ``charge_once`` leaves of a batch's charges, and the stored charges it took back."""

    charges: pa.Table  # the batch's charge rows of charged copies only
    uncharged: dict[str, int] = field(default_factory=dict)  # trace id -> earliest start of a charge deleted


def charge_once(con: duckdb.DuckDBPyConnection, copies: pa.Table, charges: pa.Table, *, replay: bool) -> Charged:
    """Mark this batch's copies (already inserted) and the stored ones they join; return the charges to insert.

    ``replay``: the batch may hold rows stored before (INSERT OR IGNORE), so a
    charge of a batch copy may already be stored and need deleting too.
    """
    first = pc.min(copies["start_time"]).cast(pa.int64()).as_py()
    since = f"make_timestamp_ns({int(first) - WINDOW_NS})"  # a literal: a constant the scan prunes row groups by
    con.register("_new_copies", copies.select(["trace_id", "span_id"]))
    try:
        _join_nested(con, since)
        marks = con.execute(_ISLANDS.format(since=since)).fetchall()
    finally:
        con.unregister("_new_copies")
    changed = [m for m in marks if (m[3], m[4]) != (m[5], m[6])]
    if changed:
        _set_marks(con, changed, since)
    losers = {(m[0], m[1]) for m in marks if m[6] is not None}
    batch = set(zip(copies["trace_id"].to_pylist(), copies["span_id"].to_pylist(), strict=True)) if losers else set()
    # A copy that was charged and no longer is: its stored charge goes (a fresh batch copy has none yet).
    taken_back = [m for m in changed if m[4] is None and (replay or (m[0], m[1]) not in batch)]
    uncharged: dict[str, int] = {}
    if taken_back:
        _run(con, _UNCHARGE.format(since=since), "_uncharged", [m[:2] for m in taken_back])
        for trace, _, start, *_ in taken_back:
            uncharged[trace] = min(start, uncharged.get(trace, start))
    if losers & batch:
        keep = [(t, s) not in losers for t, s in zip(charges["trace_id"].to_pylist(), charges["span_id"].to_pylist(),
                                                     strict=True)]  # fmt: skip
        charges = charges.filter(pa.array(keep, pa.bool_()))
    return Charged(charges, uncharged)


def _join_nested(con: duckdb.DuckDBPyConnection, since: str) -> None:
    """Give nested copies of one call one key (step 1), re-keying the stored copies of the other."""
    links = con.execute(_LINKS.format(since=since, response=KEY_KINDS[0])).fetchall()
    if not links:
        return
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent.get(key, key) != key:
            key = parent[key]
        return key

    for a, b in links:
        ra, rb = root(a), root(b)
        if ra != rb:
            first, second = sorted((ra, rb), key=_specificity)
            parent[second] = first
    rekeyed = [(key, root(key)) for key in parent]
    _run(con, _REKEY.format(since=since), "_rekeyed", rekeyed, ("old_key", "new_key"))


def _specificity(key: str) -> tuple[int, str]:
    """Response ids first, then request ids, then span keys; ties by the key itself (deterministic)."""
    kind = next((i for i, prefix in enumerate(KEY_KINDS) if key.startswith(prefix)), len(KEY_KINDS))
    return kind, key


def _set_marks(con: duckdb.DuckDBPyConnection, changed: list[tuple], since: str) -> None:  # type: ignore[type-arg]
    rows = [(m[0], m[1], m[5], m[6]) for m in changed]
    _run(con, _MARK.format(since=since), "_marks", rows, ("trace_id", "span_id", "new_trace", "new_span"))


def _run(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    name: str,
    rows: list[tuple],  # type: ignore[type-arg]
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
