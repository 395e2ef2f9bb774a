"""Webhook delivery on background threads: one lane per target, retries with backoff, every attempt recorded.

Ingest must never wait for a webhook. :meth:`Deliverer.submit` only puts work in
the target's lane and returns. Each target has its own lane: a bounded queue worked
by one thread of its own, one request at a time, so a target that hangs or trickles
holds back only its own alerts, never another target's (#41: with 3 hung and 3
trickling targets beside a good one, the good one got its alert 70 s late when
four shared workers were all stuck). A failed attempt goes back into its lane for
later (the lane never sleeps in place: a new alert due now goes before a retry due later).

Every request has a TOTAL deadline of ``timeout`` seconds, connection and TLS
included: a watchdog cuts the socket when it passes. A read timeout alone is not
one: a receiver sending 1 byte a second never lets a read time out.

A circuit breaker per target (:mod:`.breaker`) stops sending after
``BREAKER_THRESHOLD`` failed attempts in a row and probes again after a cool-down;
meanwhile that target's alerts wait in its lane. A lane holds at most ``max_queue``
deliveries; past that the oldest is dropped, logged and recorded as ``dropped``.

Retried: connection errors, timeouts, 408, 425, 429 and 5xx. Given up at once:
other 4xx and 3xx (redirects are never followed), and a target the address
policy refuses (:mod:`.targets`, checked again on every attempt: addresses change). Waits double from ``base_delay``
up to ``max_delay``, with up to 30% jitter (seed 000, exercise 2); a
``Retry-After`` header wins when it is shorter than ``max_delay``.
"""

from __future__ import annotations

import contextlib
import heapq
import http.client
import itertools
import json
import logging
import random
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from .alerts import AlertEvent
from .breaker import BREAKER_COOLDOWN, BREAKER_THRESHOLD, Breaker
from .rules import BudgetError, WebhookTarget
from .targets import TargetPolicy, UnresolvedTarget, check_url, connect_pinned
from .windows import Clock, system_clock

__all__ = ["DROPPED", "Deliverer", "DeliveryAttempt", "HttpResult", "post", "webhook_body"]

log = logging.getLogger(__name__)

_RETRYABLE = {408, 425, 429}
_MAX_ANSWER = 64 * 1024
DROPPED = "dropped"  # the status of a delivery its lane's queue had no room for: never attempted


def webhook_body(event: AlertEvent, fmt: str) -> bytes:
    """Generic JSON (the whole event) or Slack-compatible ``{"text": ...}``."""
    doc = {"text": event.text()} if fmt == "slack" else event.to_dict()
    return json.dumps(doc, default=str, ensure_ascii=False).encode()


@dataclass(frozen=True, slots=True)
class HttpResult:
    status: int | None  # None: no HTTP answer (timeout, refused, DNS, or the address policy)
    detail: str
    retry_after: float | None = None
    refused: bool = False  # the address policy refused the target: no retry can succeed


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


