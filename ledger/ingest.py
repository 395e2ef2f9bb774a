"""Append decoded spans to the ledger: spans, charges, guard events, contexts, runs.

Two steps, so a server can overlap them: ``prepare`` turns spans into Arrow
rows for every table (pure Python work, no connection), and ``write`` inserts
any number of prepared batches in one transaction (DuckDB work, which runs
outside the GIL). ``ingest`` is both in one call.

Either everything from one ``write`` lands or nothing does. Every table is
keyed by (trace_id, span_id[, seq]) (content by hash), so a batch delivered
twice (OTLP exporters retry) changes nothing the second time: a plain INSERT
is tried first, and a key conflict replays the transaction with INSERT OR
IGNORE (which costs about 10 µs more per span, so only redeliveries pay it).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Mapping, Sequence
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

__all__ = [
    "MAX_ATTRIBUTE_CHARS",
    "IngestReport",
    "PreparedBatch",
    "ingest",
    "prepare",
    "refresh_pending_runs",
    "refresh_runs",
    "write",
]

# Attribute values longer than this are cut (the original length is noted in
# the value). Captured request payloads are exempt: they go to the content store.
MAX_ATTRIBUTE_CHARS = 16_384
_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_HEX16 = re.compile(r"^[0-9a-f]{16}$")
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
    if span.problem:
        return span.problem
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


# --- which attributes are stored, redacted or moved to the content store ---------------------
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


@dataclass(frozen=True, slots=True)
class _AttributePlan:
    """What ingest does with one set of attribute keys."""

    moved: tuple[str, ...]  # captured request content: it lives in the content store instead
    free_text: tuple[str, ...]  # redacted before they are stored
    may_capture: bool  # a captured payload can be rebuilt from these keys


@lru_cache(maxsize=4096)
def _attribute_plan(keys: tuple[str, ...], llm_span: bool) -> _AttributePlan:
    """Decided once per key set: the spans of one instrumentation share a handful of them.

    ``llm_span``: an OpenInference LLM span, whose ``input.value`` IS the request.
    """
    moved, free_text = [], []
    for key in keys:
        if key in CONTENT_ATTRIBUTES or OPENINFERENCE_MESSAGE.match(key) or (llm_span and key in OPENINFERENCE_REQUEST):
            moved.append(key)
        elif any(marker in key for marker in _FREE_TEXT_MARKERS):
            free_text.append(key)
    # input.value can hold the request on a GenAI "chat" span too (captured_payload reads it there)
    may_capture = bool(moved) or "input.value" in keys
    return _AttributePlan(tuple(moved), tuple(free_text), may_capture)


def _truncated(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_ATTRIBUTE_CHARS:
        return f"{value[:MAX_ATTRIBUTE_CHARS]}…[truncated, {len(value)} chars]"
    return value


def _stored_attributes(attrs: Mapping[str, Any], plan: _AttributePlan, redact_free_text: bool) -> str:
    """The span's attributes as stored (JSON): content moved out, free text redacted, long values cut."""
    if plan.moved or (redact_free_text and plan.free_text):
        attrs = dict(attrs)  # a copy: the record itself stays as it was received
        for key in plan.moved:
            del attrs[key]
        if redact_free_text:
            for key in plan.free_text:
                value = attrs[key]
                if isinstance(value, str):
                    attrs[key] = redact_text(value)
    text = _dumps(attrs)
    # A value longer than the limit makes the whole JSON longer than it, so the
    # common case costs one len() instead of a walk over every value.
    if len(text) > MAX_ATTRIBUTE_CHARS:
        text = _dumps({key: _truncated(value) for key, value in attrs.items()})
    return text


def _operation(span: SpanRecord) -> str | None:
    op = span.attributes.get(c.OPERATION_NAME)
    if op:
        return str(op)
    kind = span.attributes.get(_OPENINFERENCE_KIND)
    return {"LLM": "chat", "TOOL": "execute_tool", "AGENT": "invoke_agent"}.get(str(kind).upper()) if kind else None


def _dumps(value: Any) -> str:
    # orjson: the JSON columns are the largest per-span cost of ingest.
    return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


