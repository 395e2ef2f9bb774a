"""Retry: infrastructure failures retried with capped, jittered backoff that
honours retry-after; other 4xx never retried; every attempt recorded."""

from __future__ import annotations

import random
import statistics

import pytest

from collector.demo.scenarios import build
from collector.harness import (
    AgentConfig,
    InMemoryObserver,
    RetryPolicy,
    backoff_wait,
    call_with_retry,
    classify_failure,
    parse_retry_after,
    run_agent,
)
from collector.harness.llm import IncompleteStreamError, ProviderError
from ledger import conventions as c


def flaky(*failures: BaseException, result: str = "ok"):
    """A call that raises each failure once, in order, then succeeds; counts calls."""
    pending = list(failures)
    calls: list[tuple[int, str | None]] = []

    def fn(attempt: int, cause: str | None) -> str:
        calls.append((attempt, cause))
        if pending:
            raise pending.pop(0)
        return result

    return fn, calls


def test_retry_after_is_honoured(sleeps) -> None:
    fn, calls = flaky(ProviderError(429, retry_after=7))
    assert call_with_retry(fn, RetryPolicy(), sleep=sleeps, rng=random.Random(1)) == "ok"
    assert len(sleeps) == 1 and 7 <= sleeps[0] <= 7 * 1.3  # ~7 s, not the 1 s doubling would pick
    assert calls == [(1, None), (2, "429")]


def test_a_400_is_tried_once_and_raised_at_once(sleeps) -> None:
    fn, calls = flaky(ProviderError(400, "messages: field required"))
    with pytest.raises(ProviderError):
        call_with_retry(fn, RetryPolicy(), sleep=sleeps)
    assert len(calls) == 1 and sleeps == []


def test_the_cap_holds_over_eight_503s(sleeps) -> None:
    fn, calls = flaky(*[ProviderError(503) for _ in range(8)])
    assert call_with_retry(fn, RetryPolicy(max_attempts=9, cap_s=60), sleep=sleeps, rng=random.Random(3)) == "ok"
    assert len(sleeps) == 8 and len(calls) == 9
    assert max(sleeps) <= 60 * 1.3
    assert sleeps[-1] >= 60  # the cap was actually reached, so the bound above was tested
    base = [backoff_wait(RetryPolicy(), n) for n in range(1, 9)]
    assert base == [1, 2, 4, 8, 16, 32, 60, 60]
    assert all(b <= s <= b * 1.3 for b, s in zip(base, sleeps, strict=True))


def test_retries_run_out_and_the_last_error_is_raised(sleeps) -> None:
    fn, calls = flaky(*[ProviderError(529) for _ in range(5)])
    with pytest.raises(ProviderError):
        call_with_retry(fn, RetryPolicy(max_attempts=3), sleep=sleeps)
    assert len(calls) == 3 and len(sleeps) == 2


def wake_times(jitter: float, clients: int = 20) -> list[float]:
    """20 clients hit the same 429 twice; when does each wake for its third try?"""
    times = []
    for seed in range(clients):
        slept: list[float] = []
        fn, _ = flaky(ProviderError(429), ProviderError(429))
        call_with_retry(fn, RetryPolicy(jitter=jitter), sleep=slept.append, rng=random.Random(seed))
        times.append(sum(slept))
    return times


def test_jitter_spreads_the_herd() -> None:
    times = wake_times(jitter=0.3)
    assert statistics.stdev(times) > 0.05 * statistics.mean(times)
    assert statistics.stdev(wake_times(jitter=0.0)) == 0  # what the test catches: a synchronized herd


@pytest.mark.parametrize("status", [429, 500, 502, 503, 529])
def test_rate_limits_and_server_errors_are_retryable(status: int) -> None:
    failure = classify_failure(ProviderError(status))
    assert failure is not None and failure.cause == str(status)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_other_client_errors_are_not(status: int) -> None:
    assert classify_failure(ProviderError(status)) is None


@pytest.mark.parametrize(
    "exc", [ProviderError(None), ConnectionResetError(), TimeoutError(), IncompleteStreamError("cut")]
)
def test_connection_failures_are_retryable(exc: BaseException) -> None:
    assert classify_failure(exc) == classify_failure(ConnectionError())
    assert classify_failure(exc).cause == "connection"  # type: ignore[union-attr]


def test_programming_errors_are_not_retried() -> None:
    assert classify_failure(KeyError("x")) is None


def test_retry_after_parsing() -> None:
    assert parse_retry_after({"Retry-After": "7"}) == 7
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0) == 10
    assert parse_retry_after({}) is None and parse_retry_after({"retry-after": "soon"}) is None
    # A hint beyond the cap is ignored in favour of the capped doubling.
    assert backoff_wait(RetryPolicy(cap_s=60), 1, retry_after=3600) == 1


def test_three_attempts_are_three_attempt_records_and_three_charges(runtime, sleeps) -> None:
    b = build("happy", faults={0: [ProviderError(429, retry_after=7), ProviderError(529)]})
    obs = InMemoryObserver()
    result = run_agent(b.llm, b.task, b.tools, observer=obs, runtime=runtime, **b.options)

    assert result.stop_cause == "completed"
    first_call = [(a, o) for a, o in obs.attempts if a.step == 0]
    assert [(a.attempt, a.retry_cause, o.error_type) for a, o in first_call] == [
        (1, None, "429"),
        (2, "429", "529"),
        (3, "529", None),
    ]
    assert len({a.call_id for a, _ in first_call}) == 1
    assert all(a.request == first_call[0][0].request for a, _ in first_call)  # the same payload re-sent
    charges = [ch for ch in result.charges if ch.call_id == first_call[0][0].call_id]
    assert [(ch.attempt, ch.error_type) for ch in charges] == [(1, "429"), (2, "529"), (3, None)]
    assert result.steps[0].attempts == 3
    retries = [(e.attributes["cause"], e.attributes["attempt"]) for e in obs.events_named(c.EVENT_RETRY)]
    assert retries == [("429", 2), ("529", 3)]
    assert 7 <= sleeps[0] <= 9.1 and 2 <= sleeps[1] <= 2.6  # retry-after, then doubling (second retry)


def test_a_call_that_never_succeeds_ends_the_run_with_cause_error(runtime) -> None:
    b = build("happy", faults={0: [ProviderError(529) for _ in range(10)]})
    cfg = AgentConfig(retry=RetryPolicy(max_attempts=4))
    result = run_agent(b.llm, b.task, b.tools, runtime=runtime, config=cfg, system=b.options["system"])
    assert result.stop_cause == "error" and result.error_type == "529"
    assert len(result.charges) == 4 and result.steps == []


def test_a_bad_request_in_a_run_is_tried_once(runtime, sleeps) -> None:
    b = build("happy", faults={1: [ProviderError(400, "tool_result without tool_use")]})
    obs = InMemoryObserver()
    result = run_agent(b.llm, b.task, b.tools, observer=obs, runtime=runtime, **b.options)
    assert result.stop_cause == "error" and result.error_type == "400"
    assert [o.error_type for _, o in obs.attempts] == [None, "400"] and sleeps == []
