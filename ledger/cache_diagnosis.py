"""Why each model call of a run did or did not use the prompt cache, in words shared by every view.

One verdict per call, the same in the run explorer's turns table, its two-turn
comparison and ``turnledger context``/``diff``:

==================  ===========================================================================
``cached``          read back what the previous call of the same call site and model cached
``written``         wrote a prefix to the cache (the first call, or a grown conversation)
``broken``          read less than the previous call cached: the difference was billed again;
                    "broken by <path>" when the payloads name the first changed block
``prefix changed``  the payload changed inside the stable prefix though usage shows no loss
``below minimum``   a breakpoint is set, but the prefix is shorter than the model's minimum
                    cacheable length (price book ``[cache_minimum]``): the provider ignores it
``no breakpoint``   the request marks no ``cache_control``: nothing can be cached
``not cached``      nothing read or written, and no captured payload to say why
``incomplete``      the usage reported is part of the call's (charge flagged ``incomplete_usage``):
                    not judged, and not what the next call is judged against
``split unknown``   the source gave no cache split (charge flagged ``unknown_usage``): its reads and
                    writes are not known, so it is not judged, nor judged against
==================  ===========================================================================

``diagnose`` gives them for a run: ``check_cache`` judges from usage alone;
``merge_prefix_findings`` adds what the payload comparison (``ledger.turn_diff``)
found; ``explain_uncached`` says why a call with no cache activity had none,
from its payload. Pure functions: no SQL, no Streamlit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .terms import input_token_columns
from .turn_diff import CHARS_PER_TOKEN, PrefixChange, compact_json, first_prefix_change

__all__ = [
    "BELOW_MINIMUM",
    "BROKEN",
    "CACHED",
    "INCOMPLETE",
    "NOT_CACHED",
    "NO_BREAKPOINT",
    "PREFIX_CHANGED",
    "SPLIT_UNKNOWN",
    "UNUSED",
    "WRITTEN",
    "CacheCheck",
    "cached_prefix_tokens",
    "check_cache",
    "diagnose",
    "explain_uncached",
    "has_breakpoint",
    "merge_prefix_findings",
    "previous_same_call",
]

CACHED, WRITTEN, BROKEN, PREFIX_CHANGED = "cached", "written", "broken", "prefix changed"
INCOMPLETE = "incomplete"
SPLIT_UNKNOWN = "split unknown"
BELOW_MINIMUM, NO_BREAKPOINT, NOT_CACHED = "below minimum", "no breakpoint", "not cached"
UNUSED = (BELOW_MINIMUM, NO_BREAKPOINT, NOT_CACHED)  # verdicts of a call that used no cache at all

# A cache read this far below what the previous call cached counts as a break
# (a few tokens of slack: providers round cache blocks).
CACHE_BREAK_TOLERANCE = 0.02


@dataclass(frozen=True)
class CacheCheck:
    turn: int
    status: str  # one of the verdicts above
    expected_read: int  # tokens the previous call of this call site and model had cached
    cache_read: int
    note: str


def _written(row: Mapping[str, Any]) -> int:
    """Tokens a call wrote to the cache, whatever their TTL (5-minute and 1-hour writes)."""
    return int(row.get("cache_write_tokens") or 0) + int(row.get("cache_write_1h_tokens") or 0)


# How long a cached prefix lives after its last use (each read refreshes it): Anthropic's default
# 5 minutes, or an hour when the call that used it wrote 1-hour entries.
CACHE_TTL_S, CACHE_TTL_1H_S = 300, 3600


def _why_lost(prev: Mapping[str, Any], row: Mapping[str, Any]) -> str:
    """Why a cached prefix was not read back, from the time between the two calls: past the TTL it
    expired; within it the prefix changed, or the provider evicted the cache early (usage alone cannot
    tell them apart: a changed block, when payloads show one, is named first). Without both start
    times, either could be."""
    try:
        gap = (row["start_time"] - prev["start_time"]).total_seconds()
    except (KeyError, TypeError, AttributeError):
        return "prefix changed or cache expired"
    ttl = CACHE_TTL_1H_S if int(prev.get("cache_write_1h_tokens") or 0) else CACHE_TTL_S
    since = f"{_minutes(gap)} after turn {int(prev['turn'])} used it"
    if gap > ttl:
        return f"cache expired: {since}, past its {_minutes(ttl)} TTL"
    return f"prefix changed or cache evicted early: {since}, within its {_minutes(ttl)} TTL"


def _minutes(seconds: float) -> str:
    """'45 s', '6 min 12 s', '5 min', '1 h 20 min', '1 h': a gap as a reader compares it with a TTL."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s" if whole % 60 else f"{whole // 60} min"
    return f"{whole // 3600} h {whole % 3600 // 60} min" if whole % 3600 >= 60 else f"{whole // 3600} h"