# --- the tables' Arrow schemas (explicit, so batches built apart concatenate) ----------------
_STR, _TS, _INT = pa.string(), pa.timestamp("ns"), pa.int64()
_USD = pa.decimal128(38, 12)
_SCHEMAS = {
    "spans": pa.schema([
        ("trace_id", _STR), ("span_id", _STR), ("parent_span_id", _STR), ("name", _STR), ("kind", _STR),
        ("operation", _STR), ("tenant", _STR), ("start_time", _TS), ("end_time", _TS), ("status_code", _STR),
        ("status_message", _STR), ("attributes", _STR), ("resource", _STR), ("events", _STR), ("scope_name", _STR),
        ("scope_version", _STR), ("ingested_at", pa.timestamp("us")),
    ]),
    "charges": pa.schema([
        ("trace_id", _STR), ("span_id", _STR), ("parent_span_id", _STR), ("call_id", _STR), ("start_time", _TS),
        ("latency_ms", pa.float64()), ("tenant", _STR), ("call_site", _STR), ("provider", _STR), ("model", _STR),
        ("attempt", pa.int32()), ("retry_cause", _STR), ("status_code", _STR), ("error_type", _STR),
        ("finish_reason", _STR), ("uncached_input_tokens", _INT), ("cache_write_tokens", _INT),
        ("cache_read_tokens", _INT), ("output_tokens", _INT), ("reasoning_tokens", _INT), ("usd_input", _USD),
        ("usd_output", _USD), ("usd_cache_write", _USD), ("usd_cache_read", _USD), ("unpriced", pa.bool_()),
        ("price_source", _STR), ("price_version", _STR), ("token_convention", _STR),
    ]),
    "guard_events": pa.schema([
        ("trace_id", _STR), ("span_id", _STR), ("seq", pa.int32()), ("name", _STR), ("time", _TS), ("shape", _STR),
        ("action", _STR), ("tool", _STR), ("cause", _STR), ("attributes", _STR),
    ]),
    "content_blocks": pa.schema([("hash", _STR), ("body", _STR)]),
    "message_chain": pa.schema([("trace_id", _STR), ("node", _STR), ("prev", _STR), ("block", _STR)]),
    "contexts": pa.schema([
        ("trace_id", _STR), ("span_id", _STR), ("envelope", _STR), ("system_block", _STR), ("tools_block", _STR),
        ("messages_node", _STR), ("payload_bytes", _INT),
    ]),
}  # fmt: skip


Rows = list[tuple[Any, ...]]


def _table(name: str, rows: Rows) -> pa.Table:
    schema = _SCHEMAS[name]
    columns = zip(*rows, strict=True) if rows else ([] for _ in schema)
    return pa.table([pa.array(col, type=f.type) for col, f in zip(columns, schema, strict=True)], schema=schema)


@dataclass
class PreparedBatch:
    """Spans turned into rows for every table, ready for ``write``; built without a connection.

    The rows stay Python tuples until ``to_arrow`` (or ``write``) converts them:
    converting has a fixed cost per column, which many small requests written
    together pay once. ``to_arrow`` is for shipping a batch between processes.
    """

    received: int
    rejected: list[str]  # "trace/span: reason", in the order the spans came
    first_starts: dict[str, int]  # trace id -> earliest span start (ns) in this batch
    unpriced_models: set[str]
    rows: dict[str, Rows]
    tables: dict[str, pa.Table] = field(default_factory=dict)

    def to_arrow(self) -> PreparedBatch:
        self.tables.update({name: _table(name, rows) for name, rows in self.rows.items() if rows})
        self.rows = {}
        return self

    # Pickled (from a decoder process to the writer) as one Arrow IPC stream per
    # table: a third of the cost of pickling the tables column by column.
    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "tables": {name: _ipc_bytes(t) for name, t in self.tables.items()}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        tables = {name: pa.ipc.open_stream(data).read_all() for name, data in state["tables"].items()}
        self.__dict__.update(state, tables=tables)


def _ipc_bytes(table: pa.Table) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as stream:
        stream.write_table(table)
    return sink.getvalue()


class _RowBuilder:
    """Rows for each table, filled span by span as tuples (the cheapest Python row)."""

    def __init__(self, prices: PriceBook, redact_content: bool) -> None:
        self.prices = prices
        self.redact_content = redact_content
        self.spans: Rows = []
        self.charges: Rows = []
        self.events: Rows = []
        self.contexts = ContextRows(redact_blocks=redact_content)
        self.unpriced: set[str] = set()
        self.now_us = int(datetime.now(UTC).timestamp() * 1e6)
        self._resources: dict[int, str] = {}  # one OTLP request shares a resource dict across its spans

    def _resource(self, resource: dict[str, Any]) -> str:
        key = id(resource)
        cached = self._resources.get(key)
        if cached is None:
            cached = self._resources[key] = _dumps(resource)
        return cached

    def add(self, s: SpanRecord) -> None:
        attrs = s.attributes
        plan = _attribute_plan(tuple(attrs), attrs.get(_OPENINFERENCE_KIND) == "LLM")
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
            s.status_code, s.status_message, _stored_attributes(attrs, plan, self.redact_content),
            self._resource(s.resource), events, s.scope_name, s.scope_version, self.now_us,
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
            attrs.get(c.ERROR_TYPE), call.finish_reason, t.uncached_input, t.cache_write, t.cache_read,
            t.output, t.reasoning, priced.usd_input, priced.usd_output, priced.usd_cache_write,
            priced.usd_cache_read, priced.unpriced, priced.source, priced.version, call.convention,
        ))  # fmt: skip
        if plan.may_capture or s.events:
            payload = captured_payload(s)
            if payload is not None:
                self.contexts.add(s.trace_id, s.span_id, payload)

    def by_table(self) -> dict[str, Rows]:
        ctx = self.contexts
        return {
            "spans": self.spans,
            "charges": self.charges,
            "guard_events": self.events,
            "content_blocks": list(ctx.blocks.items()),
            "message_chain": [(t, n, p, b) for (t, n), (p, b) in ctx.nodes.items()],
            "contexts": ctx.contexts,
        }


