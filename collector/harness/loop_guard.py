"""LoopGuard: notice that a run stopped making progress, say so, then stop it.

Three loop shapes, three signals, because a (tool, arguments) fingerprint
alone sees only the first:

* repeat: the same call with the same canonical arguments, again and again;
* cycle: calls differ (read, write, read) but the world snapshot does not move;
* stall: calls and world change, but the progress metric never improves.

A trip returns a nudge for the model first (the transcript has become an
example of repeating itself; naming the repetition usually breaks it). A
second trip, or the guard's own tool-call cap, is terminal. ``check`` never
raises: the caller turns a terminal trip into a partial report.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from ledger.loops import fingerprint

from .events import LoopShape

__all__ = ["LoopGuard", "Trip", "fingerprint"]


@dataclass(frozen=True, slots=True)
class Trip:
    shape: LoopShape
    message: str  # what the model is told (nudge) or why the run ended (halt)
    halt: bool
    tool: str


class LoopGuard:
    """Thresholds are "allowed" counts: ``repeat=3`` lets a call happen three
    times and trips on the fourth; ``cycle=2`` lets the world look the same
    twice; ``stall=6`` allows six steps without a new best progress value."""

    def __init__(self, repeat: int = 3, cycle: int = 2, stall: int = 6, max_steps: int = 40) -> None:
        self.repeat, self.cycle, self.stall, self.max_steps = repeat, cycle, stall, max_steps
        self.calls: Counter[str] = Counter()
        self.states: Counter[str] = Counter()
        self.steps = 0
        self.best_progress: float | None = None
        self.since_progress = 0
        self.trips = 0
        self.halted = False

    def _trip(self, shape: LoopShape, tool: str, message: str) -> Trip:
        self.trips += 1
        halt = self.trips > 1  # the nudge already failed once
        self.halted = self.halted or halt
        return Trip(shape, message, halt, tool)

    def check(self, tool: str, args: Any, state: Any = None, progress: float | None = None) -> Trip | None:
        """Account for one executed tool call; None means carry on.

        ``state`` is a snapshot of the world after the call. None skips the
        cycle check: a constant stand-in would make every read-only run look
        like a cycle by its third call.
        """
        self.steps += 1
        if self.steps > self.max_steps:
            self.halted = True
            return Trip(
                "step_cap",
                f"Tool-call cap of {self.max_steps} reached. Halting: report what you have and what is missing.",
                True,
                tool,
            )

        key = fingerprint([tool, args])
        self.calls[key] += 1
        if self.calls[key] > self.repeat:
            return self._trip(
                "repeat",
                tool,
                f"You have called {tool} with these exact arguments {self.calls[key]} times; it will not "
                "return anything different. Change your approach, or report what is blocking you.",
            )

        if state is not None:
            snapshot = fingerprint(state)
            self.states[snapshot] += 1
            if self.states[snapshot] > self.cycle:
                return self._trip(
                    "cycle",
                    tool,
                    "The system state has not changed across several steps: you appear to be cycling "
                    "between the same actions. Stop, and summarize what you have tried.",
                )

        if progress is not None:
            if self.best_progress is None or progress > self.best_progress:
                self.best_progress, self.since_progress = progress, 0
            else:
                self.since_progress += 1
                if self.since_progress > self.stall:
                    return self._trip(
                        "stall",
                        tool,
                        f"No measurable progress in {self.since_progress} steps (the metric is stuck at "
                        f"{self.best_progress}). Try a different strategy, or report the blocker.",
                    )
        return None
