"""Telemetry never breaks the agent: a raising exporter, a dead endpoint, a ledger that
cannot be opened, an observer hook that raises. The run's result is what it would
have been without telemetry, and healthy exporters next to a broken one still get
every span."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Sequence
from pathlib import Path

import duckdb
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from collector.demo.scenarios import build
from collector.harness import Runtime, run_agent
from collector.harness.telemetry import (
    InMemorySpanExporter,
    LedgerSpanExporter,
    OTelObserver,
    otlp_exporter,
    tracer_provider,
)


class Exploding(SpanExporter):
    def __init__(self) -> None:
        self.calls = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        raise RuntimeError("disk on fire")

    def shutdown(self) -> None:
        raise RuntimeError("still on fire")


def baseline(name: str) -> tuple[str, int, int]:
    b = build(name)
    r = run_agent(b.llm, b.task, b.tools, runtime=Runtime.seeded(1, sleep=lambda s: None), **b.options)
    return r.stop_cause, len(r.charges), r.usage.total_tokens


def run_with(observer: OTelObserver, name: str) -> tuple[str, int, int]:
    b = build(name)
    r = run_agent(
        b.llm, b.task, b.tools, observer=observer, runtime=Runtime.seeded(1, sleep=lambda s: None), **b.options
    )
    return r.stop_cause, len(r.charges), r.usage.total_tokens


@pytest.mark.parametrize("batch", [False, True])
def test_a_raising_exporter_never_breaks_the_run(batch: bool, caplog: pytest.LogCaptureFixture) -> None:
    broken, healthy = Exploding(), InMemorySpanExporter()
    provider = tracer_provider([broken, healthy], batch=batch)
    with caplog.at_level(logging.ERROR):
        assert run_with(OTelObserver(provider), "looping") == baseline("looping")
        provider.force_flush()
    assert broken.calls > 0
    assert len(healthy.get_finished_spans()) == 1 + 5 + 5  # root, 5 chats, 5 tools: nothing lost next door
    assert "failed to export" in caplog.text
    provider.shutdown()  # the exporter's raising shutdown is contained too


def test_a_raising_shutdown_does_not_keep_the_ledger_from_closing(tmp_path: Path) -> None:
    db = tmp_path / "ledger.duckdb"
    provider = tracer_provider([Exploding(), LedgerSpanExporter(db)], batch=False)
    run_with(OTelObserver(provider), "happy")
    provider.shutdown()
    assert not Path(f"{db}.wal").exists()  # checkpointed and closed after the broken exporter's shutdown
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (1,)


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nobody listens


class Recording(SpanExporter):
    """Wraps an exporter and notes the thread of every export call."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner, self.threads = inner, []  # type: list[int]

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.threads.append(threading.get_ident())
        return self.inner.export(spans)

    def shutdown(self) -> None:
        self.inner.shutdown()


def test_a_dead_endpoint_costs_the_agent_nothing() -> None:
    # Exports to a dead endpoint wait for connection timeouts; none of that may run on the agent's
    # thread. Asserted by which thread exported, not by how long the run took.
    exporter = Recording(otlp_exporter(f"http://127.0.0.1:{_dead_port()}", timeout=1.0))
    provider = tracer_provider([exporter], schedule_delay_millis=10)
    assert run_with(OTelObserver(provider), "budget_burner") == baseline("budget_burner")
    assert threading.get_ident() not in exporter.threads  # while the agent ran, exports ran on another thread
    assert provider.force_flush(timeout_millis=5_000) in (True, False)  # (a flush exports on its caller's thread)
    provider.shutdown()
    assert exporter.threads, "the spans were offered to the dead endpoint"


def test_a_ledger_that_cannot_be_opened_fails_its_exports_not_the_run(tmp_path: Path) -> None:
    not_a_file = tmp_path / "a-folder.duckdb"
    not_a_file.mkdir()
    ledger, healthy = LedgerSpanExporter(not_a_file), InMemorySpanExporter()
    provider = tracer_provider([ledger, healthy], batch=False)
    assert run_with(OTelObserver(provider), "happy") == baseline("happy")
    assert ledger.failures > 0 and ledger.report.spans_written == 0
    assert len(healthy.get_finished_spans()) == 5
    provider.shutdown()


def test_an_observer_whose_tracer_raises_never_breaks_the_run(caplog: pytest.LogCaptureFixture) -> None:
    observer = OTelObserver(tracer_provider([InMemorySpanExporter()], batch=False))

    class Boom:
        def start_span(self, *args: object, **kwargs: object) -> None:
            raise RuntimeError("tracer gone")

    observer.tracer = Boom()  # type: ignore[assignment]
    with caplog.at_level(logging.ERROR):
        assert run_with(observer, "recovering") == baseline("recovering")
    assert "observer" in caplog.text and "the run continues" in caplog.text


def test_the_run_is_the_same_with_and_without_telemetry() -> None:
    provider = tracer_provider([InMemorySpanExporter()], batch=False)
    observer = OTelObserver(provider)
    for name in ("happy", "cycle", "stall", "handoff", "max_tokens", "soft_failure"):
        assert run_with(observer, name) == baseline(name), name