def prepare(
    spans: Iterable[SpanRecord], prices: PriceBook | None = None, *, redact_content: bool = True
) -> PreparedBatch:
    """Validate spans and build every row they add (normalized, priced, redacted); nothing is stored.

    Invalid spans are listed in ``rejected`` and the rest still go on.
    ``redact_content`` re-applies redaction to captured payloads at the door,
    for producers that did not redact (third-party instrumentations).
    """
    rows = _RowBuilder(prices or _default_prices(), redact_content)
    received = 0
    rejected: list[str] = []
    first_starts: dict[str, int] = {}
    for s in spans:
        received += 1
        problem = _problem(s)
        if problem:
            rejected.append(f"{s.trace_id}/{s.span_id}: {problem}")
            continue
        rows.add(s)
        first = first_starts.get(s.trace_id)
        if first is None or s.start_ns < first:
            first_starts[s.trace_id] = s.start_ns
    return PreparedBatch(received, rejected, first_starts, rows.unpriced, rows.by_table())


# Content blocks and message-chain nodes are shared between spans and batches
# by design; rows of the other tables repeat only when a batch is redelivered.
_SHARED_ROWS = frozenset({"content_blocks", "message_chain"})


def _insert(con: duckdb.DuckDBPyConnection, table: str, data: pa.Table, *, ignore_existing: bool = False) -> int:
    con.register("_batch", data)
    try:
        cols = ", ".join(f'"{n}"' for n in data.column_names)
        verb = "INSERT OR IGNORE" if ignore_existing or table in _SHARED_ROWS else "INSERT"
        row = con.execute(f"{verb} INTO {table} ({cols}) SELECT {cols} FROM _batch").fetchone()
    finally:
        # After a failed INSERT the transaction refuses everything but ROLLBACK;
        # the next batch registered under the same name replaces this one.
        with contextlib.suppress(duckdb.TransactionException):
            con.unregister("_batch")
    return int(row[0]) if row else 0


def write(
    con: duckdb.DuckDBPyConnection, batches: Sequence[PreparedBatch], *, defer_runs: bool = False
) -> IngestReport:
    """Insert prepared batches in ONE transaction (one commit however many there are).

    The touched traces' ``runs`` rows are rebuilt in the same transaction, with
    any left pending before. ``defer_runs`` leaves them pending instead (in
    ``runs_pending``, committed with the spans): a server under load rebuilds
    the runs of many commits at once.
    """
    report = IngestReport(
        received=sum(b.received for b in batches),
        rejected=[r for b in batches for r in b.rejected],
        unpriced_models=set().union(*(b.unpriced_models for b in batches)),
        traces=set().union(*(b.first_starts for b in batches)),
    )
    if not report.traces:
        return report
    tables = {name: _concat(name, batches) for name in _SCHEMAS}  # in schema order: spans first
    firsts = _earliest(b.first_starts for b in batches)
    try:
        written = _write_tables(con, tables, firsts, defer_runs, ignore_existing=False)
    except duckdb.ConstraintException:  # a redelivered span: replay, skipping rows already stored
        written = _write_tables(con, tables, firsts, defer_runs, ignore_existing=True)
    report.spans_written = written.get("spans", 0)
    report.charges_written = written.get("charges", 0)
    return report


def _concat(name: str, batches: Sequence[PreparedBatch]) -> pa.Table | None:
    parts = [t for b in batches if (t := b.tables.get(name)) is not None and t.num_rows]
    rows = [r for b in batches for r in b.rows.get(name, ())]
    if rows:
        parts.append(_table(name, rows))
    if not parts:
        return None
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def _write_tables(
    con: duckdb.DuckDBPyConnection,
    tables: dict[str, pa.Table | None],
    firsts: dict[str, int],
    defer_runs: bool,
    *,
    ignore_existing: bool,
) -> dict[str, int]:
    """One transaction: rows inserted per table, and the touched runs rebuilt or left pending."""
    written: dict[str, int] = {}
    con.execute("BEGIN TRANSACTION")
    try:
        for name, table in tables.items():
            if table is not None:
                written[name] = _insert(con, name, table, ignore_existing=ignore_existing)
        if written.get("spans"):
            if defer_runs:
                _defer(con, firsts)
            else:
                _refresh_with_pending(con, firsts)
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    return written


