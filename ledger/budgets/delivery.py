"""Webhook delivery on background threads: retries with backoff, every attempt recorded.

Ingest must never wait for a webhook. :meth:`Deliverer.submit` only puts work on
a schedule and returns; worker threads POST, and a failed attempt is put back
on the schedule for later (it never sleeps in place, so one slow target does not
hold the others back while they wait for a retry). A target that hangs occupies
one worker for at most ``timeout`` seconds per attempt.

Retried: connection errors, timeouts, 408, 425, 429 and 5xx. Given up at once:
other 4xx and 3xx (redirects are never followed), and a target the address
policy refuses (:mod:`.targets`, checked again on every attempt: addresses change). Waits double from ``base_delay``
up to ``max_delay``, with up to 30% jitter (seed 000, exercise 2); a
``Retry-After`` header wins when it is shorter than ``max_delay``.
"""

from __future__ import annotations

import heapq
import http.client
import itertools
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from .alerts import AlertEvent
from .rules import BudgetError, WebhookTarget
from .targets import TargetPolicy, UnresolvedTarget, check_url, connect_pinned
from .windows import Clock, system_clock

__all__ = ["Deliverer", "DeliveryAttempt", "HttpResult", "post", "webhook_body"]

log = logging.getLogger(__name__)

_RETRYABLE = {408, 425, 429}
_MAX_ANSWER = 64 * 1024


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


def post(url: str, body: bytes, timeout: float, policy: TargetPolicy) -> HttpResult:
    """POST JSON to a target the policy allows, at the address it checked; never raises.

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
    try:
        conn = connect_pinned(target, timeout)
        try:
            conn.request("POST", target.path, body=body, headers=headers)
            resp = conn.getresponse()
            resp.read(_MAX_ANSWER)  # the answer is not used; reading a little lets the server finish cleanly
        finally:
            conn.close()
    except TimeoutError:
        return HttpResult(None, f"no answer within {timeout:g}s")
    except (http.client.HTTPException, OSError) as exc:
        return HttpResult(None, f"connection failed: {exc or type(exc).__name__}")
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
    status: str  # delivered | retrying | failed
    http_status: int | None
    latency_ms: float
    detail: str


@dataclass(order=True)
class _Job:
    due: float
    seq: int
    event: AlertEvent
    target: WebhookTarget
    attempt: int
    body: bytes


class Deliverer:
    """A schedule of webhook POSTs worked off by daemon threads.

    ``record`` is called (on a worker thread) after every attempt; ``send`` is
    the HTTP call (:func:`post` under ``policy`` by default, injectable for tests);
    ``policy`` defaults to ``TURNLEDGER_ALLOW_PRIVATE_WEBHOOKS`` (else public targets only).
    """

    def __init__(
        self,
        record: Callable[[DeliveryAttempt], None] | None = None,
        *,
        workers: int = 4,
        max_attempts: int = 5,
        base_delay: float = 0.5,
        max_delay: float = 30.0,
        timeout: float = 5.0,
        clock: Clock = system_clock,
        send: Callable[[str, bytes, float], HttpResult] | None = None,
        rng: random.Random | None = None,
        policy: TargetPolicy | None = None,
    ) -> None:
        if max_attempts < 1 or workers < 1:
            raise ValueError(f"workers={workers!r} and max_attempts={max_attempts!r} must be at least 1")
        self.record = record
        self.workers, self.max_attempts = workers, max_attempts
        self.base_delay, self.max_delay, self.timeout = base_delay, max_delay, timeout
        self.policy = policy if policy is not None else TargetPolicy.from_settings()
        self.clock = clock
        self.send = send if send is not None else partial(post, policy=self.policy)
        self.rng = rng or random.Random()
        self._heap: list[_Job] = []
        self._seq = itertools.count()
        self._cv = threading.Condition()
        self._busy = 0
        self._closed = False
        self._threads: list[threading.Thread] = []

    # --- producer side (the ingest thread): never blocks on I/O ------------------------------
    def submit(self, event: AlertEvent, targets: Iterable[WebhookTarget]) -> int:
        """Schedule ``event`` for each target; returns how many deliveries were scheduled."""
        jobs = [_Job(time.monotonic(), next(self._seq), event, t, 1, webhook_body(event, t.format)) for t in targets]
        if not jobs:
            return 0
        with self._cv:
            if self._closed:
                log.warning("alert %s not delivered: the deliverer is closed", event.id)
                return 0
            self._start_workers()
            for job in jobs:
                heapq.heappush(self._heap, job)
            self._cv.notify(len(jobs))
        return len(jobs)

    @property
    def pending(self) -> int:
        with self._cv:
            return len(self._heap) + self._busy

    def join(self, timeout: float | None = None) -> bool:
        """Wait until nothing is scheduled or in flight (retries included); True if so."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while self._heap or self._busy:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cv.wait(left if left is not None else 0.5)
            return True

    def close(self, timeout: float = 2.0) -> None:
        """Stop the workers; scheduled retries that are not due are dropped (and logged)."""
        with self._cv:
            self._closed = True
            dropped = len(self._heap)
            self._heap.clear()
            self._cv.notify_all()
        if dropped:
            log.warning("deliverer closed with %d webhook deliveries still scheduled", dropped)
        deadline = time.monotonic() + timeout
        for t in self._threads:  # a worker stuck on a hung target ends at its own timeout
            t.join(max(0.0, deadline - time.monotonic()))

    # --- workers ----------------------------------------------------------------------------
    def _start_workers(self) -> None:
        while len(self._threads) < self.workers:
            t = threading.Thread(target=self._work, name=f"turnledger-webhook-{len(self._threads)}", daemon=True)
            self._threads.append(t)
            t.start()

    def _next(self) -> _Job | None:
        with self._cv:
            while not self._closed:
                if self._heap:
                    wait = self._heap[0].due - time.monotonic()
                    if wait <= 0:
                        self._busy += 1
                        return heapq.heappop(self._heap)
                    self._cv.wait(wait)
                else:
                    self._cv.wait()
            return None

    def _work(self) -> None:
        while (job := self._next()) is not None:
            try:
                self._attempt(job)
            except Exception:  # never let one bad delivery kill the worker
                log.exception("webhook delivery of alert %s failed unexpectedly", job.event.id)
            finally:
                with self._cv:
                    self._busy -= 1
                    self._cv.notify_all()

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None and 0 <= retry_after <= self.max_delay:
            return retry_after
        wait = min(self.base_delay * 2 ** (attempt - 1), self.max_delay)
        return wait + self.rng.uniform(0, 0.3 * wait)

    def _attempt(self, job: _Job) -> None:
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
        if again:
            delay = self._delay(job.attempt, result.retry_after)
            detail += f"; retry {job.attempt + 1}/{self.max_attempts} in {delay:.2f}s"
        elif not ok:
            detail += "; giving up" + ("" if retryable else " (not retryable)")
        status = "delivered" if ok else "retrying" if again else "failed"
        attempt = DeliveryAttempt(
            job.event.id, job.target, job.attempt, at, status, result.status, round(latency, 3), detail
        )
        if self.record is not None:
            try:
                self.record(attempt)
            except Exception:
                log.exception("recording delivery attempt %s/%d failed", job.event.id, job.attempt)
        if again:
            nxt = _Job(time.monotonic() + delay, next(self._seq), job.event, job.target, job.attempt + 1, job.body)
            with self._cv:
                if not self._closed:
                    heapq.heappush(self._heap, nxt)
                    self._cv.notify()
