"""A circuit breaker per webhook target: stop sending to a target that keeps failing, probe it later.

* **closed**: deliveries go out; each failed attempt (anything but a 2xx) counts, a success resets.
* **open**: after ``threshold`` failed attempts in a row nothing is sent to the target for
  ``cooldown`` seconds; its alerts wait in its queue (they are not thrown away).
* **half-open**: the cool-down is over; the next attempt is a probe. Success closes the
  circuit (the queue drains), failure opens it for another cool-down.

The state is a function of the attempts alone (their outcome and time), so the same
machine runs live in the deliverer and is replayed from ``alert_deliveries`` by
``turnledger alerts`` (:func:`replay`), which reads the ledger, not the delivering process.
No breaker library fits that (they wrap calls and keep their own clock); this is 30 lines.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

__all__ = ["BREAKER_COOLDOWN", "BREAKER_THRESHOLD", "Breaker", "BreakerState", "replay"]

BreakerState = Literal["closed", "open", "half-open"]

# 5 failures: one alert's whole retry schedule (0.5 + 1 + 2 + 4 s of back-off) against a dead
# target; 60 s: a restarting receiver is usually back by then, and a dead one costs one probe a minute.
BREAKER_THRESHOLD = 5
BREAKER_COOLDOWN = 60.0


@dataclass(slots=True)
class Breaker:
    """One target's circuit. Times are seconds on any one clock (monotonic live, epoch in a replay)."""

    threshold: int = BREAKER_THRESHOLD
    cooldown: float = BREAKER_COOLDOWN
    failures: int = 0  # failed attempts in a row
    opened_at: float | None = None  # time of the failure that (re)opened the circuit
    last_detail: str = ""

    def state(self, now: float) -> BreakerState:
        if self.opened_at is None:
            return "closed"
        return "open" if now < self.opened_at + self.cooldown else "half-open"

    def wait(self, now: float) -> float:
        """Seconds until an attempt may go (0: now)."""
        return 0.0 if self.opened_at is None else max(0.0, self.opened_at + self.cooldown - now)

    def record(self, ok: bool, now: float, detail: str = "") -> None:
        self.last_detail = detail
        if ok:
            self.failures, self.opened_at = 0, None
            return
        self.failures += 1
        if self.failures >= self.threshold:
            self.opened_at = now  # opened, or a failed probe re-opened it

    def to_dict(self, now: float) -> dict[str, object]:
        state = self.state(now)
        return {
            "state": state,
            "failures_in_a_row": self.failures,
            "probe_in_s": round(self.wait(now), 1) if state == "open" else None,
            "last_detail": self.last_detail,
        }


def replay(
    attempts: Iterable[tuple[bool, float, str]], threshold: int = BREAKER_THRESHOLD, cooldown: float = BREAKER_COOLDOWN
) -> Breaker:
    """The breaker after these attempts, ``(ok, time, detail)`` in time order."""
    breaker = Breaker(threshold, cooldown)
    for ok, at, detail in attempts:
        breaker.record(ok, at, detail)
    return breaker
