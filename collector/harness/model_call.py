"""One logical model call: every attempt observed, charged and retried.

Shared by the loop and by ``accounted`` so both call paths record exactly the
same thing: one attempt record (and one charge) per HTTP attempt, with the
attempt number and the cause of the retry that produced it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeVar

from collector.harness.llm import LLMResponse, Usage

from . import events
from .observer import AttemptOutcome, GuardEvent, ModelAttempt, Observer
from .result import Charge
from .retry import RetryPolicy, call_with_retry, classify_failure
from .scope import RunScope, Runtime

__all__ = ["CallRecorder", "Described", "describe_response", "error_type", "observed_call"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Described:
    usage: Usage
    model: str | None
    stop_reason: str | None
    response: LLMResponse | None


def describe_response(obj: Any) -> Described:
    """Usage and model of whatever a call site returned: our LLMResponse, an SDK
    ``Message`` (the final message of a stream included), or a response dict."""
    if isinstance(obj, LLMResponse):
        return Described(obj.usage, obj.model, obj.stop_reason, obj)
    get = obj.get if isinstance(obj, Mapping) else lambda k, d=None: getattr(obj, k, d)
    usage = get("usage")
    if usage is None:
        raise TypeError(f"cannot account for a {type(obj).__name__!r}: it carries no usage")
    return Described(Usage.from_api(usage), get("model"), get("stop_reason"), None)


def error_type(exc: BaseException) -> str:
    """ "429", "529", "connection" for provider failures, else the status or class name."""
    failure = classify_failure(exc)
    if failure is not None:
        return failure.cause
    status = getattr(exc, "status", None) or getattr(exc, "status_code", None)
    return str(status) if isinstance(status, int) else type(exc).__name__


class CallRecorder:
    """Records the attempts of one logical call (they share ``call_id``)."""

    def __init__(
        self,
        *,
        call_site: str,
        model: str,
        request: Mapping[str, Any] | None,
        observer: Observer,
        runtime: Runtime,
        scope: RunScope | None,
        price: Callable[[str, Usage], Decimal],
    ) -> None:
        self.call_site, self.model, self.request = call_site, model, request
        self.observer, self.runtime, self.scope, self.price = observer, runtime, scope, price
        self.call_id = runtime.new_id()[:16]
        self.run_id = scope.run_id if scope else None
        self.step = scope.step if scope else None

    def start(self, number: int, cause: str | None) -> ModelAttempt:
        record = ModelAttempt(
            call_id=self.call_id,
            attempt=number,
            call_site=self.call_site,
            model=self.model,
            request=self.request,
            started_ns=self.runtime.clock_ns(),
            retry_cause=cause,
            run_id=self.run_id,
            step=self.step,
            tenant=self.scope.tenant if self.scope else None,
        )
        self.observer.model_attempt_started(record)
        return record

    def succeed(self, record: ModelAttempt, d: Described) -> None:
        model = d.model or self.model
        cost = self.price(model, d.usage)
        outcome = AttemptOutcome(
            ended_ns=self.runtime.clock_ns(),
            usage=d.usage,
            cost_usd=cost,
            response=d.response,
            response_model=d.model,
            stop_reason=d.stop_reason,
        )
        self.observer.model_attempt_finished(record, outcome)
        if self.scope is not None:
            self.scope.record(
                Charge(self.call_id, record.attempt, self.call_site, model, d.usage, cost, record.retry_cause)
            )

    def fail(self, record: ModelAttempt, kind: str, message: str) -> None:
        outcome = AttemptOutcome(ended_ns=self.runtime.clock_ns(), error_type=kind, error=message)
        self.observer.model_attempt_finished(record, outcome)
        if self.scope is not None:  # a failed attempt is still a row (usually $0): retries stay visible
            self.scope.record(
                Charge(
                    self.call_id,
                    record.attempt,
                    self.call_site,
                    self.model,
                    Usage(),
                    Decimal(0),
                    record.retry_cause,
                    kind,
                )
            )

    def retried(self, next_attempt: int, cause: str, wait_s: float) -> None:
        name, attributes = events.retry(cause, wait_s, next_attempt)
        self.observer.guard_event(
            GuardEvent(name, attributes, self.runtime.clock_ns(), run_id=self.run_id, step=self.step)
        )


def observed_call(
    fn: Callable[[], T],
    recorder: CallRecorder,
    retry: RetryPolicy | None,
    describe: Callable[[T], Described] = describe_response,
) -> T:
    """Run ``fn`` as one logical call, each attempt recorded; retried under ``retry``."""

    def attempt(number: int, cause: str | None) -> T:
        record = recorder.start(number, cause)
        try:
            result = fn()
            described = describe(result)
        except Exception as exc:
            recorder.fail(record, error_type(exc), str(exc))
            raise
        recorder.succeed(record, described)
        return result

    if retry is None:
        return attempt(1, None)
    runtime = recorder.runtime
    return call_with_retry(attempt, retry, sleep=runtime.sleep, rng=runtime.rng, on_retry=recorder.retried)
