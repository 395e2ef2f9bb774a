"""At the current rate, when does a spend budget run out? (pure arithmetic)

The rate is the spend of the recent past (the last hour by default, or the
part of the window elapsed so far when that is shorter) per hour; the budget
runs out when the remaining amount is spent at that rate. For a rolling window
this ignores spend that will age out of the window, so it errs early.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from .rules import decimal_str

__all__ = ["Projection", "project"]

_HOUR = Decimal(3600)
MICRO_USD = Decimal("0.000001")  # a rate's precision in payloads: the ledger's own (a micro-dollar)


@dataclass(frozen=True, slots=True)
class Projection:
    rate_usd_per_hour: Decimal
    remaining_usd: Decimal
    runs_out_at: datetime | None  # None: nothing is being spent
    within_window: bool  # False: at this rate the window ends first

    def describe(self) -> str:
        if self.remaining_usd <= 0:
            return "spent"
        if self.runs_out_at is None:
            return "no recent spend: not running out"
        when = self.runs_out_at.strftime("%Y-%m-%d %H:%M UTC")
        rate = f"${self.rate_usd_per_hour.quantize(Decimal('0.0001'))}/h"
        if not self.within_window:
            return f"at {rate} it lasts past the end of this window (would run out {when})"
        return f"at {rate} it runs out at {when}"

    def to_dict(self) -> dict[str, str | bool | None]:
        return {
            # A quotient: exact to 28 digits, which no reader wants; money in the ledger is to the micro-dollar.
            "rate_usd_per_hour": decimal_str(self.rate_usd_per_hour.quantize(MICRO_USD)),
            "remaining_usd": decimal_str(self.remaining_usd),
            "runs_out_at": self.runs_out_at.isoformat() if self.runs_out_at else None,
            "within_window": self.within_window,
            "text": self.describe(),
        }


def project(
    spent: Decimal,
    limit: Decimal,
    recent_spend: Decimal,
    lookback: timedelta,
    now: datetime,
    window_end: datetime | None = None,
) -> Projection | None:
    """None when there is no elapsed time to measure a rate over."""
    seconds = Decimal(int(lookback.total_seconds() * 1_000_000)) / 1_000_000
    if seconds <= 0:
        return None
    rate = recent_spend / seconds * _HOUR
    remaining = max(limit - spent, Decimal(0))
    if remaining == 0:
        return Projection(rate, remaining, now, True)
    if rate <= 0:
        return Projection(rate, remaining, None, False)
    out = now + timedelta(seconds=float(remaining / rate * _HOUR))
    return Projection(rate, remaining, out, window_end is None or out < window_end)
