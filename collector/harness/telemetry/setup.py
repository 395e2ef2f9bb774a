"""Tracer setup: a resource, a provider with batching exporters, and the observer.

One call wires everything for an agent process::

    with start_telemetry(db="turnledger.duckdb", service_name="hr-assistant") as tel:
        run_agent(llm, task, tools, observer=tel.observer)

``db`` writes the ledger in-process; ``endpoint`` sends OTLP/HTTP to
``turnledger serve`` (both may be given). Nothing here installs a global tracer
provider unless asked (``set_global=True``): tests and simulations build many.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.id_generator import IdGenerator

from ledger import conventions as c

from .capture import Capture
from .exporters import LedgerSpanExporter, otlp_exporter
from .observer import SCOPE_VERSION, OTelObserver

__all__ = ["SeededIdGenerator", "Telemetry", "build_resource", "start_telemetry", "tracer_provider"]

log = logging.getLogger(__name__)

DEFAULT_SERVICE = "turnledger-agent"
DEFAULT_ENVIRONMENT = "local"


def build_resource(
    service_name: str = DEFAULT_SERVICE,
    service_version: str = SCOPE_VERSION,
    environment: str = DEFAULT_ENVIRONMENT,
    attributes: Mapping[str, Any] | None = None,
    *,
    detect: bool = True,
) -> Resource:
    """service.name/version and the deployment environment (under its current
    name and the older one many backends still read). With ``detect`` the SDK
    also merges ``OTEL_RESOURCE_ATTRIBUTES``/``OTEL_SERVICE_NAME`` and adds a
    per-process ``service.instance.id``; without it the resource is exactly this."""
    attrs: dict[str, Any] = {
        c.SERVICE_NAME: service_name,
        c.SERVICE_VERSION: service_version,
        c.DEPLOYMENT_ENVIRONMENT_NAME: environment,
        c.DEPLOYMENT_ENVIRONMENT: environment,
        **(attributes or {}),
    }
    return Resource.create(attrs) if detect else Resource(attrs)


class SeededIdGenerator(IdGenerator):
    """Trace and span ids from a seeded generator: the same program makes the same ids."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def generate_span_id(self) -> int:
        return self._rng.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self._rng.getrandbits(128) or 1


class _Contained(SpanExporter):
    """An exporter whose failures stay inside it. The SDK's processors already
    catch ``export`` errors, but not ``shutdown``/``force_flush`` ones: one
    raising exporter would stop the provider from shutting down the others
    (an embedded ledger left un-checkpointed)."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            return self.inner.export(spans)
        except Exception:
            log.exception("%s failed to export %d span(s)", type(self.inner).__name__, len(spans))
            return SpanExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        try:
            return bool(self.inner.force_flush(timeout_millis))
        except Exception:
            log.exception("%s failed to flush", type(self.inner).__name__)
            return False

    def shutdown(self) -> None:
        try:
            self.inner.shutdown()
        except Exception:
            log.exception("%s failed to shut down", type(self.inner).__name__)


def tracer_provider(
    exporters: Sequence[SpanExporter] = (),
    *,
    resource: Resource | None = None,
    batch: bool = True,
    max_queue_size: int = 8_192,
    max_export_batch_size: int = 1_024,
    schedule_delay_millis: float = 1_000,
    id_generator: IdGenerator | None = None,
) -> TracerProvider:
    """A ``TracerProvider`` exporting to each of ``exporters``.

    ``batch`` (the default, and the only sane choice in production) exports on
    a background thread, off the agent's path; ``batch=False`` exports as each
    span ends (tests, sample generation). A full queue drops spans rather than
    block the agent; call ``force_flush`` to apply back-pressure.
    """
    provider = TracerProvider(resource=resource or build_resource(), id_generator=id_generator)
    for exporter in map(_Contained, exporters):
        if batch:
            processor: Any = BatchSpanProcessor(
                exporter,
                max_queue_size=max_queue_size,
                max_export_batch_size=min(max_export_batch_size, max_queue_size),
                schedule_delay_millis=schedule_delay_millis,
            )
        else:
            processor = SimpleSpanProcessor(exporter)
        provider.add_span_processor(processor)
    return provider


@dataclass
class Telemetry:
    """A provider and the observer that writes into it; pass ``observer`` to ``run_agent``."""

    provider: TracerProvider
    observer: OTelObserver
    exporters: tuple[SpanExporter, ...] = ()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export everything finished so far (blocks; the back-pressure point)."""
        return bool(self.provider.force_flush(timeout_millis))

    def shutdown(self) -> None:
        """Flush and close every exporter (closes an embedded ledger file cleanly)."""
        try:
            self.provider.shutdown()
        except Exception:  # telemetry never takes the host down, not even at exit
            log.exception("telemetry shutdown failed")

    def __enter__(self) -> Telemetry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def start_telemetry(
    *,
    db: str | Path | None = None,
    endpoint: str | None = None,
    exporters: Sequence[SpanExporter] = (),
    capture: Capture | str | None = None,
    service_name: str = DEFAULT_SERVICE,
    service_version: str = SCOPE_VERSION,
    environment: str = DEFAULT_ENVIRONMENT,
    resource_attributes: Mapping[str, Any] | None = None,
    batch: bool = True,
    set_global: bool = False,
) -> Telemetry:
    """Tracing for the harness: exporters for ``db`` (in-process ledger) and/or
    ``endpoint`` (OTLP/HTTP), plus any ``exporters`` given; an observer with the
    capture mode (None: ``TURNLEDGER_CAPTURE``)."""
    chosen: list[SpanExporter] = list(exporters)
    if db is not None:
        chosen.append(LedgerSpanExporter(db))
    if endpoint is not None:
        chosen.append(otlp_exporter(endpoint))
    provider = tracer_provider(
        chosen,
        resource=build_resource(service_name, service_version, environment, resource_attributes),
        batch=batch,
    )
    if set_global:
        trace.set_tracer_provider(provider)
    return Telemetry(provider, OTelObserver(provider, capture=capture), tuple(chosen))
