"""Telemetry for the harness: OpenTelemetry GenAI spans, redacted content, two ways out.

* :class:`OTelObserver` turns the harness's hooks into ``invoke_agent`` /
  ``chat`` / ``execute_tool`` spans with guard decisions as span events.
* :class:`Capture` is the content policy (``TURNLEDGER_CAPTURE``: off, redacted, full).
* :class:`LedgerSpanExporter` writes into a DuckDB ledger in-process;
  :func:`otlp_exporter` sends OTLP/HTTP to ``turnledger serve``;
  ``InMemorySpanExporter`` collects spans for tests.
* :func:`start_telemetry` wires a provider, exporters and the observer in one call.
"""

from __future__ import annotations

from .capture import DEFAULT_MAX_CHARS, Capture, truncate
from .exporters import (
    DEFAULT_ENDPOINT,
    InMemorySpanExporter,
    LedgerSpanExporter,
    otlp_exporter,
    span_records,
    traces_endpoint,
)
from .observer import ERROR_STOPS, SCOPE_NAME, SCOPE_VERSION, OTelObserver
from .setup import SeededIdGenerator, Telemetry, build_resource, start_telemetry, tracer_provider

__all__ = [
    "DEFAULT_ENDPOINT",
    "DEFAULT_MAX_CHARS",
    "ERROR_STOPS",
    "SCOPE_NAME",
    "SCOPE_VERSION",
    "Capture",
    "InMemorySpanExporter",
    "LedgerSpanExporter",
    "OTelObserver",
    "SeededIdGenerator",
    "Telemetry",
    "build_resource",
    "otlp_exporter",
    "span_records",
    "start_telemetry",
    "tracer_provider",
    "traces_endpoint",
    "truncate",
]
