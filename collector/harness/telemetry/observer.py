"""``OTelObserver``: the harness's hooks as OpenTelemetry GenAI spans.

Span tree of one run (names and attribute keys from ``ledger.conventions``)::

    invoke_agent {agent}            root; agent/prompt/tool-schema versions, tenant,
    │                               stop cause; ERROR + error.type on failed stops
    ├── chat {model}                ONE SPAN PER ATTEMPT: call id, attempt number,
    │                               retry cause, call-site label, usage, cost estimate,
    │                               the exact request payload (redacted)
    ├── execute_tool {tool}         arguments and result (redacted, truncated), soft
    │   ├── chat {model}            failure flag; a model call made inside the tool
    │   │                           (``accounted``) is the tool span's child,
    │   └── invoke_agent {sub}      and so is a sub-agent's whole run
    └── ...

The root is ERROR (``error.type`` = the stop cause, or the failing call's
status for ``error``) when the run stopped on a failure: ``max_steps``,
``budget_exceeded``, ``loop_detected``, ``max_tokens``, ``error``. A refusal and a
hand-off are outcomes, not failures. A tool span is ERROR when the model was
told of an error (``tool_error``, ``unknown_tool``, ``authorization_denied``);
a soft failure stays UNSET with ``turnledger.tool.soft_failure`` and its result.

Guard decisions are span events on the span they judged: a loop trip on the
tool call that tripped it (the step cap on the root), a retry on the attempt
it produced, an offload or an authorization denial on its tool call, budget
warnings and stops and hand-offs on the root.

Timestamps are the harness's own (``Runtime.clock_ns``), so a run driven by a
virtual clock produces a trace in that clock. Token counts follow the current
GenAI conventions: ``gen_ai.usage.input_tokens`` INCLUDES cache reads and
writes (the harness's ``Usage`` is Anthropic-style and excludes them);
``gen_ai.usage.cache_creation.input_tokens`` is every write, and a call that
wrote 1-hour cache entries also carries the TTL split under the anthropic
SDK's names (``anthropic.usage.cache_creation.ephemeral_5m_input_tokens`` /
``…_1h_input_tokens``, ``ledger.conventions``; the GenAI conventions have none).

Threading: tool hooks arrive on worker threads. Per-thread state (the open
tool span, a retry event waiting for its attempt) lives in a ``threading.local``;
per-run state behind a lock. Every hook is cheap and never blocks on export.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from collector.harness.observer import AttemptOutcome, GuardEvent, ModelAttempt, Observer, RunInfo, ToolStart
from collector.harness.result import AgentResult, ToolExecution
from ledger import conventions as c

from .capture import Capture

__all__ = ["ERROR_STOPS", "SCOPE_NAME", "SCOPE_VERSION", "OTelObserver"]

log = logging.getLogger(__name__)

# The instrumentation scope of our spans: ledger.normalize knows its token convention by this name.
SCOPE_NAME = "turnledger.harness"
SCOPE_VERSION = "0.1.0"
# Stop causes that are failures: the root gets ERROR status and error.type. A
# refusal and a hand-off are outcomes the model chose, not failures of the run.
ERROR_STOPS = frozenset({"max_steps", "budget_exceeded", "loop_detected", "max_tokens", "error"})
_STATUS_CHARS = 200


@dataclass
class _Run:
    info: RunInfo
    root: trace.Span
    context: otel_context.Context
    token: object | None
    last_ns: int
    # Tool spans whose end is held back until the loop guard has judged them:
    # a trip must land on the call that tripped it, and an ended span takes no events.
    pending: list[tuple[trace.Span, int, str]] = field(default_factory=list)


@dataclass
class _OpenTool:
    span: trace.Span
    run_id: str | None
    tool_use_id: str
    token: object


class OTelObserver(Observer):
    """Turns harness hooks into spans on ``tracer_provider`` (default: the global one).

    ``capture`` is a :class:`Capture` or a mode name (``off``, ``redacted``,
    ``full``); None reads ``TURNLEDGER_CAPTURE``. ``provider_name`` is the
    ``gen_ai.provider.name`` of the model calls (the harness's clients speak
    Anthropic's Messages API).
    """

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        *,
        capture: Capture | str | None = None,
        provider_name: str = "anthropic",
    ) -> None:
        provider = tracer_provider or trace.get_tracer_provider()
        self.tracer = provider.get_tracer(SCOPE_NAME, SCOPE_VERSION)
        self.capture = capture if isinstance(capture, Capture) else Capture(capture)
        self.provider_name = provider_name
        self._runs: dict[str, _Run] = {}
        self._attempts: dict[tuple[str, int], tuple[trace.Span, str | None]] = {}
        self._lock = threading.Lock()
        self._local = threading.local()

    # --- per-thread state ------------------------------------------------------------
    def _tools(self) -> list[_OpenTool]:
        stack = getattr(self._local, "tools", None)
        if stack is None:
            stack = self._local.tools = []
        return stack

    def _waiting_events(self) -> list[GuardEvent]:
        waiting = getattr(self._local, "events", None)
        if waiting is None:
            waiting = self._local.events = []
        return waiting

    def _run(self, run_id: str | None) -> _Run | None:
        if run_id is None:
            return None
        with self._lock:
            return self._runs.get(run_id)

    def _seen(self, run: _Run | None, time_ns: int) -> None:
        if run is not None and time_ns > run.last_ns:
            with self._lock:
                run.last_ns = max(run.last_ns, time_ns)

    def _end_pending(self, run: _Run) -> None:
        with self._lock:
            pending, run.pending = run.pending, []
        for span, end_ns, _ in pending:  # outside the lock: ending a span runs the processors
            span.end(end_time=end_ns)

    # --- the run ------------------------------------------------------------------------
    def run_started(self, run: RunInfo) -> None:
        attrs: dict[str, Any] = {
            c.OPERATION_NAME: "invoke_agent",
            c.PROVIDER_NAME: self.provider_name,
            c.AGENT_NAME: run.agent_name,
            c.CONVERSATION_ID: run.run_id,
            c.REQUEST_MODEL: run.model,
            c.CAPTURE_MODE: self.capture.mode,
        }
        for key, value in (
            (c.AGENT_VERSION, run.agent_version),
            (c.PROMPT_VERSION, run.prompt_version),
            (c.TOOL_SCHEMA_VERSION, run.tool_schema_version),
            (c.TENANT, run.tenant),
        ):
            if value:
                attrs[key] = value
        # The parent is whatever is current: a caller's span, or the tool span of
        # an outer run when this run is a sub-agent.
        root = self.tracer.start_span(
            f"invoke_agent {run.agent_name}", kind=SpanKind.INTERNAL, attributes=attrs, start_time=run.started_ns
        )
        ctx = trace.set_span_in_context(root)
        # Current for the run: tool worker threads copy it, so code inside tools
        # (and its own instrumentation) nests under the run.
        token = otel_context.attach(ctx)
        with self._lock:
            self._runs[run.run_id] = _Run(run, root, ctx, token, run.started_ns)

    def run_finished(self, run: RunInfo, result: AgentResult) -> None:
        with self._lock:
            state = self._runs.pop(run.run_id, None)
        if state is None:
            return
        self._end_pending(state)
        for call_site in {ch.call_site for ch in result.charges}:
            self.capture.forget((run.run_id, call_site))
        root = state.root
        usage = result.usage
        root.set_attributes(
            {
                c.STOP_CAUSE: result.stop_cause,
                c.STEPS: len(result.steps),
                c.TOOL_CALLS: result.tool_call_count,
                c.TOTAL_TOKENS: usage.total_tokens,
                c.COST_USD: float(result.cost_usd),
            }
        )
        if result.detail:
            root.set_attribute(c.STOP_DETAIL, result.detail)
        if result.stop_cause in ERROR_STOPS:
            kind = result.error_type if result.stop_cause == "error" and result.error_type else result.stop_cause
            root.set_attribute(c.ERROR_TYPE, kind)
            root.set_status(Status(StatusCode.ERROR, result.detail[:_STATUS_CHARS] or result.stop_cause))
        if state.token is not None:
            try:
                otel_context.detach(state.token)  # type: ignore[arg-type]
            except Exception:  # a foreign context: nothing to restore
                log.debug("could not detach the run context of %s", run.run_id)
        root.end(end_time=max(state.last_ns + 1_000, run.started_ns + 1_000))

    # --- model calls --------------------------------------------------------------------
    def _open_tool(self, run_id: str | None) -> trace.Span | None:
        """The tool span open on this thread, if it belongs to ``run_id``'s run.

        A sub-agent run inside a tool has its own run id: its calls and events
        belong to its own root, not to the outer run's tool span.
        """
        tools = self._tools()
        if tools and (run_id is None or tools[-1].run_id == run_id):
            return tools[-1].span
        return None

    def _parent(self, run: _Run | None, run_id: str | None) -> otel_context.Context | None:
        tool = self._open_tool(run_id)
        if tool is not None:
            return trace.set_span_in_context(tool)
        if run is not None:
            return run.context
        return None  # the caller's current context

    def model_attempt_started(self, attempt: ModelAttempt) -> None:
        run = self._run(attempt.run_id)
        inside_tool = self._open_tool(attempt.run_id) is not None
        if run is not None and not inside_tool and run.pending:
            self._end_pending(run)  # the guard has judged the last turn's tools
        attrs: dict[str, Any] = {
            c.OPERATION_NAME: "chat",
            c.PROVIDER_NAME: self.provider_name,
            c.REQUEST_MODEL: attempt.model,
            c.CALL_ID: attempt.call_id,
            c.ATTEMPT: attempt.attempt,
            c.CALL_SITE: attempt.call_site,
        }
        if attempt.retry_cause:
            attrs[c.RETRY_CAUSE] = attempt.retry_cause
        if attempt.tenant:
            attrs[c.TENANT] = attempt.tenant
        if attempt.step is not None:
            attrs[c.STEP] = attempt.step
        request = attempt.request
        if request is not None:
            self._request_attributes(attrs, request, (attempt.run_id, attempt.call_site))
        span = self.tracer.start_span(
            f"chat {attempt.model}",
            context=self._parent(run, attempt.run_id),
            kind=SpanKind.CLIENT,
            attributes=attrs,
            start_time=attempt.started_ns,
        )
        waiting = self._waiting_events()
        if waiting:  # the retry that produced this attempt
            for event in waiting:
                span.add_event(event.name, dict(event.attributes), timestamp=event.time_ns)
            waiting.clear()
        with self._lock:
            self._attempts[(attempt.call_id, attempt.attempt)] = (span, attempt.run_id)

    def _request_attributes(self, attrs: dict[str, Any], request: Any, conversation: tuple[str | None, str]) -> None:
        max_tokens = request.get("max_tokens")
        if isinstance(max_tokens, int):
            attrs[c.REQUEST_MAX_TOKENS] = max_tokens
        body = self.capture.request_body(request, conversation)
        if body is not None:
            attrs[c.REQUEST_BODY] = body

    def model_attempt_finished(self, attempt: ModelAttempt, outcome: AttemptOutcome) -> None:
        with self._lock:
            found = self._attempts.pop((attempt.call_id, attempt.attempt), None)
        if found is None:
            return
        span, run_id = found
        if attempt.request is None and outcome.response is not None:
            # An accounted LLM call: the payload is known only from the response.
            extra: dict[str, Any] = {}
            self._request_attributes(extra, outcome.response.request, (attempt.run_id, attempt.call_site))
            span.set_attributes(extra)
        u = outcome.usage
        attrs: dict[str, Any] = {
            # Current GenAI conventions: input INCLUDES cache reads and writes.
            c.INPUT_TOKENS: u.prompt_tokens,
            c.OUTPUT_TOKENS: u.output_tokens,
            c.CACHE_CREATION_INPUT_TOKENS: u.cache_creation_input_tokens,
            c.CACHE_READ_INPUT_TOKENS: u.cache_read_input_tokens,
            c.COST_USD: float(outcome.cost_usd),
        }
        if u.cache_creation_1h_input_tokens:
            # The TTL split, only when a 1-hour write happened: without it every write is a
            # 5-minute one, which is what a span without these attributes means.
            attrs[c.CACHE_CREATION_5M_INPUT_TOKENS] = u.cache_creation_5m_input_tokens
            attrs[c.CACHE_CREATION_1H_INPUT_TOKENS] = u.cache_creation_1h_input_tokens
        if outcome.ok:
            attrs[c.RESPONSE_MODEL] = outcome.response_model or attempt.model
            if outcome.stop_reason:
                attrs[c.FINISH_REASONS] = [outcome.stop_reason]
            if outcome.response is not None and outcome.response.response_id:
                attrs[c.RESPONSE_ID] = outcome.response.response_id
            if outcome.response is not None:
                answer = self.capture.output_messages(
                    outcome.response.assistant_content, outcome.stop_reason or outcome.response.stop_reason
                )
                if answer is not None:
                    attrs[c.OUTPUT_MESSAGES] = answer
            span.set_attributes(attrs)
        else:
            attrs[c.ERROR_TYPE] = outcome.error_type or "error"
            span.set_attributes(attrs)
            span.set_status(Status(StatusCode.ERROR, (outcome.error or outcome.error_type or "")[:_STATUS_CHARS]))
        span.end(end_time=outcome.ended_ns)
        self._seen(self._run(run_id), outcome.ended_ns)

    # --- tools ----------------------------------------------------------------------------
    def tool_started(self, call: ToolStart) -> None:
        run = self._run(call.run_id)
        attrs: dict[str, Any] = {
            c.OPERATION_NAME: "execute_tool",
            c.TOOL_NAME: call.name,
            c.TOOL_CALL_ID: call.tool_use_id,
            c.TOOL_TYPE: "function",
            c.STEP: call.step,
        }
        if call.tenant:
            attrs[c.TENANT] = call.tenant
        arguments = self.capture.tool_arguments(call.input)
        if arguments is not None:
            attrs[c.TOOL_CALL_ARGUMENTS] = arguments
        span = self.tracer.start_span(
            f"execute_tool {call.name}",
            context=run.context if run is not None else None,
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            start_time=call.started_ns,
        )
        token = otel_context.attach(trace.set_span_in_context(span))
        self._tools().append(_OpenTool(span, call.run_id, call.tool_use_id, token))

    def tool_executed(self, execution: ToolExecution) -> None:
        tools = self._tools()
        index = next((i for i in range(len(tools) - 1, -1, -1) if tools[i].tool_use_id == execution.tool_use_id), None)
        if index is None:
            return
        opened = tools.pop(index)
        try:
            otel_context.detach(opened.token)  # type: ignore[arg-type]
        except Exception:
            log.debug("could not detach the context of tool call %s", execution.tool_use_id)
        span = opened.span
        run = self._run(opened.run_id)
        attrs: dict[str, Any] = {c.TOOL_RESULT_LENGTH: len(execution.content)}
        result = self.capture.tool_result(execution.content)
        if result is not None:
            attrs[c.TOOL_CALL_RESULT] = result
        if execution.soft_failure:
            attrs[c.TOOL_SOFT_FAILURE] = True  # status stays UNSET: it ran; the result says why it failed
        if execution.denied:
            attrs[c.TOOL_DENIED] = True
        if execution.offloaded_to:
            attrs[c.TOOL_OFFLOADED_TO] = execution.offloaded_to
        if execution.is_error:
            if execution.denied:
                kind = "authorization_denied"
            elif run is not None and execution.name not in run.info.tool_names:
                kind = "unknown_tool"
            else:
                kind = "tool_error"
            attrs[c.ERROR_TYPE] = kind
            span.set_status(Status(StatusCode.ERROR, (result or kind)[:_STATUS_CHARS]))
        span.set_attributes(attrs)
        if run is None:
            span.end(end_time=execution.ended_ns)
            return
        with self._lock:
            run.pending.append((span, execution.ended_ns, execution.name))
            run.last_ns = max(run.last_ns, execution.ended_ns)

    # --- guard decisions ----------------------------------------------------------------
    def guard_event(self, event: GuardEvent) -> None:
        if event.name == c.EVENT_RETRY:
            # Emitted before the wait; the attempt it produces starts on this thread next.
            self._waiting_events().append(event)
            return
        run = self._run(event.run_id)
        target = self._open_tool(event.run_id)  # during a tool call: offload, authorization
        if target is None and run is not None:
            tool = event.attributes.get(c.EVENT_KEY_TOOL)
            if event.name == c.EVENT_LOOP_TRIP and tool:
                with self._lock:
                    target = next((s for s, _, name in reversed(run.pending) if name == tool), None)
            target = target or run.root
        elif target is None:
            current = trace.get_current_span()
            target = current if current.is_recording() else None
        if target is None:
            log.debug("guard event %s outside any run or span: not recorded", event.name)
            return
        target.add_event(event.name, dict(event.attributes), timestamp=event.time_ns)
        self._seen(run, event.time_ns)
