"""Guard decisions as (event name, attributes), in the ledger's vocabulary.

Names are the constants of :mod:`ledger.conventions`; attribute keys are the
ones the ledger reads (``shape``, ``action``, ``tool``, ``cause``) plus a few
descriptive ones. Building every event here keeps that vocabulary in one place.
Values are plain str/int/float/bool so any telemetry backend accepts them.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Literal

from ledger import conventions as c

__all__ = [
    "LoopShape",
    "authorization_approved",
    "authorization_denied",
    "budget",
    "handoff",
    "loop_trip",
    "offload",
    "retry",
]

Event = tuple[str, dict[str, Any]]
LoopShape = Literal["repeat", "cycle", "stall", "step_cap"]


def loop_trip(shape: LoopShape, action: Literal["nudge", "halt"], tool: str | None = None) -> Event:
    attrs: dict[str, Any] = {"shape": shape, "action": action}
    if tool:
        attrs["tool"] = tool
    return c.EVENT_LOOP_TRIP, attrs


def budget(
    level: Literal["warn", "stop"], kind: Literal["tokens", "usd"], spent: int | Decimal, limit: int | Decimal
) -> Event:
    """A soft (warn) or hard (stop) budget decision on one dimension."""
    name = c.EVENT_BUDGET_WARN if level == "warn" else c.EVENT_BUDGET_STOP
    fraction = round(float(spent) / float(limit), 4) if limit else 0.0
    if kind == "usd":
        return name, {"kind": kind, "spent_usd": float(spent), "limit_usd": float(limit), "fraction": fraction}
    return name, {"kind": kind, "spent_tokens": int(spent), "limit_tokens": int(limit), "fraction": fraction}


def retry(cause: str, wait_s: float, attempt: int) -> Event:
    """``attempt`` is the number of the attempt about to be made after waiting."""
    return c.EVENT_RETRY, {"cause": cause, "wait_s": round(wait_s, 3), "attempt": attempt}


def offload(tool: str, chars: int, pointer_chars: int, path: str) -> Event:
    return c.EVENT_OFFLOAD, {"tool": tool, "chars": chars, "pointer_chars": pointer_chars, "path": path}


def authorization_denied(tool: str, reason: str, by: str = "") -> Event:
    return c.EVENT_AUTHORIZATION_DENIED, _decision(tool, reason, by)


def authorization_approved(tool: str, reason: str, by: str = "") -> Event:
    """A call that needed an approval (it changes data) and got it."""
    return c.EVENT_AUTHORIZATION_APPROVED, _decision(tool, reason, by)


def _decision(tool: str, reason: str, by: str) -> dict[str, Any]:
    return {"tool": tool, "reason": reason, **({"by": by} if by else {})}


def handoff(reason: str, tool: str) -> Event:
    return c.EVENT_HANDOFF, {"tool": tool, "reason": reason}
