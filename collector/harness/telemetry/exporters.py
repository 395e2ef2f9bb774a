"""Where the spans go: a DuckDB ledger in-process, a collector over OTLP/HTTP, or memory.

* :class:`LedgerSpanExporter` (embedded mode) writes straight into a ledger file
  through ``ledger.ingest``. SDK spans become ``SpanRecord`` values equal to
  what ``collector.otlp.decode_protobuf`` makes of the OTLP protobuf the wire
  exporter sends (a test holds them equal), read directly from the SDK
  objects: the round trip costs ~10x more and buys nothing but the proof.
* :func:`otlp_exporter` is the standard ``OTLPSpanExporter`` (HTTP/protobuf,
  gzip) aimed at ``turnledger serve``.
* ``InMemorySpanExporter`` (the SDK's) is re-exported for tests;
  :func:`span_records` turns what it collected into ledger records.

No exporter here ever raises into the agent: the SDK's processors log and drop
a failed batch, and :class:`LedgerSpanExporter` reports FAILURE itself.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import duckdb
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from collector.otlp import decode_protobuf
from ledger.errors import TurnledgerError
from ledger.ingest import IngestReport, ingest
from ledger.limits import INT64_MAX, INT64_MIN, MAX_ATTRIBUTE_DEPTH, MAX_ATTRIBUTES, MAX_EVENTS
from ledger.pricing import PriceBook
from ledger.settings import capture_mode, server_url, token
from ledger.spans import SpanEvent, SpanRecord
from ledger.store import open_ledger

__all__ = [
    "DEFAULT_ENDPOINT",
    "InMemorySpanExporter",
    "LedgerSpanExporter",
    "otlp_exporter",
    "span_records",
    "traces_endpoint",
]

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "http://127.0.0.1:4318/v1/traces"
_TRACES_PATH = "/v1/traces"


class _PastLimits(ValueError):
    """An attribute value past ``ledger.limits``: the span is rejected alone, naming it."""


def _value(v: Any, depth: int = 0) -> Any:
    # What an OTLP round trip makes of an attribute value: sequences become
    # lists, mappings dicts, bytes base64 text (as collector.otlp decodes them),
    # with the decoders' limits: an int past int64 is kept as its digits (OTLP's
    # intValue is an int64), nesting past MAX_ATTRIBUTE_DEPTH rejects the span.
    if type(v) is int:
        return v if INT64_MIN <= v <= INT64_MAX else str(v)
    if isinstance(v, (str, bool, float)):
        return v
    if isinstance(v, (tuple, list, Mapping)) and depth >= MAX_ATTRIBUTE_DEPTH:
        raise _PastLimits(f"an attribute value is nested deeper than {MAX_ATTRIBUTE_DEPTH} levels")
    if isinstance(v, (tuple, list)):
        return [_value(x, depth + 1) for x in v]
    if isinstance(v, Mapping):
        return {str(k): _value(x, depth + 1) for k, x in v.items()}
    if isinstance(v, int):  # an int subclass (an IntEnum...): its plain value, within the same bounds
        return _value(int(v), depth)
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    return None


def _attributes(attrs: Mapping[str, Any] | None) -> dict[str, Any]:
    if not attrs:
        return {}
    if len(attrs) > MAX_ATTRIBUTES:
        raise _PastLimits(f"{len(attrs)} attributes, more than {MAX_ATTRIBUTES}")
    return {k: _value(v) for k, v in attrs.items()}


def _record(span: ReadableSpan, resources: dict[int, dict[str, Any]]) -> SpanRecord:
    ctx = span.context
    parent = span.parent
    status = span.status
    resource = resources.get(id(span.resource))
    if resource is None:
        resource = resources[id(span.resource)] = _attributes(span.resource.attributes)
    scope = span.instrumentation_scope
    problem = ""
    try:
        attributes = _attributes(span.attributes)
        if len(span.events) > MAX_EVENTS:
            raise _PastLimits(f"{len(span.events)} events, more than {MAX_EVENTS}")
        events = tuple(SpanEvent(e.name, e.timestamp, _attributes(e.attributes)) for e in span.events)
    except _PastLimits as exc:
        attributes, events, problem = {}, (), f"attributes: {exc}"
    return SpanRecord(
        trace_id=f"{ctx.trace_id:032x}",
        span_id=f"{ctx.span_id:016x}",
        parent_span_id=f"{parent.span_id:016x}" if parent is not None else "",
        name=span.name,
        start_ns=span.start_time or 0,
        end_ns=span.end_time or 0,
        kind=span.kind.name,
        status_code=status.status_code.name,
        status_message=status.description or "",
        attributes=attributes,
        events=events,
        resource=resource,
        scope_name=scope.name if scope is not None else "",
        scope_version=(scope.version or "") if scope is not None else "",
        problem=problem,
    )


def span_records(spans: Sequence[ReadableSpan], *, via_otlp: bool = False) -> list[SpanRecord]:
    """SDK spans as the ledger's records.

    Read straight from the SDK objects by default: the same records an OTLP
    protobuf round trip through ``collector.otlp.decode_protobuf`` gives
    (``via_otlp=True``; tests hold the two equal), about ten times faster.
    """
    if not spans:
        return []
    if via_otlp:
        return decode_protobuf(encode_spans(spans).SerializeToString())
    resources: dict[int, dict[str, Any]] = {}
    return [_record(s, resources) for s in spans]


class LedgerSpanExporter(SpanExporter):
    """Writes spans into a DuckDB ledger (embedded mode: no server process).

    Give a path (opened on the first export, so a file held by a running
    ``turnledger serve`` costs a logged failure, not the agent) or an open
    connection (the caller keeps ownership). ``redact_content`` re-applies
    redaction to captured payloads at ingest; None means "unless
    ``TURNLEDGER_CAPTURE=full``", so a deliberate full capture stays full.
    Totals of what was written accumulate on ``report``.
    """

    def __init__(
        self,
        db: str | Path | None = None,
        *,
        con: duckdb.DuckDBPyConnection | None = None,
        prices: PriceBook | None = None,
        redact_content: bool | None = None,
    ) -> None:
        if db is not None and con is not None:
            raise ValueError("give a ledger path or a connection, not both")
        self.db = db
        self._con = con
        self._owns_con = con is None
        self.prices = prices
        self.redact_content = capture_mode() != "full" if redact_content is None else redact_content
        self.report = IngestReport()
        self.failures = 0
        self._lock = threading.Lock()
        self._closed = False

    def _connection(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            self._con = open_ledger(self.db)
        return self._con

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            records = span_records(spans)
            with self._lock:
                if self._closed:
                    return SpanExportResult.FAILURE
                if self.prices is None:
                    self.prices = PriceBook.default()
                r = ingest(self._connection(), records, self.prices, redact_content=self.redact_content)
                self._add(r)
            if r.rejected:
                log.warning("ledger rejected %d span(s), e.g. %s", len(r.rejected), r.rejected[0])
            return SpanExportResult.SUCCESS
        except TurnledgerError as exc:  # the file cannot be opened (held by a server, a folder...)
            self.failures += 1
            if self.failures == 1 or self.failures % 100 == 0:
                log.error("ledger exporter: %s; %d batch(es) dropped so far", exc, self.failures)
            return SpanExportResult.FAILURE
        except Exception:
            self.failures += 1
            log.exception("writing %d span(s) to the ledger failed; the batch is dropped", len(spans))
            return SpanExportResult.FAILURE

    def _add(self, r: IngestReport) -> None:
        total = self.report
        total.received += r.received
        total.spans_written += r.spans_written
        total.charges_written += r.charges_written
        total.rejected += r.rejected[:100]
        total.unpriced_models |= r.unpriced_models
        total.traces |= r.traces

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True  # nothing is buffered here; each export is one committed transaction

    def shutdown(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            con, self._con = self._con, None
        if con is not None and self._owns_con:
            try:
                con.execute("CHECKPOINT")  # one self-contained file for the next reader
                con.close()
            except duckdb.Error:
                log.exception("closing the ledger failed")


def traces_endpoint(url: str | None = None) -> str:
    """The OTLP/HTTP traces URL for ``url`` (a server base URL or the full
    ``.../v1/traces``); default ``$TURNLEDGER_SERVER`` or 127.0.0.1:4318."""
    url = (url or server_url() or DEFAULT_ENDPOINT).strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"endpoint {url!r} is not an http(s) URL")
    if parts.path.rstrip("/") in ("", "/"):
        return url.rstrip("/") + _TRACES_PATH
    return url


def otlp_exporter(
    endpoint: str | None = None, *, bearer_token: str | None = None, timeout: float = 10.0, gzip: bool = True
) -> OTLPSpanExporter:
    """The standard OTLP/HTTP (protobuf) exporter, aimed at ``turnledger serve``.

    ``bearer_token`` defaults to ``$TURNLEDGER_TOKEN``. ``timeout`` bounds each
    export including the exporter's own retries, so a dead endpoint costs at
    most that long per batch, on the processor's thread, never the agent's.
    """
    secret = bearer_token or token()
    headers = {"Authorization": f"Bearer {secret}"} if secret else None
    return OTLPSpanExporter(
        endpoint=traces_endpoint(endpoint),
        headers=headers,
        timeout=timeout,
        compression=Compression.Gzip if gzip else Compression.NoCompression,
    )
