"""Password guessing on the dashboard's login, slowed per client and in total.

Before #41 one websocket could try 11 passwords a second, and opening more websockets
multiplied that. Now a client (its IP address, so a new websocket or browser session
does not start afresh) gets ``free`` wrong guesses, then waits after each further one,
twice as long each time (1 s, 2 s, 4 s … up to ``max_wait``): at most 10 wrong guesses
in its first minute, then 1 a minute. Across all clients at most ``global_per_minute``
wrong guesses are checked per minute (rotating addresses does not help); past that
every login waits, the right password too, until the minute has room again. A refused
attempt checks nothing and counts nothing. A client's count is forgotten after
``forget`` s without a wrong guess, or at its first right one.

Every wrong guess and every refusal is logged, and :meth:`LoginThrottle.stats` gives
the counters the Health page shows to an operator.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["GLOBAL_PER_MINUTE", "THROTTLE", "LoginThrottle"]

log = logging.getLogger(__name__)

GLOBAL_PER_MINUTE = 30  # wrong guesses checked per minute over all clients


@dataclass(slots=True)
class _Client:
    failures: int = 0
    last_failure: float = 0.0


class LoginThrottle:
    """Who may try a password now. ``clock`` is seconds on a monotonic clock (tests inject one)."""

    def __init__(
        self,
        *,
        free: int = 5,
        first_wait: float = 1.0,
        max_wait: float = 60.0,
        global_per_minute: int = GLOBAL_PER_MINUTE,
        forget: float = 900.0,
        max_clients: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.free, self.first_wait, self.max_wait = free, first_wait, max_wait
        self.global_per_minute, self.forget, self.max_clients = global_per_minute, forget, max_clients
        self.clock = clock
        self._clients: dict[str, _Client] = {}
        self._recent: deque[float] = deque()  # times of the wrong guesses of the last minute, all clients
        self._lock = threading.Lock()
        self.failed_total = 0
        self.refused_total = 0
        self._logged_at, self._unlogged = float("-inf"), 0

    def wait(self, client: str) -> float:
        """Seconds before ``client`` may try a password (0: now). A refusal is counted and logged."""
        with self._lock:
            now = self.clock()
            self._expire(now)
            mine = self._client_wait(self._clients.get(client), now)
            everyone = 0.0
            if len(self._recent) >= self.global_per_minute:
                everyone = self._recent[0] + 60.0 - now
            left = max(mine, everyone)
            if left > 0:
                self.refused_total += 1
                self._unlogged += 1
                if now >= self._logged_at + 1.0:  # a refusal costs nothing: one line a second at most, not one each
                    why = "its back-off" if mine >= everyone else "too many wrong guesses from all clients"
                    log.warning("dashboard login: %d attempt(s) refused, the last from %s for %.0f s more (%s)",
                                self._unlogged, client, left, why)  # fmt: skip
                    self._logged_at, self._unlogged = now, 0
            return max(0.0, left)

    def failed(self, client: str) -> None:
        """A wrong password was given (after :meth:`wait` allowed the try)."""
        with self._lock:
            now = self.clock()
            c = self._clients.pop(client, None) or _Client()
            c.failures, c.last_failure = c.failures + 1, now
            self._clients[client] = c  # most recent last: the oldest go first when there are too many
            while len(self._clients) > self.max_clients:
                del self._clients[next(iter(self._clients))]
            self._recent.append(now)
            self.failed_total += 1
            log.warning(
                "dashboard login: wrong password from %s (%d in a row; next try in %.0f s)",
                client, c.failures, self._client_wait(c, now),
            )  # fmt: skip

    def succeeded(self, client: str) -> None:
        with self._lock:
            self._clients.pop(client, None)

    def stats(self) -> dict[str, int | float]:
        """What an operator sees: wrong guesses and refusals since start, clients waiting now."""
        with self._lock:
            now = self.clock()
            self._expire(now)
            waiting = sum(self._client_wait(c, now) > 0 for c in self._clients.values())
            everyone = self._recent[0] + 60.0 - now if len(self._recent) >= self.global_per_minute else 0.0
            return {
                "wrong_passwords": self.failed_total,
                "refused_attempts": self.refused_total,
                "clients_waiting": waiting,
                "wrong_last_minute": len(self._recent),
                "everyone_waits_s": round(max(0.0, everyone), 1),
            }

    def _client_wait(self, c: _Client | None, now: float) -> float:
        if c is None or c.failures < self.free:
            return 0.0
        backoff = min(self.first_wait * 2 ** (c.failures - self.free), self.max_wait)
        return max(0.0, c.last_failure + backoff - now)

    def _expire(self, now: float) -> None:
        while self._recent and self._recent[0] <= now - 60.0:
            self._recent.popleft()
        while self._clients:
            oldest = next(iter(self._clients))
            if self._clients[oldest].last_failure > now - self.forget:
                break
            del self._clients[oldest]


THROTTLE = LoginThrottle()  # one per dashboard process: every session and websocket shares it
