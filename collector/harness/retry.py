"""Retry with exponential backoff and jitter, for infrastructure failures only.

Two kinds of failure need opposite treatment. Infrastructure failures (429,
5xx including Anthropic's 529 "overloaded", dropped connections) are retried
here: the model cannot act on a network event. Every other 4xx means the
request itself is wrong and will fail identically, so it is raised at once.
(Semantic failures, a bad tool argument, go back to the model as an
``is_error`` tool result; they never reach this module.)
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from collector.harness.llm import ProviderError

__all__ = [
    "Failure",
    "RetryPolicy",
    "backoff_wait",
    "call_with_retry",
    "classify_failure",
    "jittered",
    "parse_retry_after",
]

T = TypeVar("T")

# SDK connection errors do not subclass the builtin ConnectionError; matching the
# class names (anthropic and openai share them) avoids importing either SDK here.
_CONNECTION_ERROR_NAMES = frozenset({"APIConnectionError", "APITimeoutError"})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``max_attempts`` counts the first try. Waits double from ``base_s`` up to
    ``cap_s``; each wait gets up to ``jitter`` of itself added, so a retry lands
    in [w, 1.3 w] with the default: never early, and never all at once."""

    max_attempts: int = 5
    base_s: float = 1.0
    cap_s: float = 60.0
    jitter: float = 0.3

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts!r}")


@dataclass(frozen=True, slots=True)
class Failure:
    """A retryable failure: ``cause`` is the status ("429", "529", "503") or "connection"."""

    cause: str
    retry_after: float | None = None


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, then ``retry-after``
    (seconds, or an HTTP date). None when absent, unparseable or not positive."""
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        if "retry-after-ms" in lowered:
            seconds = float(lowered["retry-after-ms"]) / 1000
            return seconds if seconds > 0 else None
    except ValueError:
        pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value).timestamp()
        except (TypeError, ValueError):
            return None
        seconds = when - (time.time() if now is None else now)
    return seconds if seconds > 0 else None


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status", None)
    if status is None:
        status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _retry_after(exc: BaseException) -> float | None:
    hint = getattr(exc, "retry_after", None)
    if isinstance(hint, (int, float)) and hint > 0:
        return float(hint)
    headers = getattr(getattr(exc, "response", None), "headers", None)
    return parse_retry_after(headers) if headers is not None else None


def classify_failure(exc: BaseException) -> Failure | None:
    """A :class:`Failure` when ``exc`` is worth retrying, else None."""
    status = _status(exc)
    if status is not None:
        if status == 429 or status >= 500:
            return Failure(str(status), _retry_after(exc))
        return None  # any other 4xx: the request is wrong, retrying repeats it
    if isinstance(exc, (ConnectionError, TimeoutError)) or any(
        cls.__name__ in _CONNECTION_ERROR_NAMES for cls in type(exc).__mro__
    ):
        return Failure("connection")
    if isinstance(exc, ProviderError):  # status None: a scripted dropped connection
        return Failure("connection")
    return None


def backoff_wait(policy: RetryPolicy, retry_number: int, retry_after: float | None = None) -> float:
    """The wait before retry ``retry_number`` (1 = the first retry), before jitter.

    The server's ``retry-after`` wins when it is within the cap: it knows when its
    window resets. A hint beyond the cap is treated as absent (the SDKs do the
    same), so a misbehaving header cannot park a worker for an hour.
    """
    if retry_after is not None and 0 < retry_after <= policy.cap_s:
        return retry_after
    return min(policy.base_s * 2 ** (retry_number - 1), policy.cap_s)


def jittered(wait: float, rng: random.Random, fraction: float) -> float:
    """``wait`` plus a uniform draw in [0, fraction * wait]: clients that failed
    together wake apart, and none retries earlier than it was told to."""
    return wait + rng.uniform(0, fraction * wait)


def call_with_retry(
    fn: Callable[[int, str | None], T],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], Any] = time.sleep,
    rng: random.Random | None = None,
    on_retry: Callable[[int, str, float], Any] | None = None,
) -> T:
    """Call ``fn(attempt, cause)`` until it succeeds, a failure is not retryable,
    or ``policy.max_attempts`` is spent; the last error is re-raised as is.

    ``attempt`` is 1-based and ``cause`` says why this attempt exists (None for
    the first), so the caller can record every attempt as its own charge.
    ``on_retry(next_attempt, cause, wait_s)`` runs before each sleep.
    """
    rng = rng or random.Random()
    cause: str | None = None
    attempt = 1
    while True:
        try:
            return fn(attempt, cause)
        except Exception as exc:
            failure = classify_failure(exc)
            if failure is None or attempt >= policy.max_attempts:
                raise
            wait = jittered(backoff_wait(policy, attempt, failure.retry_after), rng, policy.jitter)
            if on_retry is not None:
                on_retry(attempt + 1, failure.cause, wait)
            sleep(wait)
            cause = failure.cause
            attempt += 1
