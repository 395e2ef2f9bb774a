"""The narrow hook interface that makes the loop observable.

The loop calls these methods at each decision; a telemetry layer implements
them (spans, events, captured payloads) without touching loop logic. The base
class is the no-op default, so an observer overrides only what it needs.

Threading: tool hooks (and ``accounted`` calls made inside tools) run on the
tool worker threads, and ``tool_started``/``tool_executed`` of one call run on
the same thread, so a span opened in one can be made current for the other.
Implementations must be thread-safe. An observer that raises never breaks the
agent: the loop wraps every observer in :func:`guarded`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from collector.harness.llm import LLMResponse, Usage

if TYPE_CHECKING:
    from .result import AgentResult, ToolExecution

__all__ = [
    "AttemptOutcome",
    "FanOut",
    "GuardEvent",
    "InMemoryObserver",
    "ModelAttempt",
    "Observer",
    "RunInfo",
    "ToolStart",
    "guarded",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RunInfo:
    run_id: str
    task: str
    model: str
    system: str
    tool_names: tuple[str, ...]
    tenant: str | None
    agent_name: str
    agent_version: str = ""
    prompt_version: str = ""
    tool_schema_version: str = ""
    started_ns: int = 0


@dataclass(frozen=True, slots=True)
class ModelAttempt:
    """One HTTP attempt of one logical model call.

    Attempts of one call share ``call_id``; ``retry_cause`` says why this attempt
    exists (None for the first). ``request`` is the exact payload sent, when it is
    known before sending (always, for the loop's own calls); an ``accounted``
    call of an :class:`~collector.harness.llm.LLM` carries it on ``outcome.response.request``.
    """

    call_id: str
    attempt: int
    call_site: str
    model: str
    request: Mapping[str, Any] | None
    started_ns: int
    retry_cause: str | None = None
    run_id: str | None = None
    step: int | None = None
    tenant: str | None = None


@dataclass(frozen=True, slots=True)
class AttemptOutcome:
    """How an attempt ended: a response with usage, or an error (usage zero)."""

    ended_ns: int
    usage: Usage = field(default_factory=Usage)
    cost_usd: Decimal = Decimal(0)  # the harness's estimate; the ledger re-prices
    response: LLMResponse | None = None
    response_model: str | None = None
    stop_reason: str | None = None
    error_type: str | None = None  # "429", "529", "connection", or an exception class name
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_type is None


@dataclass(frozen=True, slots=True)
class ToolStart:
    tool_use_id: str
    name: str
    input: Mapping[str, Any]
    step: int
    started_ns: int
    run_id: str | None = None
    tenant: str | None = None


@dataclass(frozen=True, slots=True)
class GuardEvent:
    """A guard decision; ``name`` and attribute keys follow ``ledger.conventions``."""

    name: str
    attributes: Mapping[str, Any]
    time_ns: int
    run_id: str | None = None
    step: int | None = None


class Observer:
    """No-op base: subclass and override the hooks you need."""

    def run_started(self, run: RunInfo) -> None:
        """Before the first model call."""

    def model_attempt_started(self, attempt: ModelAttempt) -> None:
        """Just before an attempt is sent (its payload is final)."""

    def model_attempt_finished(self, attempt: ModelAttempt, outcome: AttemptOutcome) -> None:
        """After each attempt, successful or not: one call per attempt."""

    def tool_started(self, call: ToolStart) -> None:
        """On the worker thread, before the tool runs (also for denied/unknown tools)."""

    def tool_executed(self, execution: ToolExecution) -> None:
        """On the same thread as ``tool_started``, with what the model will be told."""

    def guard_event(self, event: GuardEvent) -> None:
        """A guard decided something: loop trip, budget warn/stop, retry, offload, ..."""

    def run_finished(self, run: RunInfo, result: AgentResult) -> None:
        """Once, with the final result, whatever the stop cause."""


class _Guarded(Observer):
    """Forwards to an observer, logging and swallowing its exceptions: telemetry
    must never be the reason an agent run fails."""

    def __init__(self, inner: Observer) -> None:
        self.inner = inner

    def _call(self, name: str, *args: Any) -> None:
        try:
            getattr(self.inner, name)(*args)
        except Exception:
            log.exception("observer %s.%s failed; the run continues", type(self.inner).__name__, name)

    def run_started(self, run: RunInfo) -> None:
        self._call("run_started", run)

    def model_attempt_started(self, attempt: ModelAttempt) -> None:
        self._call("model_attempt_started", attempt)

    def model_attempt_finished(self, attempt: ModelAttempt, outcome: AttemptOutcome) -> None:
        self._call("model_attempt_finished", attempt, outcome)

    def tool_started(self, call: ToolStart) -> None:
        self._call("tool_started", call)

    def tool_executed(self, execution: ToolExecution) -> None:
        self._call("tool_executed", execution)

    def guard_event(self, event: GuardEvent) -> None:
        self._call("guard_event", event)

    def run_finished(self, run: RunInfo, result: AgentResult) -> None:
        self._call("run_finished", run, result)


def guarded(observer: Observer | None) -> Observer:
    if observer is None:
        return Observer()
    return observer if isinstance(observer, _Guarded) else _Guarded(observer)


class FanOut(Observer):
    """Several observers as one (telemetry plus a test recorder, say); each is
    guarded on its own so one failing does not starve the others."""

    def __init__(self, observers: Sequence[Observer]) -> None:
        self.observers = [guarded(o) for o in observers]

    def run_started(self, run: RunInfo) -> None:
        for o in self.observers:
            o.run_started(run)

    def model_attempt_started(self, attempt: ModelAttempt) -> None:
        for o in self.observers:
            o.model_attempt_started(attempt)

    def model_attempt_finished(self, attempt: ModelAttempt, outcome: AttemptOutcome) -> None:
        for o in self.observers:
            o.model_attempt_finished(attempt, outcome)

    def tool_started(self, call: ToolStart) -> None:
        for o in self.observers:
            o.tool_started(call)

    def tool_executed(self, execution: ToolExecution) -> None:
        for o in self.observers:
            o.tool_executed(execution)

    def guard_event(self, event: GuardEvent) -> None:
        for o in self.observers:
            o.guard_event(event)

    def run_finished(self, run: RunInfo, result: AgentResult) -> None:
        for o in self.observers:
            o.run_finished(run, result)


class InMemoryObserver(Observer):
    """Records everything, for tests and debugging. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.runs: list[RunInfo] = []
        self.attempts: list[tuple[ModelAttempt, AttemptOutcome]] = []
        self.started_attempts: list[ModelAttempt] = []
        self.tool_starts: list[ToolStart] = []
        self.tools: list[ToolExecution] = []
        self.events: list[GuardEvent] = []
        self.results: list[AgentResult] = []

    def run_started(self, run: RunInfo) -> None:
        with self._lock:
            self.runs.append(run)

    def model_attempt_started(self, attempt: ModelAttempt) -> None:
        with self._lock:
            self.started_attempts.append(attempt)

    def model_attempt_finished(self, attempt: ModelAttempt, outcome: AttemptOutcome) -> None:
        with self._lock:
            self.attempts.append((attempt, outcome))

    def tool_started(self, call: ToolStart) -> None:
        with self._lock:
            self.tool_starts.append(call)

    def tool_executed(self, execution: ToolExecution) -> None:
        with self._lock:
            self.tools.append(execution)

    def guard_event(self, event: GuardEvent) -> None:
        with self._lock:
            self.events.append(event)

    def run_finished(self, run: RunInfo, result: AgentResult) -> None:
        with self._lock:
            self.results.append(result)

    def events_named(self, name: str) -> list[GuardEvent]:
        return [e for e in self.events if e.name == name]

    def by_label(self) -> dict[str, Usage]:
        out: dict[str, Usage] = {}
        for attempt, outcome in self.attempts:
            out[attempt.call_site] = out.get(attempt.call_site, Usage()) + outcome.usage
        return out
