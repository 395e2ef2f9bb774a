"""Append decoded spans to the ledger: spans, charges, guard events, contexts, runs.

One call is one transaction: either everything from the batch lands or nothing
does. Every table is keyed by (trace_id, span_id[, seq]) and written with
INSERT OR IGNORE, so a batch delivered twice (OTLP exporters retry) changes
nothing the second time. Rows go in as Arrow tables, never row by row.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import duckdb
import orjson
import pyarrow as pa

from . import conventions as c
from .content import ContextRows
from .normalize import (
    CONTENT_ATTRIBUTES,
    OPENINFERENCE_MESSAGE,
    OPENINFERENCE_REQUEST,
    captured_payload,
    model_call,
    tenant_of,
)
from .pricing import PriceBook
from .redact import redact_text
from .spans import SpanRecord

__all__ = ["MAX_ATTRIBUTE_CHARS", "IngestReport", "ingest", "refresh_runs"]

# Attribute values longer than this are cut (the original length is noted in
# the value). Captured request payloads are exempt: they go to the content store.
MAX_ATTRIBUTE_CHARS = 16_384
_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_HEX16 = re.compile(r"^[0-9a-f]{16}$")
_USD_TYPE = pa.decimal128(38, 12)
_TS = pa.timestamp("ns")
_OPENINFERENCE_KIND = "openinference.span.kind"


@dataclass
class IngestReport:
    received: int = 0
    spans_written: int = 0
    charges_written: int = 0
    rejected: list[str] = field(default_factory=list)  # "trace/span: reason"
    unpriced_models: set[str] = field(default_factory=set)
    traces: set[str] = field(default_factory=set)

    @property
    def duplicates(self) -> int:
        return self.received - len(self.rejected) - self.spans_written


def _problem(span: SpanRecord) -> str | None:
    if not _HEX32.match(span.trace_id) or span.trace_id == "0" * 32:
        return f"trace_id {span.trace_id!r} is not 32 lowercase hex digits"
    if not _HEX16.match(span.span_id) or span.span_id == "0" * 16:
        return f"span_id {span.span_id!r} is not 16 lowercase hex digits"
    if span.parent_span_id and not _HEX16.match(span.parent_span_id):
        return f"parent_span_id {span.parent_span_id!r} is not 16 lowercase hex digits"
    if not span.name:
        return "span has no name"
    if span.end_ns < span.start_ns or span.start_ns <= 0:
        return f"bad times: start {span.start_ns} end {span.end_ns}"
    return None


# Attributes that carry free text from prompts, tools or replies. Third-party
# producers rarely redact them, so ingest does (the content store is redacted too).
_FREE_TEXT_MARKERS = (
    ".arguments",
    ".result",
    "messages",
    ".prompt",
    ".completion",
    "input.value",
    "output.value",
    ".content",
)


@lru_cache(maxsize=4096)
def _attribute_handling(key: str) -> int:
    """0 keep as is, 1 redact free text, 2 drop (lives in the content store). Cached per key."""
    if key in CONTENT_ATTRIBUTES or OPENINFERENCE_MESSAGE.match(key):
        return 2
    return 1 if any(marker in key for marker in _FREE_TEXT_MARKERS) else 0


def _stored_attributes(span: SpanRecord, redact_text_values: bool) -> dict[str, Any]:
    attrs = span.attributes
    request = OPENINFERENCE_REQUEST if attrs.get(_OPENINFERENCE_KIND) == "LLM" else ()
    out = {}
    for key, value in attrs.items():
        handling = _attribute_handling(key)
        if handling == 2 or key in request:
            continue
        if isinstance(value, str):
            if handling == 1 and redact_text_values:
                value = redact_text(value)
            if len(value) > MAX_ATTRIBUTE_CHARS:
                value = f"{value[:MAX_ATTRIBUTE_CHARS]}…[truncated, {len(value)} chars]"
        out[key] = value
    return out


def _operation(span: SpanRecord) -> str | None:
    op = span.attributes.get(c.OPERATION_NAME)
    if op:
        return str(op)
    kind = span.attributes.get(_OPENINFERENCE_KIND)
    return {"LLM": "chat", "TOOL": "execute_tool", "AGENT": "invoke_agent"}.get(str(kind).upper()) if kind else None


def _dumps(value: Any) -> str:
    # orjson: the JSON columns are the largest per-span cost of ingest.
    return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


_SPAN_COLUMNS = (
    "trace_id", "span_id", "parent_span_id", "name", "kind", "operation", "tenant", "start_time", "end_time",
    "status_code", "status_message", "attributes", "resource", "events", "scope_name", "scope_version", "ingested_at",
)  # fmt: skip
_EVENT_COLUMNS = ("trace_id", "span_id", "seq", "name", "time", "shape", "action", "tool", "cause", "attributes")
_CHARGE_COLUMNS = (
    "trace_id", "span_id", "parent_span_id", "call_id", "start_time", "latency_ms", "tenant", "call_site",
    "provider", "model", "attempt", "retry_cause", "status_code", "error_type", "finish_reason",
    "uncached_input_tokens", "cache_write_tokens", "cache_read_tokens", "output_tokens", "reasoning_tokens",
    "usd_input", "usd_output", "usd_cache_write", "usd_cache_read", "unpriced", "price_source", "price_version",
    "token_convention",
)  # fmt: skip


class _Batch:
    """Rows for each table, filled span by span as tuples, turned into Arrow tables."""

    def __init__(self, prices: PriceBook, redact_content: bool) -> None:
        self.prices = prices
        self.redact_content = redact_content
        self.spans: list[tuple[Any, ...]] = []
        self.charges: list[tuple[Any, ...]] = []
        self.events: list[tuple[Any, ...]] = []
        self.contexts = ContextRows(redact_blocks=redact_content)
        self.unpriced: set[str] = set()
        self.now = datetime.now(UTC).replace(tzinfo=None)
        self._resources: dict[int, str] = {}  # one OTLP request shares a resource dict across its spans

    def _resource(self, resource: dict[str, Any]) -> str:
        key = id(resource)
        cached = self._resources.get(key)
        if cached is None:
            cached = self._resources[key] = _dumps(resource)
        return cached

    def add(self, s: SpanRecord) -> None:
        tenant = tenant_of(s)
        events = "[]"
        if s.events:
            events = _dumps([{"name": e.name, "time_ns": e.time_ns, "attributes": e.attributes} for e in s.events])
            for seq, e in enumerate(s.events):
                if e.name in c.GUARD_EVENTS:
                    ea = e.attributes
                    self.events.append((
                        s.trace_id, s.span_id, seq, e.name, e.time_ns, ea.get("shape"), ea.get("action"),
                        ea.get("tool"), ea.get("cause"), _dumps(ea),
                    ))  # fmt: skip
        self.spans.append((
            s.trace_id, s.span_id, s.parent_span_id, s.name, s.kind, _operation(s), tenant, s.start_ns, s.end_ns,
            s.status_code, s.status_message, _dumps(_stored_attributes(s, self.redact_content)),
            self._resource(s.resource), events, s.scope_name, s.scope_version, self.now,
        ))  # fmt: skip
        call = model_call(s)
        if call is None:
            return
        when = datetime.fromtimestamp(s.start_ns / 1e9, UTC)
        priced = self.prices.price(call.provider, call.model, call.tokens, when)
        if priced.unpriced:
            self.unpriced.add(f"{call.provider or '?'}/{call.model or '?'}")
        t = call.tokens
        self.charges.append((
            s.trace_id, s.span_id, s.parent_span_id, call.call_id, s.start_ns, (s.end_ns - s.start_ns) / 1e6, tenant,
            call.call_site, call.provider, call.model, call.attempt, call.retry_cause, s.status_code,
            s.attributes.get(c.ERROR_TYPE), call.finish_reason, t.uncached_input, t.cache_write, t.cache_read,
            t.output, t.reasoning, priced.usd_input, priced.usd_output, priced.usd_cache_write,
            priced.usd_cache_read, priced.unpriced, priced.source, priced.version, call.convention,
        ))  # fmt: skip
        payload = captured_payload(s)
        if payload is not None:
            self.contexts.add(s.trace_id, s.span_id, payload)


_TYPES = {
    "start_time": _TS, "end_time": _TS, "time": _TS, "ingested_at": pa.timestamp("us"),
    "usd_input": _USD_TYPE, "usd_output": _USD_TYPE, "usd_cache_write": _USD_TYPE, "usd_cache_read": _USD_TYPE,
    "seq": pa.int32(), "attempt": pa.int32(),
}  # fmt: skip


def _arrow(names: tuple[str, ...], rows: list[tuple[Any, ...]]) -> pa.Table:
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in names]
    return pa.table({k: pa.array(v, type=_TYPES.get(k)) for k, v in zip(names, columns, strict=True)})


def _insert(con: duckdb.DuckDBPyConnection, table: str, data: pa.Table) -> int:
    if data.num_rows == 0:
        return 0
    con.register("_batch", data)
    try:
        cols = ", ".join(f'"{n}"' for n in data.column_names)
        row = con.execute(f"INSERT OR IGNORE INTO {table} ({cols}) SELECT {cols} FROM _batch").fetchone()
    finally:
        con.unregister("_batch")
    return int(row[0]) if row else 0


def ingest(
    con: duckdb.DuckDBPyConnection,
    spans: Iterable[SpanRecord],
    prices: PriceBook | None = None,
    *,
    redact_content: bool = True,
) -> IngestReport:
    """Append a batch of spans and everything derived from them, atomically.

    Invalid spans are rejected (listed in the report) and the rest still land.
    ``redact_content`` re-applies redaction to captured payloads at the door,
    for producers that did not redact (third-party instrumentations).
    """
    report = IngestReport()
    batch = _Batch(prices or _default_prices(), redact_content)
    for s in spans:
        report.received += 1
        problem = _problem(s)
        if problem:
            report.rejected.append(f"{s.trace_id}/{s.span_id}: {problem}")
            continue
        batch.add(s)
        report.traces.add(s.trace_id)
    report.unpriced_models = batch.unpriced
    if not report.traces:
        return report
    ctx = batch.contexts
    con.execute("BEGIN TRANSACTION")
    try:
        report.spans_written = _insert(con, "spans", _arrow(_SPAN_COLUMNS, batch.spans))
        report.charges_written = _insert(con, "charges", _arrow(_CHARGE_COLUMNS, batch.charges))
        _insert(con, "guard_events", _arrow(_EVENT_COLUMNS, batch.events))
        if ctx.contexts:
            _insert(con, "content_blocks", pa.table({"hash": list(ctx.blocks), "body": list(ctx.blocks.values())}))
            nodes = ctx.nodes
            chain = {
                "trace_id": [t for t, _ in nodes],
                "node": [n for _, n in nodes],
                "prev": [p for p, _ in nodes.values()],
                "block": [b for _, b in nodes.values()],
            }
            _insert(con, "message_chain", pa.table(chain))
            cols = ["trace_id", "span_id", "envelope", "system_block", "tools_block", "messages_node", "payload_bytes"]
            _insert(con, "contexts", pa.table({k: [r[i] for r in ctx.contexts] for i, k in enumerate(cols)}))
        if report.spans_written:
            refresh_runs(con, sorted(report.traces))
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    return report


@lru_cache(maxsize=1)
def _default_prices() -> PriceBook:
    """The shipped price book, built once per process (loading genai-prices is not free)."""
    return PriceBook.default()


def _attr(alias: str, key: str) -> str:
    return f"json_extract_string({alias}.attributes, '$.\"{key}\"')"


_REFRESH_RUNS = f"""
INSERT OR REPLACE INTO runs
WITH t AS (SELECT DISTINCT trace_id FROM _touched),
root AS (
    SELECT s.* FROM spans s JOIN t USING (trace_id) WHERE s.parent_span_id = ''
    QUALIFY row_number() OVER (PARTITION BY s.trace_id ORDER BY s.start_time) = 1
),
sp AS (
    SELECT s.trace_id, min(s.start_time) AS started_at, max(s.end_time) AS ended_at,
           any_value(s.tenant) FILTER (WHERE s.tenant IS NOT NULL) AS tenant,
           count(*) FILTER (WHERE s.operation = 'execute_tool') AS tool_calls,
           count(*) FILTER (WHERE s.operation = 'execute_tool' AND (s.status_code = 'ERROR'
               OR {_attr("s", c.TOOL_SOFT_FAILURE)} = 'true')) AS soft_failures,
           any_value(json_extract_string(s.resource, '$."service.name"')) AS service_name
    FROM spans s JOIN t USING (trace_id) GROUP BY s.trace_id
),
ch AS (
    SELECT c.trace_id, count(*) AS model_calls,
           count(DISTINCT c.call_id) FILTER (WHERE c.call_site = 'agent') AS turns,
           count(*) FILTER (WHERE c.attempt > 1) AS retry_attempts,
           count(*) FILTER (WHERE c.unpriced) AS unpriced_calls,
           sum(c.uncached_input_tokens) AS uncached_input_tokens, sum(c.cache_write_tokens) AS cache_write_tokens,
           sum(c.cache_read_tokens) AS cache_read_tokens, sum(c.output_tokens) AS output_tokens,
           sum(c.usd_input) AS usd_input, sum(c.usd_output) AS usd_output,
           sum(c.usd_cache_write) AS usd_cache_write, sum(c.usd_cache_read) AS usd_cache_read,
           string_agg(DISTINCT c.model, ',' ORDER BY c.model) AS models
    FROM charges c JOIN t USING (trace_id) GROUP BY c.trace_id
),
ge AS (
    SELECT g.trace_id, count(*) FILTER (WHERE g.name = '{c.EVENT_LOOP_TRIP}') AS loop_trips
    FROM guard_events g JOIN t USING (trace_id) GROUP BY g.trace_id
)
SELECT
    t.trace_id, root.span_id, root.name, sp.service_name,
    coalesce({_attr("root", c.AGENT_NAME)}, root.name, sp.service_name),
    coalesce({_attr("root", c.AGENT_VERSION)}, json_extract_string(root.resource, '$."service.version"')),
    {_attr("root", c.PROMPT_VERSION)}, {_attr("root", c.TOOL_SCHEMA_VERSION)},
    coalesce(root.tenant, sp.tenant), {_attr("root", c.CONVERSATION_ID)},
    sp.started_at, sp.ended_at, root.status_code, {_attr("root", c.ERROR_TYPE)},
    CASE WHEN {_attr("root", c.STOP_CAUSE)} IS NOT NULL THEN {_attr("root", c.STOP_CAUSE)}
         WHEN root.status_code = 'ERROR' THEN 'error'
         WHEN root.span_id IS NOT NULL THEN 'completed' END,
    {_attr("root", c.STOP_DETAIL)},
    coalesce(ch.model_calls, 0), coalesce(ch.turns, 0), sp.tool_calls, sp.soft_failures,
    coalesce(ge.loop_trips, 0), coalesce(ch.retry_attempts, 0), coalesce(ch.unpriced_calls, 0),
    coalesce(ch.uncached_input_tokens, 0), coalesce(ch.cache_write_tokens, 0),
    coalesce(ch.cache_read_tokens, 0), coalesce(ch.output_tokens, 0),
    coalesce(ch.usd_input, 0), coalesce(ch.usd_output, 0), coalesce(ch.usd_cache_write, 0), coalesce(ch.usd_cache_read, 0),
    coalesce(ch.usd_input + ch.usd_output + ch.usd_cache_write + ch.usd_cache_read, 0),
    ch.models
FROM t JOIN sp USING (trace_id)
LEFT JOIN root USING (trace_id) LEFT JOIN ch USING (trace_id) LEFT JOIN ge USING (trace_id)
"""


def refresh_runs(con: duckdb.DuckDBPyConnection, trace_ids: list[str]) -> None:
    """Rebuild the derived ``runs`` rows of these traces from spans and charges."""
    con.register("_touched", pa.table({"trace_id": trace_ids}))
    try:
        con.execute(_REFRESH_RUNS)
    finally:
        con.unregister("_touched")
