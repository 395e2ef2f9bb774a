"""Tools: definitions, dispatch with the tenant injected, concurrent execution.

Every failure becomes a result the model can read and act on, never a crash:
an unknown name is answered with the real tool list, bad arguments with the
expected ones, a raised :class:`ToolError` verbatim.
"""

from __future__ import annotations

import contextvars
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = [
    "HANDOFF_TOOL",
    "HANDOFF_TOOL_DEF",
    "TENANT_PARAM",
    "Tool",
    "ToolError",
    "ToolOutcome",
    "ToolResult",
    "index_tools",
    "run_concurrently",
    "run_tool",
    "tool_result_block",
]

T = TypeVar("T")
TENANT_PARAM = "tenant"
HANDOFF_TOOL = "handoff_to_human"
HANDOFF_TOOL_DEF: dict[str, Any] = {
    "name": HANDOFF_TOOL,
    "description": (
        "Hand the task to a person when it is outside your authority (refunds, policy exceptions, "
        "legal questions), when sources conflict, or when searching has not found the answer. "
        "Do not use it for questions the other tools can answer."
    ),
    "input_schema": {
        "type": "object",
        "properties": {"reason": {"type": "string", "description": "Why a person is needed, in one sentence."}},
        "required": ["reason"],
    },
}


class ToolError(Exception):
    """Raise from a tool to send the model an actionable ``is_error`` result.

    The message is shown to the model verbatim: say what was wrong and what a
    valid call looks like ("as_of must be YYYY-MM-DD, e.g. 2026-10-02").
    """


@dataclass(frozen=True, slots=True)
class ToolResult:
    """Return this from a tool to flag a soft failure: it ran and found nothing.

    The result still goes to the model as a normal (non-error) result; the flag
    is for telemetry, which keeps soft failures visible on the span.
    """

    content: Any
    soft_failure: bool = False


@dataclass(frozen=True)
class Tool:
    """A tool the model may call: its Anthropic definition and the function.

    If ``fn`` takes a ``tenant`` parameter the harness fills it at dispatch with
    the run's tenant. The model never sees or supplies it: a tenant in the
    schema would let a prompt injection ask for another customer's data.
    """

    definition: Mapping[str, Any]
    fn: Callable[..., Any]
    _signature: inspect.Signature = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        props = (self.definition.get("input_schema") or {}).get("properties") or {}
        if TENANT_PARAM in props:
            raise ValueError(
                f"tool {self.name!r} declares {TENANT_PARAM!r} in its schema; the harness injects the "
                "tenant at dispatch, so remove it from input_schema"
            )
        object.__setattr__(self, "_signature", inspect.signature(self.fn))

    @property
    def name(self) -> str:
        return str(self.definition["name"])

    @property
    def wants_tenant(self) -> bool:
        return TENANT_PARAM in self._signature.parameters

    def bind(self, args: Mapping[str, Any], tenant: str | None) -> dict[str, Any]:
        """The call's keyword arguments; raises TypeError naming a bad argument."""
        kwargs = dict(args)
        if self.wants_tenant:
            kwargs[TENANT_PARAM] = tenant  # overrides anything the model slipped in
        self._signature.bind(**kwargs)
        return kwargs

    def expected_arguments(self) -> str:
        schema = self.definition.get("input_schema") or {}
        props = sorted((schema.get("properties") or {}).keys())
        required = sorted(schema.get("required") or [])
        return f"arguments {props}, required {required}"


def index_tools(tools: Sequence[Tool]) -> dict[str, Tool]:
    by_name: dict[str, Tool] = {}
    for t in tools:
        if t.name in by_name:
            raise ValueError(f"two tools are named {t.name!r}")
        by_name[t.name] = t
    return by_name


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    content: str
    is_error: bool
    soft_failure: bool = False


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)


def run_tool(
    tool: Tool | None, name: str, args: Mapping[str, Any], tenant: str | None, known: Sequence[str]
) -> ToolOutcome:
    """Run one call, turning every failure into something the model can act on."""
    if tool is None:
        return ToolOutcome(f"Unknown tool {name!r}. Available tools: {sorted(known)}.", True)
    try:
        kwargs = tool.bind(args, tenant)
    except TypeError as e:
        return ToolOutcome(f"Bad arguments for {name}: {e}. Expected {tool.expected_arguments()}.", True)
    try:
        out = tool.fn(**kwargs)
    except ToolError as e:
        return ToolOutcome(str(e), True)
    except Exception as e:
        # Class and message only: a stack trace is noise to the model and may leak internals.
        return ToolOutcome(f"{name} failed ({type(e).__name__}): {e}", True)
    if isinstance(out, ToolResult):
        return ToolOutcome(_as_text(out.content), False, out.soft_failure)
    return ToolOutcome(_as_text(out), False)


def tool_result_block(tool_use_id: str, content: str, is_error: bool) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}
    if is_error:
        block["is_error"] = True
    return block


def run_concurrently(jobs: Sequence[Callable[[], T]], max_workers: int) -> list[T]:
    """Run one turn's jobs at once; results in request order.

    Calls in one assistant turn were requested together, before any result was
    seen, so they cannot depend on each other: wall time becomes the slowest
    call, not the sum. Each job runs in a copy of the caller's context so the
    current run (and telemetry context) follows it onto the worker thread.
    """
    if len(jobs) <= 1:
        return [job() for job in jobs]
    contexts = [contextvars.copy_context() for _ in jobs]
    with ThreadPoolExecutor(max_workers=min(max_workers, len(jobs))) as pool:
        futures = [pool.submit(ctx.run, job) for ctx, job in zip(contexts, jobs, strict=True)]
        return [f.result() for f in futures]