def _key(row: Mapping[str, Any]) -> tuple[Any, Any]:
    return row.get("call_site"), row.get("model")


def check_cache(turns: Iterable[Mapping[str, Any]]) -> list[CacheCheck]:
    """Each call's verdict from usage alone.

    A call can read back what the previous call (same call site and model)
    wrote or read. Reading less than that means the prefix changed in between
    (or the cache expired): the difference was billed again at full price.
    Rows need ``turn``, ``call_site``, ``model``, ``cache_read_tokens``,
    ``cache_write_tokens`` (``cache_write_1h_tokens`` too, when there are 1-hour
    writes) and ``uncached_input_tokens``.
    """
    out: list[CacheCheck] = []
    previous: dict[tuple[Any, Any], Mapping[str, Any]] = {}
    for row in turns:
        read, write, turn = int(row.get("cache_read_tokens") or 0), _written(row), int(row["turn"])
        if row.get("incomplete_usage"):
            # Usage from part of the call (a stream's last event: output, no input) says nothing of the
            # cache; judged on it, the next call would "break" a cache that never stopped working.
            note = "usage reported is part of the call's (no input tokens): the cache cannot be judged from it"
            out.append(CacheCheck(turn, INCOMPLETE, 0, read, note))
            continue
        if row.get("cache_split") == "unknown":
            # No reads or writes reported at all, for a prompt that may have used the cache: judged on
            # them, a working cache would read as broken on this call and the next.
            note = "the source reported no cache split: its cache reads and writes are unknown (flagged)"
            out.append(CacheCheck(turn, SPLIT_UNKNOWN, 0, read, note))
            continue
        prev = previous.get(_key(row))
        previous[_key(row)] = row
        expected = int(prev.get("cache_read_tokens") or 0) + _written(prev) if prev is not None else 0
        wrote = f", wrote {write:,}" if write else ""
        if expected and read < expected * (1 - CACHE_BREAK_TOLERANCE):
            assert prev is not None
            note = (
                f"turn {int(prev['turn'])} cached {expected:,} tokens but only {read:,} were read back: "
                f"{expected - read:,} re-billed ({_why_lost(prev, row)})"
            )
            out.append(CacheCheck(turn, BROKEN, expected, read, note))
        elif read:
            note = f"read back {read:,} of {expected:,} cached tokens" if expected else f"read {read:,} cached tokens"
            out.append(CacheCheck(turn, CACHED, expected, read, note + wrote))
        elif write:
            out.append(CacheCheck(turn, WRITTEN, expected, read, f"wrote {write:,} tokens to the cache"))
        else:
            note = "nothing read from or written to the cache (no payload captured to say why)"
            out.append(CacheCheck(turn, NOT_CACHED, expected, read, note))
    return out


def previous_same_call(turns: Iterable[Mapping[str, Any]]) -> dict[int, int]:
    """For each turn, the earlier turn of the same call site and model (what it should share a prefix with)."""
    last: dict[tuple[Any, Any], int] = {}
    out: dict[int, int] = {}
    for row in turns:
        turn = int(row["turn"])
        if _key(row) in last:
            out[turn] = last[_key(row)]
        last[_key(row)] = turn
    return out


def merge_prefix_findings(checks: list[CacheCheck], changes: Mapping[int, PrefixChange | None]) -> list[CacheCheck]:
    """Add what the payloads say to the usage verdicts.

    A break seen in usage gets its invalidator named ("broken by …"); a call
    that used the cache but whose payload changed inside the stable prefix is
    flagged, which usage alone cannot show. A call that used no cache keeps its
    own verdict (``explain_uncached`` says why): a change matters only to a cache.
    """
    out = []
    for check in checks:
        change = changes.get(check.turn)
        if change is None or check.status in UNUSED or check.status == INCOMPLETE:
            out.append(check)
            continue
        where = f"{change.path or change.part}: {change.what}"
        if check.status == BROKEN:
            out.append(replace(check, note=f"broken by {where}; {check.note}"))
        else:
            out.append(replace(check, status=PREFIX_CHANGED, note=f"cache invalidated at {where}"))
    return out