def _earliest(starts: Iterable[dict[str, int]]) -> dict[str, int]:
    """Trace id -> earliest start, over several such maps."""
    out: dict[str, int] = {}
    for part in starts:
        for trace, start in part.items():
            out[trace] = min(start, out.get(trace, start))
    return out


def _defer(con: duckdb.DuckDBPyConnection, firsts: dict[str, int]) -> None:
    con.register("_deferred", pa.table({"trace_id": list(firsts), "first_start": pa.array(firsts.values(), _TS)}))
    try:
        con.execute(
            "INSERT INTO runs_pending SELECT trace_id, first_start FROM _deferred ON CONFLICT (trace_id) "
            "DO UPDATE SET first_start = least(runs_pending.first_start, excluded.first_start)"
        )
    finally:
        con.unregister("_deferred")


def _refresh_with_pending(con: duckdb.DuckDBPyConnection, firsts: dict[str, int]) -> set[str]:
    """Rebuild the runs of these traces and of every pending one; returns the pending ones."""
    pending = dict(con.execute("SELECT trace_id, epoch_ns(first_start) FROM runs_pending").fetchall())
    touched = _earliest((pending, firsts))
    if touched:
        refresh_runs(con, sorted(touched), since_ns=min(touched.values()))
    if pending:
        con.execute("DELETE FROM runs_pending")
    return set(pending)


def refresh_pending_runs(con: duckdb.DuckDBPyConnection) -> set[str]:
    """Rebuild the runs that ``write(defer_runs=True)`` left pending; returns their trace ids."""
    con.execute("BEGIN TRANSACTION")
    try:
        pending = _refresh_with_pending(con, {})
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    return pending


def ingest(
    con: duckdb.DuckDBPyConnection,
    spans: Iterable[SpanRecord],
    prices: PriceBook | None = None,
    *,
    redact_content: bool = True,
) -> IngestReport:
    """Append a batch of spans and everything derived from them, atomically (``prepare`` + ``write``)."""
    return write(con, [prepare(spans, prices, redact_content=redact_content)])


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
    SELECT s.* FROM spans s JOIN t USING (trace_id) WHERE s.parent_span_id = '' AND s.start_time >= $since
    QUALIFY row_number() OVER (PARTITION BY s.trace_id ORDER BY s.start_time) = 1
),
sp AS (
    SELECT s.trace_id, min(s.start_time) AS started_at, max(s.end_time) AS ended_at,
           any_value(s.tenant) FILTER (WHERE s.tenant IS NOT NULL) AS tenant,
           count(*) FILTER (WHERE s.operation = 'execute_tool') AS tool_calls,
           count(*) FILTER (WHERE s.operation = 'execute_tool' AND (s.status_code = 'ERROR'
               OR {_attr("s", c.TOOL_SOFT_FAILURE)} = 'true')) AS soft_failures,
           any_value(json_extract_string(s.resource, '$."service.name"')) AS service_name
    FROM spans s JOIN t USING (trace_id) WHERE s.start_time >= $since GROUP BY s.trace_id
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
    FROM charges c JOIN t USING (trace_id) WHERE c.start_time >= $since GROUP BY c.trace_id
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


def refresh_runs(con: duckdb.DuckDBPyConnection, trace_ids: list[str], *, since_ns: int | None = None) -> None:
    """Rebuild the derived ``runs`` rows of these traces from spans and charges.

    ``since_ns``: no span of these traces added since their last rebuild starts
    earlier. With each run's own ``started_at`` it bounds the spans to read, so
    DuckDB skips older row groups by their min/max and the cost follows the
    recent data, not the size of the ledger (without it, every span is read).
    """
    con.register("_touched", pa.table({"trace_id": trace_ids}))
    try:
        since = None
        if since_ns is not None:
            (earliest_run,) = con.execute(
                "SELECT epoch_ns(min(started_at)) FROM runs WHERE trace_id IN (SELECT trace_id FROM _touched)"
            ).fetchone() or (None,)
            since = since_ns if earliest_run is None else min(since_ns, earliest_run)
        # A literal, not a parameter, so the filter is a constant the scan can prune row groups with.
        bound = f"make_timestamp_ns({int(since)})" if since is not None else "TIMESTAMP_NS '1970-01-01'"
        con.execute(_REFRESH_RUNS.replace("$since", bound))
    finally:
        con.unregister("_touched")
