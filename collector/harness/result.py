"""What a run returns: the stop cause, every step, usage and cost, the transcript.

Every run ends with exactly one named stop cause. Only ``completed`` is a
success; every other cause is a partial result that says what is missing,
never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from collector.harness.llm import Usage

__all__ = ["STOP_CAUSES", "AgentResult", "Charge", "Step", "StopCause", "ToolExecution"]

StopCause = Literal[
    "completed",  # the model finished and the goal check (if any) agreed
    "max_steps",  # the step cap (model calls, or the guard's tool-call cap)
    "budget_exceeded",  # token or dollar hard limit
    "loop_detected",  # a loop survived its nudge
    "max_tokens",  # a reply was cut off; its tool calls were never run
    "refusal",  # the model declined
    "handoff",  # the model escalated to a person
    "error",  # a model call failed for good (non-retryable, or retries spent)
]
STOP_CAUSES: tuple[str, ...] = StopCause.__args__  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class ToolExecution:
    """One requested tool call and what the model was told about it."""

    tool_use_id: str
    name: str
    input: dict[str, Any]
    content: str  # exactly what went back in the tool_result
    is_error: bool
    soft_failure: bool = False  # it ran, and said "nothing found"
    denied: bool = False  # stopped by the authorization gate, never executed
    offloaded_to: str | None = None  # artifact path when the output was offloaded
    nudged: bool = False  # the loop guard replaced the output with a nudge
    step: int = 0
    started_ns: int = 0
    ended_ns: int = 0


@dataclass(frozen=True, slots=True)
class Charge:
    """One model-call attempt as the run's budget saw it (retries included)."""

    call_id: str
    attempt: int
    call_site: str
    model: str
    usage: Usage
    cost_usd: Decimal
    retry_cause: str | None = None
    error_type: str | None = None


@dataclass
class Step:
    """One model call of the loop and the tools it triggered."""

    index: int
    call_id: str
    text: str
    stop_reason: str
    usage: Usage
    cost_usd: Decimal
    attempts: int
    tool_executions: list[ToolExecution] = field(default_factory=list)
    note: str = ""  # harness note sent to the model after this step (budget, goal feedback)


@dataclass
class AgentResult:
    run_id: str  # also the run's gen_ai.conversation.id
    final_text: str
    stop_cause: StopCause
    detail: str  # why it stopped, for a person
    steps: list[Step]
    charges: list[Charge]  # every attempt in the run, the loop's and accounted call sites'
    transcript: list[dict[str, Any]] = field(repr=False)
    missing: str = ""  # for a partial result: what the caller did not get
    error_type: str | None = None
    trace_id: str | None = None  # the run's root span's (32 hex digits); None without telemetry

    @property
    def ok(self) -> bool:
        return self.stop_cause == "completed"

    @property
    def partial(self) -> bool:
        return not self.ok

    @property
    def usage(self) -> Usage:
        return sum((c.usage for c in self.charges), Usage())

    @property
    def cost_usd(self) -> Decimal:
        return sum((c.cost_usd for c in self.charges), Decimal(0))

    @property
    def tool_call_count(self) -> int:
        return sum(len(s.tool_executions) for s in self.steps)

    def by_label(self) -> dict[str, Decimal]:
        """Spend per call site; sums to ``cost_usd``."""
        out: dict[str, Decimal] = {}
        for c in self.charges:
            out[c.call_site] = out.get(c.call_site, Decimal(0)) + c.cost_usd
        return out

    def by_model(self) -> dict[str, Decimal]:
        """Spend per model; sums to ``cost_usd``."""
        out: dict[str, Decimal] = {}
        for c in self.charges:
            out[c.model] = out.get(c.model, Decimal(0)) + c.cost_usd
        return out

    def report(self) -> dict[str, Any]:
        """A plain summary: what happened, what it cost, what is missing."""
        return {
            "run_id": self.run_id,
            "trace_id": self.trace_id,
            "ok": self.ok,
            "stop_cause": self.stop_cause,
            "detail": self.detail,
            "missing": self.missing,
            "steps": len(self.steps),
            "tool_calls": self.tool_call_count,
            "model_calls": len(self.charges),
            "tokens": self.usage.total_tokens,
            "cost_usd": str(self.cost_usd),
            "final_text": self.final_text,
        }
