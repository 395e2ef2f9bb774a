"""How counts and durations are written in every output (the CLI's tables and the dashboard): "1 run", "1,204", "35 ms", "76.7 s"."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["count", "duration", "plural"]


def _whole(n: Any) -> int | None:
    """``n`` as a whole number, or None when it is missing (None, NaN, pandas' NA)."""
    try:
        return None if isinstance(n, float) and math.isnan(n) else int(n)
    except (TypeError, ValueError):
        return None


def count(n: Any) -> str:
    """1,204; a missing count is "—"."""
    whole = _whole(n)
    return "—" if whole is None else f"{whole:,}"


def plural(n: Any, word: str, many: str | None = None) -> str:
    """'1 run', '2 runs', '— runs'; ``many`` for a word whose plural is not word + s ('1 retry', '2 retries')."""
    return f"{count(n)} " + (word if _whole(n) == 1 else many or word + "s")


def duration(ms: Any) -> str:
    """A duration given in ms: '0.5 ms' (two significant digits) under 10 ms, '1,204 ms' under 10 s,
    then '76.7 s'; a missing one is "—"."""
    try:
        value = float(ms)
    except (TypeError, ValueError):
        return "—"
    if math.isnan(value):
        return "—"
    if value < 10:
        return f"{value:.2g} ms"
    return f"{value:,.0f} ms" if value < 10_000 else f"{value / 1000:,.1f} s"
