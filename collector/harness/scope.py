"""Runtime dependencies and the current run, reachable from any call site.

``Runtime`` holds what tests and simulations replace: sleep, clock, random
source, id factory. ``RunScope`` is the live run; it rides in a context
variable so a model call made deep inside a tool (through ``accounted``)
reaches the run's observer, budget and charge list without being passed
anything. Tool worker threads get a copy of the context (see ``tools``).
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from collector.harness.llm import Usage

from .budget import Budget
from .observer import GuardEvent, Observer, guarded
from .result import Charge

__all__ = [
    "RunScope",
    "Runtime",
    "current_scope",
    "default_observer",
    "entered",
    "set_default_observer",
]


def _new_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Runtime:
    """Everything time- or chance-dependent, injectable for tests and simulations."""

    sleep: Callable[[float], Any] = time.sleep
    clock_ns: Callable[[], int] = time.time_ns
    rng: random.Random = field(default_factory=random.Random)
    new_id: Callable[[], str] = _new_id

    @classmethod
    def seeded(cls, seed: int, *, sleep: Callable[[float], Any] | None = None, start_ns: int = 0) -> Runtime:
        """Deterministic ids, jitter and clock (the clock advances by slept time)."""
        rng = random.Random(seed)
        ids = random.Random(seed ^ 0x5EED)
        now = [start_ns or 1_790_000_000_000_000_000]

        def fake_sleep(seconds: float) -> None:
            now[0] += int(seconds * 1e9)
            if sleep is not None:
                sleep(seconds)

        def clock() -> int:
            now[0] += 1_000  # strictly increasing, so spans never have zero length
            return now[0]

        return cls(sleep=fake_sleep, clock_ns=clock, rng=rng, new_id=lambda: f"{ids.getrandbits(128):032x}")


@dataclass
class RunScope:
    run_id: str
    tenant: str | None
    observer: Observer
    runtime: Runtime
    budget: Budget
    price: Callable[[str, Usage], Decimal]
    step: int = 0
    charges: list[Charge] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, charge: Charge) -> None:
        with self._lock:
            self.charges.append(charge)
        self.budget.charge(charge.usage, charge.cost_usd)

    def emit(self, event: tuple[str, dict[str, Any]]) -> None:
        name, attributes = event
        self.observer.guard_event(
            GuardEvent(name, attributes, self.runtime.clock_ns(), run_id=self.run_id, step=self.step)
        )


_current: ContextVar[RunScope | None] = ContextVar("turnledger_run_scope", default=None)
_default_observer: Observer = guarded(Observer())


def current_scope() -> RunScope | None:
    """The run this code is executing inside, if any."""
    return _current.get()


@contextmanager
def entered(scope: RunScope) -> Iterator[RunScope]:
    token = _current.set(scope)
    try:
        yield scope
    finally:
        _current.reset(token)


def set_default_observer(observer: Observer | None) -> None:
    """The observer for model calls made outside any run (a router, a batch job)."""
    global _default_observer
    _default_observer = guarded(observer)


def default_observer() -> Observer:
    return _default_observer
