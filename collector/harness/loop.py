"""The production agent loop: call, check, act, repeat, until a named stop.

Before each model call (the first included), the fleet budget gate, when one
is given: a run whose tenant/agent/model budget is spent stops with
``budget_exceeded`` before it spends anything more, and a run that starts
against a spent budget is refused before its first call. The gate fails open:
a gate that raises (or a budget server that cannot be reached) never stops a
run; the run records ``turnledger.budget.check_unavailable`` on its root span.

Order of checks after each model reply, and why:

1. ``refusal`` and ``max_tokens`` first: a refusal may carry no text, and a
   truncated reply may hold a half-written tool call that must never run.
2. No tool calls: the goal check (the harness's own idea of "done") either
   accepts, or its feedback goes back to the model and the loop continues.
3. Budget hard stop before spending anything more on this turn.
4. Hand-off: an explicit, logged outcome instead of a confident guess.
5. Tools: unknown names answered with the real list, the allow-list gate
   *before* execution, the tenant injected at dispatch, calls run
   concurrently, big results offloaded.
6. LoopGuard on every executed call: nudge on the first trip, halt on the second.
7. All results in ONE user message; the 80% budget note rides in that same
   message, once (never in the system prompt: that would break the cached prefix).
8. The step cap: a bounded ``for``, never ``while True``.

Every terminal path returns an :class:`AgentResult`; none raises. It carries
the run's ``trace_id`` (its root span's, under ``OTelObserver``) beside its
``run_id`` (the spans' ``gen_ai.conversation.id``): either finds the run in the
ledger (``turnledger context ID``, the run explorer), so a user's report can
arrive with the trace attached.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from collector.harness.llm import LLM, LLMResponse, ToolCall

from . import events
from .authz import AllowList, Authorizer
from .budget import WRAP_UP_NOTE, Budget
from .config import AgentConfig
from .loop_guard import LoopGuard, Trip
from .model_call import CallRecorder, error_type, observed_call
from .observer import Observer, RunInfo, ToolStart, guarded
from .offload import READ_ARTIFACT_TOOL, Offloader
from .result import AgentResult, Step, StopCause, ToolExecution
from .scope import RunScope, Runtime, entered
from .tools import (
    HANDOFF_TOOL,
    HANDOFF_TOOL_DEF,
    Tool,
    ToolOutcome,
    index_tools,
    run_concurrently,
    run_tool,
    tool_result_block,
)

if TYPE_CHECKING:  # the gate's types live with the budgets; imported only when a gate is used
    from ledger.budgets.gate import CallScope, Decision

__all__ = ["DEFAULT_SYSTEM", "EVENT_BUDGET_CHECK_UNAVAILABLE", "FleetGate", "GoalCheck", "run_agent"]

log = logging.getLogger(__name__)

DEFAULT_SYSTEM = "You are a helpful assistant. Use the tools when they help; answer from their results."

GoalCheck = Callable[[str, Sequence[Step]], "str | None"]
"""``goal_check(final_text, steps)``: None when the answer meets the goal, else
feedback telling the model what is still missing (the loop continues with it)."""

# On the root span when a fleet budget check failed and the run went on (fail-open).
EVENT_BUDGET_CHECK_UNAVAILABLE = "turnledger.budget.check_unavailable"


class FleetGate(Protocol):
    """What ``run_agent(gate=...)`` asks before each model call:
    :class:`ledger.budgets.BudgetGate` (over the embedded ledger or a server's API)."""

    def check(self, scope: CallScope) -> Decision: ...


def run_agent(
    llm: LLM,
    task: str,
    tools: Sequence[Tool] = (),
    *,
    system: str = DEFAULT_SYSTEM,
    config: AgentConfig | None = None,
    tenant: str | None = None,
    observer: Observer | None = None,
    authorize: Authorizer | None = None,
    goal_check: GoalCheck | None = None,
    snapshot: Callable[[], Any] | None = None,
    progress: Callable[[], float | None] | None = None,
    offloader: Offloader | None = None,
    runtime: Runtime | None = None,
    run_id: str | None = None,
    gate: FleetGate | None = None,
) -> AgentResult:
    """Run the think, act, observe loop until the model is done or a control trips.

    Args:
        llm: any :class:`~collector.harness.llm.LLM` (``ClaudeLLM``, ``ScriptedLLM``).
        task: the user's request.
        tools: the tools the model may call (``read_artifact`` is added when an
            ``offloader`` is given; the hand-off tool is always offered).
        system: the system prompt; kept byte-identical for the whole run.
        config: limits, thresholds, prices, identity.
        tenant: injected into tools that take a ``tenant`` parameter.
        observer: telemetry hooks; a failing observer never breaks the run.
        authorize: the gate before execution; default allows exactly ``tools``.
        goal_check: optional verifier of a final answer, see :data:`GoalCheck`.
        snapshot: the world after a turn, for the cycle detector (None: off).
        progress: a number that should rise as work advances (None: stall detector off).
        offloader: where large tool results go (None: results stay inline).
        runtime: sleep, clock, randomness and ids (inject for tests/simulation).
        run_id: a fixed run id (default: a new one).
        gate: fleet budgets checked before every model call (None: only this run's
            own limits apply), e.g. ``BudgetGate(HttpSource(server_url))``. A spent
            budget stops the run with ``budget_exceeded`` and the rule in the detail;
            a failing gate lets the run go on and says so on its span.
    """
    cfg = config or AgentConfig()
    rt = runtime or Runtime()
    toolbox = index_tools([*tools, *([offloader.tool()] if offloader else [])])
    obs = guarded(observer)
    scope = RunScope(
        run_id=run_id or rt.new_id(),
        tenant=tenant,
        observer=obs,
        runtime=rt,
        budget=Budget(cfg.max_total_tokens, cfg.max_cost_usd, cfg.budget_warn_ratio),
        price=cfg.cost,
    )
    run = _Run(
        llm=llm,
        task=task,
        system=system,
        cfg=cfg,
        toolbox=toolbox,
        scope=scope,
        authorize=authorize or AllowList(read_only=toolbox),
        goal_check=goal_check,
        snapshot=snapshot,
        progress=progress,
        offloader=offloader,
        gate=gate,
    )
    info = run.info(task)
    obs.run_started(info)
    from .fleet_gate import current_trace_id

    run.trace_id = current_trace_id()  # the root span's, now current (under OTelObserver)
    with entered(scope):
        result = run.loop()
    obs.run_finished(info, result)
    return result


class _Run:
    """The state of one run; each guard is one method."""

    def __init__(
        self,
        *,
        llm: LLM,
        task: str,
        system: str,
        cfg: AgentConfig,
        toolbox: dict[str, Tool],
        scope: RunScope,
        authorize: Authorizer,
        goal_check: GoalCheck | None,
        snapshot: Callable[[], Any] | None,
        progress: Callable[[], float | None] | None,
        offloader: Offloader | None,
        gate: FleetGate | None = None,
    ) -> None:
        self.llm, self.system, self.cfg, self.toolbox = llm, system, cfg, toolbox
        self.gate = gate
        self.trace_id: str | None = None  # set once the observer has opened the run's root span
        self._gate_failure_noted = False
        self.scope, self.authorize, self.goal_check = scope, authorize, goal_check
        self.snapshot, self.progress, self.offloader = snapshot, progress, offloader
        self.tool_defs = [dict(t.definition) for t in toolbox.values()]
        if HANDOFF_TOOL not in toolbox:
            self.tool_defs.append(HANDOFF_TOOL_DEF)
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
        self.steps: list[Step] = []
        self.guard = LoopGuard(cfg.repeat_threshold, cfg.cycle_threshold, cfg.stall_threshold, cfg.max_tool_calls)

    def info(self, task: str) -> RunInfo:
        """The run as its observer is told of it when it starts."""
        cfg, scope = self.cfg, self.scope
        return RunInfo(
            run_id=scope.run_id,
            task=task,
            model=self.llm.model,
            system=self.system,
            tool_names=tuple(t["name"] for t in self.tool_defs),
            tenant=scope.tenant,
            agent_name=cfg.agent_name,
            agent_version=cfg.agent_version,
            prompt_version=cfg.prompt_version,
            tool_schema_version=cfg.tool_schema_version,
            started_ns=scope.runtime.clock_ns(),
        )

    # --- the loop ---------------------------------------------------------------
    def loop(self) -> AgentResult:
        for index in range(self.cfg.max_steps):
            self.scope.step = index
            if stop := self._fleet_budget_stop():
                return stop
            try:
                resp, recorder = self._call_model()
            except Exception as exc:
                kind = error_type(exc)
                return self._finish(
                    "error",
                    f"model call failed ({kind}): {exc}",
                    "No final answer: the model call failed and was not retryable or ran out of retries.",
                    error=kind,
                )
            attempts = [ch for ch in self.scope.charges if ch.call_id == recorder.call_id]
            step = Step(
                index=index,
                call_id=recorder.call_id,
                text=resp.text,
                stop_reason=resp.stop_reason,
                usage=resp.usage,
                cost_usd=attempts[-1].cost_usd,
                attempts=len(attempts),
            )
            self.steps.append(step)
            # Always the full content: thinking blocks must go back unchanged.
            self.messages.append({"role": "assistant", "content": resp.assistant_content})

            if resp.stop_reason == "refusal":
                return self._finish("refusal", "the model declined the request", "No answer: the model refused.")
            if resp.stop_reason == "max_tokens":
                return self._truncated(resp)
            if not resp.tool_calls:
                feedback = self.goal_check(resp.text, self.steps) if self.goal_check else None
                if not feedback:
                    return self._finish("completed", "", "")
                if stop := self._budget_stop():
                    return stop
                step.note = feedback
                self._user_turn([{"type": "text", "text": feedback}], step)
                continue
            if stop := self._budget_stop():
                return stop
            if stop := self._handoff(resp.tool_calls):
                return stop
            executions = self._execute(resp.tool_calls, index)
            executions, stop = self._guard_loops(executions)
            step.tool_executions = executions
            if stop:
                return stop
            # ONE user message answers every tool_use id of the turn.
            self._user_turn([tool_result_block(e.tool_use_id, e.content, e.is_error) for e in executions], step)

        self.scope.emit(events.loop_trip("step_cap", "halt"))
        return self._finish(
            "max_steps",
            f"hit max_steps={self.cfg.max_steps}",
            f"No final answer after {self.cfg.max_steps} model calls; the last reply is the partial result.",
        )

    # --- one model call (all its attempts) -------------------------------------------
    def _call_model(self) -> tuple[LLMResponse, CallRecorder]:
        request = self.llm.build_request(self.system, self.messages, self.tool_defs, self.cfg.max_tokens_per_call)
        recorder = CallRecorder(
            call_site=self.cfg.call_site,
            model=self.llm.model,
            request=request,
            observer=self.scope.observer,
            runtime=self.scope.runtime,
            scope=self.scope,
            price=self.scope.price,
        )
        return observed_call(lambda: self.llm.send(request), recorder, self.cfg.retry), recorder

    # --- guards ------------------------------------------------------------------------
    def _truncated(self, resp: LLMResponse) -> AgentResult:
        pending = ", ".join(c.name for c in resp.tool_calls)
        missing = f"The reply was cut off at max_tokens={self.cfg.max_tokens_per_call}"
        missing += f"; its tool call(s) ({pending}) were not run." if pending else "; the answer is incomplete."
        return self._finish("max_tokens", "response truncated; raise max_tokens or ask for less output", missing)

    def _budget_stop(self) -> AgentResult | None:
        line = self.scope.budget.exceeded()
        if line is None:
            return None
        self.scope.emit(events.budget("stop", line.kind, line.spent, line.limit))
        spent = f"{line.spent:,}" if line.kind == "tokens" else f"${line.spent:.4f}"
        limit = f"{line.limit:,}" if line.kind == "tokens" else f"${line.limit:.4f}"
        pending = [c.name for c in self._last_calls()]
        return self._finish(
            "budget_exceeded",
            f"{spent} {line.kind} >= budget {limit}",
            f"No final answer: the {line.kind} budget ran out after {len(self.steps)} model calls"
            + (f", with tool call(s) {pending} unanswered." if pending else "."),
        )

    def _fleet_budget_stop(self) -> AgentResult | None:
        """Before a model call: is a fleet budget covering this run spent? Fails open."""
        if self.gate is None:
            return None
        scope = self.scope
        try:
            from ledger.budgets.gate import CallScope

            decision = self.gate.check(
                CallScope(
                    tenant=scope.tenant,
                    agent=self.cfg.agent_name,
                    model=self.llm.model,
                    call_site=self.cfg.call_site,
                    trace_id=self.trace_id,
                    run_spent_usd=scope.budget.usd,
                )
            )
            allowed, detail = bool(decision.allowed), str(decision.detail)
        except Exception as exc:  # a gate's failure must never be the run's
            log.warning("fleet budget check failed; the run goes on (fail-open)", exc_info=True)
            self._note_gate_failure(f"budget check failed ({type(exc).__name__}: {exc}); allowed (fail-open)")
            return None
        if allowed:
            if getattr(decision, "unavailable", False):
                self._note_gate_failure(detail)
            return None
        scope.emit(decision.event())  # turnledger.budget.stop: rule, rule_id, spent and limit
        calls = len(self.steps)
        return self._finish(
            "budget_exceeded",
            detail,
            "No final answer: a fleet budget is spent; "
            + (
                "the run was refused before its first model call."
                if not calls
                else f"stopped after {calls} model calls."
            ),
        )

    def _note_gate_failure(self, detail: str) -> None:
        """Once per run: later failures of the same kind add nothing a reader needs."""
        if self._gate_failure_noted:
            return
        self._gate_failure_noted = True
        self.scope.emit((EVENT_BUDGET_CHECK_UNAVAILABLE, {"scope": "fleet", "detail": detail, "allowed": True}))

    def _handoff(self, calls: Sequence[ToolCall]) -> AgentResult | None:
        for call in calls:
            if call.name == HANDOFF_TOOL and HANDOFF_TOOL not in self.toolbox:
                reason = str(call.input.get("reason", "")).strip() or "(no reason given)"
                self.scope.emit(events.handoff(reason, call.name))
                return self._finish("handoff", "escalated to a human", f"Needs a person: {reason}", text=reason)
        return None

    def _guard_loops(self, executions: list[ToolExecution]) -> tuple[list[ToolExecution], AgentResult | None]:
        """LoopGuard over each executed call; a first trip replaces that result with a nudge."""
        state = self.snapshot() if self.snapshot else None
        progress = self.progress() if self.progress else None
        out: list[ToolExecution] = []
        for ex in executions:
            trip = self.guard.check(ex.name, ex.input, state, progress)
            if trip is None:
                out.append(ex)
                continue
            self.scope.emit(events.loop_trip(trip.shape, "halt" if trip.halt else "nudge", trip.tool))
            if trip.halt:
                return [*out, ex], self._loop_halt(trip)
            # The nudge travels as an error result, where the model reads tool output.
            out.append(replace(ex, content=trip.message, is_error=True, nudged=True))
        return out, None

    def _loop_halt(self, trip: Trip) -> AgentResult:
        if trip.shape == "step_cap":
            return self._finish("max_steps", trip.message, f"No final answer: {trip.message}")
        return self._finish(
            "loop_detected",
            f"{trip.shape} loop on {trip.tool} survived its nudge: {trip.message}",
            f"No final answer: the run was stuck ({trip.shape}) calling {trip.tool}.",
        )

    def _user_turn(self, blocks: list[dict[str, Any]], step: Step) -> None:
        """Append the user turn; the one-time 80% budget note joins it as text."""
        line = self.scope.budget.take_warning()
        if line is not None:
            self.scope.emit(events.budget("warn", line.kind, line.spent, line.limit))
            note = WRAP_UP_NOTE.format(percent=int(line.fraction * 100))
            blocks = [*blocks, {"type": "text", "text": note}]
            step.note = f"{step.note}\n{note}".strip()
        self.messages.append({"role": "user", "content": blocks})

    # --- tools ---------------------------------------------------------------------------
    def _execute(self, calls: Sequence[ToolCall], step: int) -> list[ToolExecution]:
        jobs = [lambda c=c: self._execute_one(c, step) for c in calls]
        return run_concurrently(jobs, self.cfg.max_parallel_tools)

    def _execute_one(self, call: ToolCall, step: int) -> ToolExecution:
        rt, scope = self.scope.runtime, self.scope
        started = rt.clock_ns()
        scope.observer.tool_started(
            ToolStart(call.id, call.name, call.input, step, started, scope.run_id, scope.tenant)
        )
        tool = self.toolbox.get(call.name)
        denied, path = False, None
        if tool is None:
            outcome = run_tool(None, call.name, call.input, scope.tenant, [d["name"] for d in self.tool_defs])
        elif not (decision := self.authorize(call.name, call.input, scope.tenant)).allowed:
            denied = True
            scope.emit(events.authorization_denied(call.name, decision.reason, decision.by))
            outcome = ToolOutcome(
                f"Not permitted: {call.name}. {decision.reason}. Do not retry it; "
                f"use {HANDOFF_TOOL} if a person must approve it.",
                True,
            )
        else:
            if decision.gated:
                scope.emit(events.authorization_approved(call.name, decision.reason, decision.by))
            outcome = run_tool(tool, call.name, call.input, scope.tenant, list(self.toolbox))
            outcome, path = self._offload(call.name, outcome)
        execution = ToolExecution(
            tool_use_id=call.id,
            name=call.name,
            input=call.input,
            content=outcome.content,
            is_error=outcome.is_error,
            soft_failure=outcome.soft_failure,
            denied=denied,
            offloaded_to=path,
            step=step,
            started_ns=started,
            ended_ns=rt.clock_ns(),
        )
        scope.observer.tool_executed(execution)
        return execution

    def _offload(self, tool: str, outcome: ToolOutcome) -> tuple[ToolOutcome, str | None]:
        # read_artifact output is never offloaded again: that would loop pointers.
        if self.offloader is None or outcome.is_error or tool == READ_ARTIFACT_TOOL["name"]:
            return outcome, None
        try:
            pointer, path = self.offloader.wrap(tool, outcome.content)
        except OSError:
            log.exception("offloading %s failed; keeping the result inline", tool)
            return outcome, None
        if path is None:
            return outcome, None
        self.scope.emit(events.offload(tool, len(outcome.content), len(pointer), path))
        return replace(outcome, content=pointer), path

    # --- endings -------------------------------------------------------------------------
    def _last_calls(self) -> list[ToolCall]:
        last = self.messages[-1] if self.messages else {}
        if last.get("role") != "assistant":
            return []
        return [
            ToolCall(b["id"], b["name"], b.get("input", {})) for b in last["content"] if b.get("type") == "tool_use"
        ]

    def _finish(
        self, cause: StopCause, detail: str, missing: str, *, text: str | None = None, error: str | None = None
    ) -> AgentResult:
        final = text if text is not None else (self.steps[-1].text if self.steps else "")
        return AgentResult(
            run_id=self.scope.run_id,
            trace_id=self.trace_id,
            final_text=final,
            stop_cause=cause,
            detail=detail,
            steps=self.steps,
            charges=list(self.scope.charges),
            transcript=self.messages,
            missing="" if cause == "completed" else missing,
            error_type=error,
        )