class _Deadline:
    """Cuts the watched socket when ``seconds`` have passed: a blocked read or write then ends at once."""

    def __init__(self, seconds: float) -> None:
        self.passed = threading.Event()
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._cut)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sock = sock
            if self.passed.is_set():
                self._shutdown()

    def _cut(self) -> None:
        with self._lock:
            self.passed.set()
            self._shutdown()

    def _shutdown(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        self._timer.cancel()


def post(url: str, body: bytes, timeout: float, policy: TargetPolicy) -> HttpResult:
    """POST JSON to a target the policy allows, at the address it checked; never raises.

    ``timeout`` is the whole request's deadline: connecting, sending and reading the answer.
    Redirects are not followed: a 3xx is answered as it is (the Location named), and,
    being neither 2xx nor retryable, it is a failure the deliverer does not retry.
    """
    try:
        target = check_url(url, policy)
    except UnresolvedTarget as exc:  # DNS may come back: retried
        return HttpResult(None, f"connection failed: {exc}")
    except BudgetError as exc:  # a forbidden address, or a URL it cannot check: no retry will help
        return HttpResult(None, f"refused: {exc}", refused=True)
    headers = {"Content-Type": "application/json", "User-Agent": "turnledger-alerts"}
    deadline = _Deadline(timeout)
    late = HttpResult(None, f"no answer within {timeout:g}s")
    try:
        conn = connect_pinned(target, timeout, watch=deadline.watch)
        try:
            conn.request("POST", target.path, body=body, headers=headers)
            resp = conn.getresponse()
            resp.read(_MAX_ANSWER)  # the answer is not used; reading a little lets the server finish cleanly
        finally:
            conn.close()
    except TimeoutError:
        return late
    except (http.client.HTTPException, OSError) as exc:
        if deadline.passed.is_set():  # our cut, not the target's doing
            return late
        return HttpResult(None, f"connection failed: {exc or type(exc).__name__}")
    finally:
        deadline.cancel()
    if deadline.passed.is_set():  # an answer cut short is no answer
        return late
    status, reason = resp.status, resp.reason
    if 300 <= status < 400:
        where = (resp.getheader("Location") or "(no Location)")[:200]
        return HttpResult(status, f"HTTP {status} {reason}: redirect to {where!r} not followed")
    detail = f"HTTP {status}" if status < 400 else f"HTTP {status} {reason}"
    return HttpResult(status, detail, _retry_after(resp.getheader("Retry-After")) if status >= 400 else None)


@dataclass(frozen=True, slots=True)
class DeliveryAttempt:
    """One POST of one alert to one target, as recorded in ``alert_deliveries``."""

    alert_id: str
    target: WebhookTarget
    attempt: int
    attempted_at: datetime
    status: str  # delivered | retrying | failed | dropped (never sent: its lane was full)
    http_status: int | None
    latency_ms: float
    detail: str


@dataclass(order=True)
class _Job:
    due: float
    seq: int
    event: AlertEvent = field(compare=False)
    target: WebhookTarget = field(compare=False)
    attempt: int = field(compare=False)
    body: bytes = field(compare=False)


@dataclass(eq=False)
class _Lane:
    """One target's queue (a heap by due time), its breaker, and the thread working it (while it has work)."""

    cv: threading.Condition
    breaker: Breaker
    jobs: list[_Job] = field(default_factory=list)
    thread: threading.Thread | None = None
    busy: bool = False


class Deliverer:
    """Webhook POSTs, one lane per target, worked off by daemon threads (one per target with work).

    ``record`` is called (on a lane's thread) after every attempt; ``send`` is
    the HTTP call (:func:`post` under ``policy`` by default, injectable for tests);
    ``policy`` defaults to ``TURNLEDGER_ALLOW_PRIVATE_WEBHOOKS`` (else public targets only).
    ``timeout`` is each request's total deadline.
    """

    def __init__(
        self,
        record: Callable[[DeliveryAttempt], None] | None = None,
        *,
        max_attempts: int = 5,
        base_delay: float = 0.5,
        max_delay: float = 30.0,
        timeout: float = 5.0,
        max_queue: int = 100,
        breaker_threshold: int = BREAKER_THRESHOLD,
        breaker_cooldown: float = BREAKER_COOLDOWN,
        clock: Clock = system_clock,
        send: Callable[[str, bytes, float], HttpResult] | None = None,
        rng: random.Random | None = None,
        policy: TargetPolicy | None = None,
    ) -> None:
        if max_attempts < 1 or max_queue < 1 or breaker_threshold < 1:
            raise ValueError(
                f"max_attempts={max_attempts!r}, max_queue={max_queue!r} and "
                f"breaker_threshold={breaker_threshold!r} must be at least 1"
            )
        self.record = record
        self.max_attempts, self.max_queue = max_attempts, max_queue
        self.base_delay, self.max_delay, self.timeout = base_delay, max_delay, timeout
        self.breaker_threshold, self.breaker_cooldown = breaker_threshold, breaker_cooldown
        self.policy = policy if policy is not None else TargetPolicy.from_settings()
        self.clock = clock
        self.send = send if send is not None else partial(post, policy=self.policy)
        self.rng = rng or random.Random()
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # notified when a lane finishes an attempt or empties
        self._lanes: dict[WebhookTarget, _Lane] = {}
        self._closed = False

    # --- producer side (the ingest thread): never blocks on I/O ------------------------------
    def submit(self, event: AlertEvent, targets: Iterable[WebhookTarget]) -> int:
        """Queue ``event`` in each target's lane; returns how many deliveries were queued."""
        jobs = [_Job(time.monotonic(), next(self._seq), event, t, 1, webhook_body(event, t.format)) for t in targets]
        if not jobs:
            return 0
        dropped: list[_Job] = []
        with self._lock:
            if self._closed:
                log.warning("alert %s not delivered: the deliverer is closed", event.id)
                return 0
            for job in jobs:
                lane = self._lane(job.target)
                dropped += self._enqueue(lane, job)
                self._wake(lane)
        for job in dropped:
            self._record_dropped(job)
        return len(jobs)

    def targets(self) -> dict[str, dict[str, Any]]:
        """Each target's breaker and queue, as the delivering process sees them now."""
        now = time.monotonic()
        with self._lock:
            return {
                t.label: {**lane.breaker.to_dict(now), "queued": len(lane.jobs), "in_flight": lane.busy}
                for t, lane in self._lanes.items()
            }

    @property
    def pending(self) -> int:
        with self._lock:
            return sum(len(lane.jobs) + lane.busy for lane in self._lanes.values())

    def join(self, timeout: float | None = None) -> bool:
        """Wait until nothing is queued or in flight (retries and open circuits included); True if so."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            while any(lane.jobs or lane.busy for lane in self._lanes.values()):
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._idle.wait(left if left is not None else 0.5)
            return True

    def close(self, timeout: float = 2.0) -> None:
        """Stop the lanes; queued deliveries not yet sent are dropped (and logged)."""
        with self._lock:
            self._closed = True
            dropped = sum(len(lane.jobs) for lane in self._lanes.values())
            threads = [lane.thread for lane in self._lanes.values() if lane.thread is not None]
            for lane in self._lanes.values():
                lane.jobs.clear()
                lane.cv.notify_all()
        if dropped:
            log.warning("deliverer closed with %d webhook deliveries still queued", dropped)
        deadline = time.monotonic() + timeout
        for t in threads:  # a lane in a request to a hung target ends at the request's deadline
            t.join(max(0.0, deadline - time.monotonic()))

    # --- lanes (called with the lock held unless said otherwise) ----------------------------
    def _lane(self, target: WebhookTarget) -> _Lane:
        lane = self._lanes.get(target)
        if lane is None:
            breaker = Breaker(self.breaker_threshold, self.breaker_cooldown)
            lane = self._lanes[target] = _Lane(threading.Condition(self._lock), breaker)
        return lane

    def _wake(self, lane: _Lane) -> None:
        if lane.thread is None:
            name = f"turnledger-webhook-{len(self._lanes)}"
            lane.thread = threading.Thread(target=self._work, args=(lane,), name=name, daemon=True)
            lane.thread.start()
        else:
            lane.cv.notify()

    def _enqueue(self, lane: _Lane, job: _Job) -> list[_Job]:
        """Queue ``job``; returns the oldest job dropped to keep the lane within ``max_queue`` (if any)."""
        heapq.heappush(lane.jobs, job)
        if len(lane.jobs) <= self.max_queue:
            return []
        oldest = min(range(len(lane.jobs)), key=lambda i: lane.jobs[i].seq)
        dropped = lane.jobs.pop(oldest)
        heapq.heapify(lane.jobs)
        return [dropped]

    def _next(self, lane: _Lane) -> _Job | None:
        """The lane's next job once it is due and the breaker lets it go; None: the lane is done."""
        with self._lock:
            while not self._closed and lane.jobs:
                now = time.monotonic()
                wait = max(lane.jobs[0].due - now, lane.breaker.wait(now))
                if wait <= 0:
                    lane.busy = True
                    return heapq.heappop(lane.jobs)
                lane.cv.wait(wait)
            lane.thread = None  # a later submit starts a new one
            self._idle.notify_all()
            return None

    def _work(self, lane: _Lane) -> None:
        while (job := self._next(lane)) is not None:
            try:
                self._attempt(lane, job)
            except Exception:  # never let one bad delivery kill the lane
                log.exception("webhook delivery of alert %s failed unexpectedly", job.event.id)
            finally:
                with self._lock:
                    lane.busy = False
                    self._idle.notify_all()

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None and 0 <= retry_after <= self.max_delay:
            return retry_after
        wait = min(self.base_delay * 2 ** (attempt - 1), self.max_delay)
        return wait + self.rng.uniform(0, 0.3 * wait)

    def _record(self, attempt: DeliveryAttempt) -> None:
        if self.record is not None:
            try:
                self.record(attempt)
            except Exception:
                log.exception("recording delivery attempt %s/%d failed", attempt.alert_id, attempt.attempt)

    def _record_dropped(self, job: _Job) -> None:
        detail = f"dropped: {self.max_queue} newer deliveries already queued for this target"
        log.warning("webhook %s: alert %s %s", job.target.label, job.event.id, detail)
        self._record(DeliveryAttempt(job.event.id, job.target, job.attempt, self.clock(), DROPPED, None, 0.0, detail))

    def _attempt(self, lane: _Lane, job: _Job) -> None:
        at = self.clock()
        t0 = time.perf_counter()
        result = self.send(job.target.url, job.body, self.timeout)
        latency = (time.perf_counter() - t0) * 1000
        ok = result.status is not None and 200 <= result.status < 300
        retryable = not result.refused and (
            result.status is None or result.status in _RETRYABLE or result.status >= 500
        )
        again = not ok and retryable and job.attempt < self.max_attempts
        detail = result.detail
        with self._lock:
            t = time.monotonic()
            was = lane.breaker.state(t)
            lane.breaker.record(ok, t, result.detail)
            now = lane.breaker.state(t)
        if now == "open" and was != "open":  # opened, or a probe failed
            log.warning("webhook %s: circuit open after %d failed attempts in a row (%s); next probe in %gs",
                        job.target.label, lane.breaker.failures, result.detail, self.breaker_cooldown)  # fmt: skip
        elif now == "closed" and was != "closed":
            log.info("webhook %s: circuit closed again", job.target.label)
        if again:
            delay = self._delay(job.attempt, result.retry_after)
            detail += f"; retry {job.attempt + 1}/{self.max_attempts} in {delay:.2f}s"
            if now == "open":
                detail += f" or later: circuit open for {self.breaker_cooldown:g}s"
        elif not ok:
            detail += "; giving up" + ("" if retryable else " (not retryable)")
        status = "delivered" if ok else "retrying" if again else "failed"
        self._record(
            DeliveryAttempt(job.event.id, job.target, job.attempt, at, status, result.status, round(latency, 3), detail)
        )
        if again:
            nxt = _Job(time.monotonic() + delay, next(self._seq), job.event, job.target, job.attempt + 1, job.body)
            with self._lock:
                dropped = [] if self._closed else self._enqueue(lane, nxt)
            for old in dropped:
                self._record_dropped(old)
