"""Trace and span ids fixed by (seed, run index): a simulated workload played twice is the same spans.

The ledger stores a span once (its trace and span id are its key) and charges a
billed call once, so replaying a seed adds nothing: ``turnledger simulate
--seed 7`` run twice is charged once. :class:`RunIds` is the tracer provider's
id generator; :func:`run_ids` makes the ids of the spans started inside it a
function of the run (the same seed in another run of ``simulate`` included).

A run's own thread starts its spans in a fixed order, but tool calls of one
turn run on worker threads at once. So each tool call draws from its own
stream, named by its tool-use id (which the scripted model numbers
deterministically): :class:`ToolBranches` is the observer that switches
streams as a tool starts, before the telemetry observer opens its span.
Outside :func:`run_ids`, ids are random, as the SDK's are.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

from collector.harness.observer import Observer, ToolStart
from collector.harness.result import ToolExecution

__all__ = ["RunIds", "ToolBranches", "run_ids"]


@dataclass
class _Stream:
    key: str
    parent: _Stream | None = None
    drawn: int = field(default=0)

    def draw(self, kind: str, bits: int) -> int:
        self.drawn += 1
        digest = hashlib.blake2b(f"{self.key}:{kind}:{self.drawn}".encode(), digest_size=bits // 8).digest()
        return int.from_bytes(digest, "big") or 1  # 0 is the invalid id


_STREAM: ContextVar[_Stream | None] = ContextVar("simulated_run_ids", default=None)


@contextmanager
def run_ids(seed: int, index: int) -> Iterator[None]:
    """Spans started inside take their ids from run ``index`` of workload ``seed``."""
    token = _STREAM.set(_Stream(f"turnledger-simulate:{seed}:{index}"))
    try:
        yield
    finally:
        _STREAM.reset(token)


class RunIds(IdGenerator):
    """Ids from the current run's stream (:func:`run_ids`); random outside a run."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()

    def generate_trace_id(self) -> int:
        stream = _STREAM.get()
        return stream.draw("trace", 128) if stream else self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        stream = _STREAM.get()
        return stream.draw("span", 64) if stream else self._random.generate_span_id()


class ToolBranches(Observer):
    """Gives each tool call its own id stream (on the tool's thread, in the tool's context).

    Put it before the telemetry observer in a ``FanOut``: the tool's span and
    everything started inside the tool then draw from the branch, whatever
    order the worker threads run in.
    """

    def tool_started(self, call: ToolStart) -> None:
        stream = _STREAM.get()
        if stream is not None:
            _STREAM.set(_Stream(f"{stream.key}/{call.tool_use_id}", parent=stream))

    def tool_executed(self, execution: ToolExecution) -> None:
        # A lone tool call runs on the run's own thread: the run's stream resumes after it.
        stream = _STREAM.get()
        if stream is not None and stream.parent is not None and stream.key.endswith(f"/{execution.tool_use_id}"):
            _STREAM.set(stream.parent)
