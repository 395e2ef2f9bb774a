"""``accounted``: any model call outside the loop becomes a labelled charge.

A summarizer inside a tool or a router in front of the agent costs money
too; a call site nobody accounts for makes every report too low. Wrapping
the call makes accounting the default rather than something each author
must remember. Inside a run the charge joins the run (its observer, its
budget, its step); outside a run it goes to the default observer.

Streamed calls are drained to the end and charged from the final message,
where the real output count lives; ``message_start`` only has a placeholder.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from decimal import Decimal
from types import TracebackType
from typing import Any, TypeVar

from collector.harness.llm import Usage, final_message

from .config import DEFAULT_PRICES, Price
from .model_call import CallRecorder, describe_response, error_type, observed_call
from .observer import ModelAttempt, Observer, guarded
from .retry import RetryPolicy
from .scope import Runtime, current_scope, default_observer

__all__ = ["Accounted", "accounted"]

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])
_DEFAULT_RUNTIME = Runtime()
_FALLBACK_PRICE = DEFAULT_PRICES["claude-opus-5"]


def _default_price(model: str, usage: Usage) -> Decimal:
    return DEFAULT_PRICES.get(model, _FALLBACK_PRICE).cost(usage)


def _finish_stream(result: Any) -> Any:
    """The final message of a stream (manager or entered stream); anything else unchanged."""
    if hasattr(result, "get_final_message"):
        return final_message(result)
    if hasattr(result, "__enter__") and not hasattr(result, "usage"):
        with result as stream:
            return final_message(stream)
    return result


class Accounted:
    """Decorator and context manager; build it with :func:`accounted`."""

    def __init__(
        self,
        label: str,
        *,
        model: str | None,
        retry: RetryPolicy | None,
        observer: Observer | None,
        price: Price | None,
        runtime: Runtime | None,
    ) -> None:
        self.label = label
        self.runtime = runtime
        self.model = model
        self.retry = retry
        self.observer = guarded(observer) if observer is not None else None
        self.price = price
        self._recorder: CallRecorder | None = None
        self._attempt: ModelAttempt | None = None
        self._recorded = False

    def _new_recorder(self, model: str | None, request: Mapping[str, Any] | None) -> CallRecorder:
        scope = current_scope()
        observer = self.observer or (scope.observer if scope else default_observer())
        price: Callable[[str, Usage], Decimal]
        if self.price is not None:
            fixed = self.price
            price = lambda _model, usage: fixed.cost(usage)  # noqa: E731
        else:
            price = scope.price if scope else _default_price
        return CallRecorder(
            call_site=self.label,
            model=model or self.model or "unknown",
            request=request,
            observer=observer,
            runtime=self.runtime or (scope.runtime if scope else _DEFAULT_RUNTIME),
            scope=scope,
            price=price,
        )

    # --- decorator ------------------------------------------------------------
    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            # Called with a Messages payload as keywords (a wrapped client method):
            # that payload is the request, so capture it.
            request = dict(kwargs) if "messages" in kwargs else None
            recorder = self._new_recorder(kwargs.get("model"), request)
            return observed_call(lambda: _finish_stream(fn(*args, **kwargs)), recorder, self.retry)

        return wrapper  # type: ignore[return-value]

    # --- context manager ------------------------------------------------------
    def __enter__(self) -> Accounted:
        self._recorder = self._new_recorder(None, None)
        self._attempt = self._recorder.start(1, None)
        self._recorded = False
        return self

    def record(self, response: Any) -> Any:
        """Charge ``response`` (an SDK Message, a stream, or an LLMResponse); returns
        the final message for a stream, else ``response``."""
        if self._recorder is None or self._attempt is None:
            raise RuntimeError("record() is only valid inside `with accounted(...)`")
        if self._recorded:
            raise RuntimeError("one `with accounted(...)` block records one call; open another block")
        final = _finish_stream(response)
        self._recorder.succeed(self._attempt, describe_response(final))
        self._recorded = True
        return final

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        recorder, attempt = self._recorder, self._attempt
        self._recorder = self._attempt = None
        if recorder is None or attempt is None or self._recorded:
            return
        if exc is not None:
            recorder.fail(attempt, error_type(exc), str(exc))
        else:
            # The block made a call and never said what it cost: keep the gap visible.
            log.warning("accounted(%r) block exited without record(): the call is unaccounted", self.label)
            recorder.fail(attempt, "unrecorded", "accounted block exited without record()")


def accounted(
    label: str,
    *,
    model: str | None = None,
    retry: RetryPolicy | None = None,
    observer: Observer | None = None,
    price: Price | None = None,
    runtime: Runtime | None = None,
) -> Accounted:
    """Record model calls under the call-site ``label``.

    As a decorator, the wrapped function makes one model call and returns what
    the client returned (``Message``, a stream, or an ``LLMResponse``); a stream
    is drained and its final message returned. With ``retry``, infrastructure
    failures are retried here and every attempt is its own record. Inside a run
    the run's observer, runtime and prices apply unless given here. When the
    wrapped function is called with a Messages payload as keywords (a client
    method), that payload is recorded as the request::

        @accounted("summarizer")
        def summarize(text): return client.messages.create(...)

        with accounted("router") as call:
            call.record(client.messages.create(...))
    """
    return Accounted(label, model=model, retry=retry, observer=observer, price=price, runtime=runtime)
