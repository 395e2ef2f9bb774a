"""Team-mode helpers: real `turnledger serve` processes on one lake, and the OTLP bodies they are sent.

The bodies are what the official exporters send: the sample files as OTLP/JSON, and a seeded
simulate's spans encoded by the OpenTelemetry SDK's own OTLP protobuf encoder (the one the
OTLP/HTTP exporter uses), with the simulated runs ending at a fixed time so every run of a test
(and the file it is compared with) holds the same data.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from collector.cli import main
from collector.otlp import decode_json, decode_protobuf
from tests.conftest import SAMPLES
from tests.server.conftest import free_port, post_otlp, start_cli, wait_healthy

JSON, PROTOBUF = "application/json", "application/x-protobuf"
# 2026-11-30 12:00 UTC: the simulated runs end here, whatever the day the tests run.
SIMULATE_END_NS = 1_796_040_000 * 10**9


@dataclass(frozen=True)
class Body:
    content_type: str
    data: bytes

    def span_keys(self) -> set[tuple[str, str]]:
        decode = decode_json if self.content_type == JSON else decode_protobuf
        return {(s.trace_id, s.span_id) for s in decode(self.data)}


def sample_bodies() -> list[Body]:
    return [Body(JSON, p.read_bytes()) for p in sorted(SAMPLES.glob("*.json"))]


@cache
def simulate_bodies(runs: int = 200, seed: int = 7, per_body: int = 64) -> tuple[Body, ...]:
    """A seeded simulate's spans as OTLP protobuf bodies of ``per_body`` spans (as the exporter batches them)."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from collector.demo.run_ids import RunIds
    from collector.demo.simulate import simulate
    from collector.harness.telemetry import OTelObserver, build_resource
    from collector.harness.telemetry.setup import tracer_provider

    memory = InMemorySpanExporter()
    provider = tracer_provider(
        [memory], resource=build_resource("turnledger-simulate", environment="simulation"), batch=False,
        id_generator=RunIds(),
    )  # fmt: skip
    simulate(runs, seed=seed, observer=OTelObserver(provider, capture="redacted"), end_ns=SIMULATE_END_NS)
    provider.shutdown()
    spans = memory.get_finished_spans()
    return tuple(
        Body(PROTOBUF, encode_spans(spans[i : i + per_body]).SerializeToString())
        for i in range(0, len(spans), per_body)
    )


@dataclass(eq=False)
class Collector:
    """A `turnledger serve` process on a lake."""

    proc: subprocess.Popen[str]
    url: str

    def post(self, body: Body) -> int:
        return post_otlp(self.url, body.data, body.content_type).status

    def stop(self) -> str:
        """SIGTERM (commits what is queued), then its output."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=120)  # a hang guard
        return out

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)  # the collector and its decode workers, at once
        self.proc.communicate(timeout=60)


def start_collector(target: str, data: Path | str, *args: str) -> Collector:
    port = free_port()
    proc = start_cli(
        "serve", "--db", target, "--port", str(port), "--no-grpc", "--decode-workers", "1", *args,
        env={"TURNLEDGER_DATA_PATH": str(data)},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, timeout=120)
    except AssertionError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"collector did not start: {proc.communicate(timeout=30)[0]}") from None
    return Collector(proc, url)


@contextlib.contextmanager
def collectors(target: str, data: Path | str, n: int = 2) -> Iterator[list[Collector]]:
    started: list[Collector] = []
    try:
        for _ in range(n):
            started.append(start_collector(target, data))
        yield started
    finally:
        for c in started:
            c.stop()


def post_in_parallel(plan: dict[Collector, list[Body]]) -> dict[Collector, list[int]]:
    """Each collector's bodies posted in order, all collectors at once; the statuses per collector."""
    with ThreadPoolExecutor(len(plan)) as pool:
        futures = {c: pool.submit(lambda c=c: [c.post(b) for b in plan[c]]) for c in plan}
        return {c: f.result(timeout=1200) for c, f in futures.items()}


def report_json(db: str, capsys: pytest.CaptureFixture[str]) -> dict:
    """`turnledger report --json` on a ledger, parsed."""
    capsys.readouterr()
    assert main(["report", "--json", "--db", db]) == 0
    return json.loads(capsys.readouterr().out)
