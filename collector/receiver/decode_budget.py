"""Admission by memory: the bytes being decoded at once, across every decode worker, stay under a budget.

A body's memory in the decoder grows with its *inflated* size (a 60 MiB-inflated gzip protobuf body
peaked at ~340 MiB in a worker: parsed message, span records, rows, Arrow, the pickle for the pipe;
and ~100 MiB more in the collector while its rows wait for and go through the commit). Four such
bodies decoding at once cost 1,056 MiB (#41 item 7). As the OpenTelemetry Collector's memory_limiter
refuses data past a memory limit, the receiver admits a complete body only when its estimated
inflated size fits in what the bodies already admitted leave of the budget, and holds that share
until the body's rows are committed (or refused). A waiting request holds its compressed bytes only.

* Small bodies share the budget and decode side by side; a large one waits for room.
* First come, first served: a waiting body is never overtaken (a stream of small bodies cannot starve
  a large one), and a body larger than the whole budget is admitted alone, once the others are done:
  no body waits forever. One that waits past its time-out is answered 503 (retryable), as when the
  decode slots are all taken.

Usable from the event loop (``async_acquire``) and from threads (``green_acquire``), like the decode slots.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from dataclasses import dataclass, field

import aiologic

__all__ = ["DecodeBudget", "inflated_estimate"]


def inflated_estimate(body: bytes, encoding: str | None, max_decoded_bytes: int) -> int:
    """What ``body`` may inflate to, for admission. Identity: its length. gzip: its trailer's ISIZE (the
    inflated length mod 2**32, as the sender wrote it), never below the compressed length nor above
    ``max_decoded_bytes``. A sender can lie in ISIZE; the worker's inflate still stops at
    ``max_decoded_bytes`` (413), and the decode slots bound how many such bodies run at once.
    deflate carries no length: the limit itself."""
    enc = (encoding or "identity").strip().lower()
    if enc in ("", "identity"):
        return len(body)
    if enc in ("gzip", "x-gzip") and len(body) >= 18:  # the smallest gzip member: 10-byte header, 8-byte trailer
        return min(max_decoded_bytes, max(len(body), int.from_bytes(body[-4:], "little")))
    return max_decoded_bytes


@dataclass
class _Waiter:
    share: int
    granted: aiologic.Event = field(default_factory=aiologic.Event)


class DecodeBudget:
    """``acquire(n)`` a share of ``capacity`` bytes (first come, first served), ``release(share)`` it."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self._free = self.capacity
        self._waiting: deque[_Waiter] = deque()
        self._lock = threading.Lock()

    def share(self, n: int) -> int:
        """The share a body of ``n`` estimated bytes takes: a body larger than the budget takes all of it."""
        return min(max(1, n), self.capacity)

    @property
    def free(self) -> int:
        return self._free

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _enter(self, share: int) -> _Waiter | None:
        with self._lock:
            if not self._waiting and share <= self._free:
                self._free -= share
                return None
            waiter = _Waiter(share)
            self._waiting.append(waiter)
            return waiter

    def _gave_up(self, waiter: _Waiter) -> bool:
        """After a wait timed out: True if the share was not granted (the waiter is gone from the queue),
        False if it was granted meanwhile (the caller holds it after all)."""
        with self._lock:
            if waiter.granted.is_set():
                return False
            self._waiting.remove(waiter)
            self._grant()  # the head gave up: those behind it may fit now
            return True

    def _grant(self) -> None:
        while self._waiting and self._waiting[0].share <= self._free:
            waiter = self._waiting.popleft()
            self._free -= waiter.share
            waiter.granted.set()

    async def async_acquire(self, share: int, timeout: float | None = None) -> bool:
        waiter = self._enter(share)
        if waiter is None:
            return True
        try:
            async with asyncio.timeout(timeout):
                await waiter.granted
            return True
        except TimeoutError:
            return not self._gave_up(waiter)
        except BaseException:  # cancelled (the client left, the server stops): the share is not kept
            if not self._gave_up(waiter):
                self.release(share)
            raise

    def green_acquire(self, share: int, timeout: float | None = None) -> bool:
        waiter = self._enter(share)
        if waiter is None or waiter.granted.wait(timeout):
            return True
        return not self._gave_up(waiter)

    def release(self, share: int) -> None:
        with self._lock:
            self._free += share
            if self._free > self.capacity:
                self._free = self.capacity
                raise RuntimeError("decode budget released more than was acquired")
            self._grant()
