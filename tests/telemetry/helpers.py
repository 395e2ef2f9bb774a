"""Helpers for the telemetry tests: a traced harness writing a real ledger file."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

from collector.demo.scenarios import build
from collector.harness import AgentResult, Runtime, run_agent
from collector.harness.telemetry import InMemorySpanExporter, LedgerSpanExporter, OTelObserver, build_resource
from ledger import queries as q
from ledger.store import open_ledger


class Sleeps(list):
    """Stands in for time.sleep: records each wait, never waits."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@dataclass
class Traced:
    """A provider exporting synchronously to memory and to a ledger file, and its observer."""

    db: Path
    provider: TracerProvider
    memory: InMemorySpanExporter
    ledger: LedgerSpanExporter
    observer: OTelObserver
    sleeps: Sleeps = field(default_factory=Sleeps)
    closed: bool = False

    def run(self, name: str, *, seed: int = 7, **overrides: Any) -> AgentResult:
        """Run harness scenario ``name``; keyword overrides go to ``build`` (llm options) or ``run_agent``."""
        run_kw = {k: overrides.pop(k) for k in ("tenant", "run_id", "authorize", "goal_check") if k in overrides}
        b = build(name, **overrides)
        return run_agent(
            b.llm,
            b.task,
            b.tools,
            observer=self.observer,
            runtime=Runtime.seeded(seed, sleep=self.sleeps),
            **run_kw,
            **b.options,
        )

    def spans(self) -> tuple[ReadableSpan, ...]:
        return self.memory.get_finished_spans()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.provider.shutdown()  # closes (and checkpoints) the ledger file

    def open(self) -> duckdb.DuckDBPyConnection:
        """The ledger, read-only (close the provider first)."""
        return open_ledger(self.db, read_only=True)


def make_traced(db: Path, capture: str | None = "redacted", **ledger_kw: Any) -> Traced:
    """Spans reach memory as each ends, and the ledger in one batch when the provider shuts down
    (one ingest transaction per span would make every test pay for refreshing the runs table)."""
    memory = InMemorySpanExporter()
    ledger = LedgerSpanExporter(db, **ledger_kw)
    provider = TracerProvider(resource=build_resource("telemetry-tests", detect=False))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.add_span_processor(
        BatchSpanProcessor(ledger, max_queue_size=100_000, max_export_batch_size=100_000, schedule_delay_millis=60_000)
    )
    return Traced(db, provider, memory, ledger, OTelObserver(provider, capture=capture))


def rows(con: duckdb.DuckDBPyConnection, query: q.Query) -> list[dict[str, Any]]:
    return q.run(con, query).to_dict("records")


def by_name(spans: tuple[ReadableSpan, ...] | list[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.name.startswith(prefix)), key=lambda s: (s.start_time or 0, s.name))
