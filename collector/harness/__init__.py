"""The production agent loop and its guards, observable through narrow hooks.

Entry point: :func:`run_agent`. Model calls made elsewhere (inside a tool, a
router) go through :func:`accounted`. Telemetry implements :class:`Observer`.
"""

from __future__ import annotations

from .accounting import Accounted, accounted
from .authz import AllowList, Authorizer, Decision
from .budget import WRAP_UP_NOTE, Budget, BudgetLine
from .config import DEFAULT_PRICES, AgentConfig, Price
from .loop import DEFAULT_SYSTEM, EVENT_BUDGET_CHECK_UNAVAILABLE, FleetGate, GoalCheck, run_agent
from .loop_guard import LoopGuard, Trip, fingerprint
from .observer import (
    AttemptOutcome,
    FanOut,
    GuardEvent,
    InMemoryObserver,
    ModelAttempt,
    Observer,
    RunInfo,
    ToolStart,
    guarded,
)
from .offload import READ_ARTIFACT_TOOL, Offloader
from .result import STOP_CAUSES, AgentResult, Charge, Step, StopCause, ToolExecution
from .retry import (
    Failure,
    RetryPolicy,
    backoff_wait,
    call_with_retry,
    classify_failure,
    jittered,
    parse_retry_after,
)
from .scope import RunScope, Runtime, current_scope, default_observer, set_default_observer
from .tools import HANDOFF_TOOL, HANDOFF_TOOL_DEF, Tool, ToolError, ToolResult

__all__ = [
    "DEFAULT_PRICES",
    "DEFAULT_SYSTEM",
    "EVENT_BUDGET_CHECK_UNAVAILABLE",
    "HANDOFF_TOOL",
    "HANDOFF_TOOL_DEF",
    "READ_ARTIFACT_TOOL",
    "STOP_CAUSES",
    "WRAP_UP_NOTE",
    "Accounted",
    "AgentConfig",
    "AgentResult",
    "AllowList",
    "AttemptOutcome",
    "Authorizer",
    "Budget",
    "BudgetLine",
    "Charge",
    "Decision",
    "Failure",
    "FanOut",
    "FleetGate",
    "GoalCheck",
    "GuardEvent",
    "InMemoryObserver",
    "LoopGuard",
    "ModelAttempt",
    "Observer",
    "Offloader",
    "Price",
    "RetryPolicy",
    "RunInfo",
    "RunScope",
    "Runtime",
    "Step",
    "StopCause",
    "Tool",
    "ToolError",
    "ToolExecution",
    "ToolResult",
    "ToolStart",
    "Trip",
    "accounted",
    "backoff_wait",
    "call_with_retry",
    "classify_failure",
    "current_scope",
    "default_observer",
    "fingerprint",
    "guarded",
    "jittered",
    "parse_retry_after",
    "run_agent",
    "set_default_observer",
]