# --- why a call used no cache, from its payload -------------------------------------------------------
def _blocks(payload: Mapping[str, Any]) -> list[Any]:
    """The cacheable parts in the provider's prefix order: tools, system, then the messages' blocks."""
    out: list[Any] = []
    for part in ("tools", "system", "messages"):
        value = payload.get(part)
        out += value if isinstance(value, list) else [value] if value is not None else []
    return out


def _marks(value: Any) -> bool:
    if isinstance(value, Mapping):
        return "cache_control" in value or any(_marks(v) for v in value.values())
    if isinstance(value, list):
        return any(_marks(v) for v in value)
    return False


def has_breakpoint(payload: Mapping[str, Any]) -> bool:
    """Does the request mark a cache breakpoint (on a block, or top-level automatic caching)?"""
    return "cache_control" in payload or any(_marks(b) for b in _blocks(payload))


def cached_prefix_tokens(payload: Mapping[str, Any], input_tokens: int) -> int:
    """The tokens up to the last breakpoint: the call's input tokens in proportion to the prefix's
    share of the request's characters (or ~characters / 4 when no count is known)."""
    blocks = [compact_json(b) for b in _blocks(payload)]
    total = sum(map(len, blocks)) or 1
    if "cache_control" in payload:  # automatic caching: up to the last block
        prefix = total
    else:
        last = max((i for i, b in enumerate(_blocks(payload)) if _marks(b)), default=-1)
        prefix = sum(len(b) for b in blocks[: last + 1])
    if input_tokens > 0:
        return round(input_tokens * prefix / total)
    return math.ceil(prefix / CHARS_PER_TOKEN)


def _input_tokens(row: Mapping[str, Any]) -> int:
    """The call's prompt tokens: every input-side price term, cached or not."""
    return sum(int(row.get(column) or 0) for column in input_token_columns())


def explain_uncached(
    checks: list[CacheCheck],
    turns: Iterable[Mapping[str, Any]],
    payload: Callable[[int], Mapping[str, Any] | None],
    minimum: Callable[[str | None], int | None],
) -> list[CacheCheck]:
    """Say why each call that read and wrote nothing had no cache: no breakpoint, or a prefix
    below the model's minimum. ``payload(turn)`` gives a call's captured request (None: not
    captured), ``minimum(model)`` the model's minimum cacheable length (None: unknown)."""
    rows = {int(r["turn"]): r for r in turns}
    out = []
    for check in checks:
        request = payload(check.turn) if check.status == NOT_CACHED else None
        if request is None:
            out.append(check)
            continue
        row = rows[check.turn]
        if not has_breakpoint(request):
            note = "the request marks no cache_control breakpoint, so nothing can be cached"
            out.append(replace(check, status=NO_BREAKPOINT, note=note))
            continue
        size, floor = cached_prefix_tokens(request, _input_tokens(row)), minimum(row.get("model"))
        if floor is not None and size < floor:
            note = (
                f"prefix below the model's minimum: ≈{size:,} tokens up to the breakpoint, "
                f"{row.get('model')} caches {floor:,} or more"
            )
            out.append(replace(check, status=BELOW_MINIMUM, note=note))
        else:
            known = f" (its minimum is {floor:,})" if floor is not None else ""
            note = f"a breakpoint on ≈{size:,} tokens{known}, yet nothing was read or written"
            out.append(replace(check, note=note))
    return out


def diagnose(
    turns: list[Mapping[str, Any]],
    payload: Callable[[int], Mapping[str, Any] | None],
    minimum: Callable[[str | None], int | None],
) -> list[CacheCheck]:
    """Every call's verdict: usage, then the payloads where usage cannot vouch for the prefix
    (a call that read back everything the previous one cached kept it, so its payloads are
    not loaded), then the reason a call used no cache."""
    usage = check_cache(turns)
    vouched = {c.turn for c in usage if c.status == CACHED}
    changes: dict[int, PrefixChange | None] = {}
    for turn, before in previous_same_call(turns).items():
        if turn not in vouched:
            a, b = payload(before), payload(turn)
            if a is not None and b is not None:
                changes[turn] = first_prefix_change(a, b)
    return explain_uncached(merge_prefix_findings(usage, changes), turns, payload, minimum)
