"""Tracer setup: one call from nothing to a ledger file, a resource that says who and where."""

from __future__ import annotations

from pathlib import Path

import pytest

from collector.demo.scenarios import build
from collector.harness import Runtime, run_agent
from collector.harness.telemetry import (
    DEFAULT_ENDPOINT,
    InMemorySpanExporter,
    SeededIdGenerator,
    build_resource,
    start_telemetry,
    tracer_provider,
    traces_endpoint,
)
from ledger import conventions as c
from ledger.store import open_ledger


def test_start_telemetry_writes_an_embedded_ledger_with_the_resource(tmp_path: Path) -> None:
    db = tmp_path / "agent.duckdb"
    memory = InMemorySpanExporter()
    with start_telemetry(db=db, exporters=[memory], service_name="hr-assistant", service_version="2.3.0",
                         environment="staging", capture="redacted") as tel:  # fmt: skip
        b = build("happy")
        run_agent(b.llm, b.task, b.tools, observer=tel.observer, runtime=Runtime.seeded(1), **b.options)
        assert tel.force_flush()
    resource = memory.get_finished_spans()[0].resource.attributes
    assert resource[c.SERVICE_NAME] == "hr-assistant" and resource[c.SERVICE_VERSION] == "2.3.0"
    assert resource[c.DEPLOYMENT_ENVIRONMENT_NAME] == resource[c.DEPLOYMENT_ENVIRONMENT] == "staging"
    assert not Path(f"{db}.wal").exists()  # shutdown checkpointed the file
    with open_ledger(db, read_only=True) as con:
        assert con.execute("SELECT count(*), any_value(service_name) FROM runs").fetchone() == (1, "hr-assistant")
        assert con.execute("SELECT count(*) FROM charges").fetchone() == (2,)


def test_resource_without_detection_is_exactly_what_was_given() -> None:
    attrs = dict(build_resource("svc", "1.0", "sample", {"team": "hr"}, detect=False).attributes)
    assert attrs == {
        c.SERVICE_NAME: "svc", c.SERVICE_VERSION: "1.0", c.DEPLOYMENT_ENVIRONMENT_NAME: "sample",
        c.DEPLOYMENT_ENVIRONMENT: "sample", "team": "hr",
    }  # fmt: skip


def test_seeded_ids_repeat() -> None:
    def ids(seed: int) -> list[str]:
        memory = InMemorySpanExporter()
        provider = tracer_provider([memory], batch=False, id_generator=SeededIdGenerator(seed))
        tracer = provider.get_tracer("t")
        for name in ("a", "b"):
            tracer.start_span(name).end()
        return [f"{s.context.trace_id:032x}/{s.context.span_id:016x}" for s in memory.get_finished_spans()]

    assert ids(4) == ids(4) != ids(5)


def test_traces_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TURNLEDGER_SERVER", raising=False)
    assert traces_endpoint() == DEFAULT_ENDPOINT == "http://127.0.0.1:4318/v1/traces"
    assert traces_endpoint("http://collector:4318") == "http://collector:4318/v1/traces"
    assert traces_endpoint("http://collector:4318/") == "http://collector:4318/v1/traces"
    assert traces_endpoint("https://x.example/otel/v1/traces") == "https://x.example/otel/v1/traces"
    monkeypatch.setenv("TURNLEDGER_SERVER", "http://10.0.0.5:4318")
    assert traces_endpoint() == "http://10.0.0.5:4318/v1/traces"
    with pytest.raises(ValueError, match="'collector:4318'"):
        traces_endpoint("collector:4318")
