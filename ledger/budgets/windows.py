"""Time windows and the clock they are read from.

Every function here takes ``now`` from an injectable clock, so tests roll a day
over by moving a :class:`ManualClock`, never by sleeping.

* ``day`` / ``month``: the calendar day or month *in the rule's time zone*
  (midnight local to midnight local, so a DST day is 23 or 25 hours long).
* ``rolling_5m`` / ``rolling_hour`` / ``rolling_day``: the 5 minutes, hour or day up to now. A rolling
  window has no fixed instance, so alerts dedup on the *episode* (from leaving
  ok to coming back) instead; see :mod:`ledger.budgets.alerts`.
* ``run``: one run (trace), whenever it happened.

All datetimes are timezone-aware UTC; :func:`naive_utc` converts for DuckDB's
``TIMESTAMP`` columns, which hold UTC without a zone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from .rules import BudgetError, Rule

__all__ = ["Clock", "ManualClock", "Window", "naive_utc", "system_clock", "window_for"]

Clock = Callable[[], datetime]
"""Returns the current time, timezone-aware."""

ROLLING = {"rolling_5m": timedelta(minutes=5), "rolling_hour": timedelta(hours=1), "rolling_day": timedelta(days=1)}


def system_clock() -> datetime:
    return datetime.now(UTC)


class ManualClock:
    """A clock that moves only when told to (thread-safe), for tests and replays."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise BudgetError(f"ManualClock needs an aware datetime, got naive {start!r}")
        self._now = start.astimezone(UTC)
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, delta: timedelta) -> datetime:
        with self._lock:
            self._now += delta
            return self._now

    def set(self, when: datetime) -> None:
        with self._lock:
            self._now = when.astimezone(UTC)


def naive_utc(when: datetime) -> datetime:
    return when.astimezone(UTC).replace(tzinfo=None)


@dataclass(frozen=True, slots=True)
class Window:
    """One instance of a rule's window. ``end`` is None when it is open (rolling, run)."""

    kind: str
    start: datetime | None  # None for a run window (the run's own charges, whenever)
    end: datetime | None
    key: str  # identifies a calendar window or a run; constant for rolling windows
    trace_id: str | None = None

    @property
    def rolling(self) -> bool:
        return self.kind in ROLLING

    def to_dict(self) -> dict[str, str | None]:
        return {
            "kind": self.kind,
            "key": self.key,
            "start": self.start.isoformat() if self.start else None,
            "end": self.end.isoformat() if self.end else None,
        }


def _local_midnight(now: datetime, zone: ZoneInfo, *, month: bool) -> tuple[datetime, datetime]:
    local = now.astimezone(zone)
    first = local.date().replace(day=1) if month else local.date()
    nxt = (first.replace(day=28) + timedelta(days=4)).replace(day=1) if month else first + timedelta(days=1)
    start = datetime(first.year, first.month, first.day, tzinfo=zone)
    end = datetime(nxt.year, nxt.month, nxt.day, tzinfo=zone)
    return start.astimezone(UTC), end.astimezone(UTC)


def window_for(rule: Rule, now: datetime, trace_id: str | None = None) -> Window:
    """The window of ``rule`` that contains ``now`` (or the run ``trace_id``)."""
    if rule.window == "run":
        trace = trace_id or (rule.scope.value if rule.scope.kind == "run" else None)
        if not trace:
            raise BudgetError(f"rule {rule.name!r} is per run: a trace id is needed to evaluate it")
        return Window("run", None, None, f"run:{trace}", trace)
    if rule.window in ROLLING:
        return Window(rule.window, now - ROLLING[rule.window], None, rule.window)
    zone = ZoneInfo(rule.timezone)
    start, end = _local_midnight(now, zone, month=rule.window == "month")
    local = start.astimezone(zone)
    label = local.strftime("%Y-%m") if rule.window == "month" else local.strftime("%Y-%m-%d")
    return Window(rule.window, start, end, f"{rule.window}:{label}@{rule.timezone}")
