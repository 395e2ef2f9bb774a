"""Simulated time: runs whose spans carry realistic durations while nothing sleeps for real.

A :class:`VirtualClock` per run; :class:`TimedLLM` and :func:`timed_tool` make
model calls and tools advance it (model latency from token counts, tool latency
fixed by the call's arguments), so the same workload always takes the same
simulated time.
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from functools import wraps
from typing import Any

from collector.harness import Runtime, Tool
from collector.harness.llm import LLM, CompleteBySending, LLMResponse

__all__ = ["TimedLLM", "VirtualClock", "fraction", "timed_tool"]


class VirtualClock:
    """Simulated time for one run, deterministic even with parallel tool calls.

    The thread that creates the clock owns the run's timeline. Work on other
    threads (each tool job runs in its own copy of the caller's context) forks
    a branch from the timeline at the moment it starts and advances only that
    branch; the run's next tick comes after the furthest branch, as it would
    after waiting for all of them. So each branch's times depend only on its
    own work, never on how the threads happened to interleave.
    """

    def __init__(self, start_ns: int, tick_ns: int = 1_000) -> None:
        self._owner = threading.get_ident()
        self._now = start_ns
        self._horizon = start_ns
        self._branch: ContextVar[int | None] = ContextVar(f"virtual_clock_{id(self)}", default=None)
        self._lock = threading.Lock()
        self.tick_ns = tick_ns

    def _advance(self, ns: int) -> int:
        with self._lock:
            if threading.get_ident() == self._owner:
                self._now = max(self._now, self._horizon) + ns
                return self._now
            t = self._branch.get()
            t = (self._now if t is None else t) + ns
            self._branch.set(t)
            self._horizon = max(self._horizon, t)
            return t

    def clock_ns(self) -> int:
        """Now, a tick later than the last reading on this timeline (spans never have zero length)."""
        return self._advance(self.tick_ns)

    def sleep(self, seconds: float) -> None:
        self._advance(max(0, int(seconds * 1e9)))

    def runtime(self, seed: int) -> Runtime:
        """A harness runtime on this clock: seeded jitter and ids, sleeps that take no real time."""
        ids = random.Random(seed ^ 0x1D5)
        return Runtime(
            sleep=self.sleep,
            clock_ns=self.clock_ns,
            rng=random.Random(seed),
            new_id=lambda: f"{ids.getrandbits(128):032x}",
        )


class TimedLLM(CompleteBySending):
    """An :class:`LLM` whose calls take simulated time on a :class:`VirtualClock`:
    a fixed overhead, plus time per output token (by model) and per input token."""

    def __init__(
        self,
        llm: LLM,
        clock: VirtualClock,
        *,
        base_s: float = 0.35,
        per_output_token_s: float = 0.012,
        per_input_token_s: float = 0.000_02,
    ) -> None:
        self.llm = llm
        self.model = llm.model
        self.clock = clock
        self.base_s = base_s
        self.per_output_token_s = per_output_token_s
        self.per_input_token_s = per_input_token_s

    def build_request(
        self,
        system: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        max_tokens: int,
        **kw: Any,
    ) -> dict[str, Any]:
        return self.llm.build_request(system, messages, tools, max_tokens, **kw)

    def send(self, request: Mapping[str, Any]) -> LLMResponse:
        try:
            response = self.llm.send(request)
        except Exception:
            self.clock.sleep(0.08)  # an error comes back fast
            raise
        u = response.usage
        fresh_input = u.input_tokens + u.cache_creation_input_tokens
        self.clock.sleep(
            self.base_s
            + u.output_tokens * self.per_output_token_s
            + (fresh_input + u.cache_read_input_tokens / 10) * self.per_input_token_s
        )
        return response


def fraction(*parts: object) -> float:
    """A number in [0, 1) fixed by ``parts`` (the same call always takes the same time)."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def timed_tool(tool: Tool, clock: VirtualClock, seconds: tuple[float, float] = (0.05, 0.4)) -> Tool:
    """``tool`` taking simulated time in ``seconds`` (low, high), fixed by its arguments."""
    low, high = seconds
    fn = tool.fn

    @wraps(fn)  # keeps the signature: the harness inspects it for a tenant parameter
    def timed(*args: Any, **kwargs: Any) -> Any:
        clock.sleep(low + (high - low) * fraction(tool.name, args, sorted(kwargs.items())))
        return fn(*args, **kwargs)

    return Tool(tool.definition, timed)
