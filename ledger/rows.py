"""Spans -> ledger rows for every table (normalized, priced, redacted), with no connection.

``prepare`` is the pure-Python half of ingest: the decoder processes run it,
so nothing here imports DuckDB (``ledger.write`` inserts what it builds). Each
row is built by column name and turned into a tuple in the order its table
declares (``ledger.tables``); the price terms' columns come from ``TERMS``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache, lru_cache
from typing import Any

import orjson
import pyarrow as pa

from . import conventions as c
from . import terms
from .billed import call_copy_row
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
from .tables import table

__all__ = ["MAX_ATTRIBUTE_CHARS", "PreparedBatch", "Rows", "default_prices", "prepare"]

# Attribute values longer than this are cut (the original length is noted in
# the value). Captured request payloads are exempt: they go to the content store.
MAX_ATTRIBUTE_CHARS = 16_384
_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_HEX16 = re.compile(r"^[0-9a-f]{16}$")
_OPENINFERENCE_KIND = "openinference.span.kind"

Rows = list[tuple[Any, ...]]


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


@dataclass
class PreparedBatch:
    """Spans turned into rows for every table, ready for ``ledger.write``; built without a connection.

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
        self.tables.update({name: table(name).to_arrow(rows) for name, rows in self.rows.items() if rows})
        self.rows = {}
        return self

    # Pickled (from a decoder process to the writer) as one Arrow IPC stream per
    # table: a third of the cost of pickling the tables column by column.
    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "tables": {name: _ipc_bytes(t) for name, t in self.tables.items()}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        tables = {name: pa.ipc.open_stream(data).read_all() for name, data in state["tables"].items()}
        self.__dict__.update(state, tables=tables)


def _ipc_bytes(data: pa.Table) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema) as stream:
        stream.write_table(data)
    return sink.getvalue()


# Each table's row, column by column: a Python expression over the row function's parameters.
_SPAN_ROW = table("spans").compile_row(
    "s, tenant, operation, attributes, resource, events, ingested_at",
    {
        "trace_id": "s.trace_id", "span_id": "s.span_id", "parent_span_id": "s.parent_span_id", "name": "s.name",
        "kind": "s.kind", "operation": "operation", "tenant": "tenant", "start_time": "s.start_ns",
        "end_time": "s.end_ns", "status_code": "s.status_code", "status_message": "s.status_message",
        "attributes": "attributes", "resource": "resource", "events": "events", "scope_name": "s.scope_name",
        "scope_version": "s.scope_version", "ingested_at": "ingested_at",
    },
)  # fmt: skip
_GUARD_EVENT_ROW = table("guard_events").compile_row(
    "s, seq, e, attributes",
    {
        "trace_id": "s.trace_id", "span_id": "s.span_id", "seq": "seq", "name": "e.name", "time": "e.time_ns",
        "shape": "e.attributes.get('shape')", "action": "e.attributes.get('action')",
        "tool": "e.attributes.get('tool')", "cause": "e.attributes.get('cause')", "attributes": "attributes",
    },
)  # fmt: skip
_BLOCK_ROW = table("content_blocks").compile_row("block_hash, body", {"hash": "block_hash", "body": "body"})
_CHAIN_ROW = table("message_chain").compile_row(
    "trace_id, node, prev, block", {"trace_id": "trace_id", "node": "node", "prev": "prev", "block": "block"}
)


@cache
def _charge_row(_terms: tuple[terms.PriceTerm, ...]) -> Callable[..., tuple[Any, ...]]:
    """The charges row for these terms: each term's tokens and dollars by its key."""
    values = {
        "trace_id": "s.trace_id", "span_id": "s.span_id", "parent_span_id": "s.parent_span_id",
        "call_id": "call.call_id", "start_time": "s.start_ns", "latency_ms": "(s.end_ns - s.start_ns) / 1e6",
        "tenant": "tenant", "call_site": "call.call_site", "provider": "call.provider", "model": "call.model",
        "attempt": "call.attempt", "retry_cause": "call.retry_cause", "status_code": "s.status_code",
        "error_type": f"s.attributes.get({c.ERROR_TYPE!r})", "finish_reason": "call.finish_reason",
        "reasoning_tokens": "call.tokens.reasoning", "unpriced": "priced.unpriced", "price_source": "priced.source",
        "price_version": "priced.version", "token_convention": "call.convention",
    }  # fmt: skip
    for t in terms.TERMS:
        values[t.tokens_column] = f"tokens[{t.key!r}]"
        values[t.usd_column] = f"usd[{t.key!r}]"
    return table("charges").compile_row("s, call, priced, tenant, tokens, usd", values)


class _RowBuilder:
    """Rows for each table, filled span by span as tuples (the cheapest Python row)."""

    def __init__(self, prices: PriceBook, redact_content: bool) -> None:
        self.prices = prices
        self.redact_content = redact_content
        self.spans: Rows = []
        self.charges: Rows = []
        self.copies: Rows = []  # one per charge row: which billed call it reports (ledger.billed)
        self.events: Rows = []
        self.contexts = ContextRows(redact_blocks=redact_content)
        self.unpriced: set[str] = set()
        self.now_us = int(datetime.now(UTC).timestamp() * 1e6)
        self._resources: dict[int, str] = {}  # one OTLP request shares a resource dict across its spans
        self._charge_row = _charge_row(terms.TERMS)

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
                    self.events.append(_GUARD_EVENT_ROW(s, seq, e, _dumps(e.attributes)))
        stored = _stored_attributes(attrs, plan, self.redact_content)
        self.spans.append(_SPAN_ROW(s, tenant, _operation(s), stored, self._resource(s.resource), events, self.now_us))
        call = model_call(s)
        if call is not None:
            when = datetime.fromtimestamp(s.start_ns / 1e9, UTC)
            priced = self.prices.price(call.provider, call.model, call.tokens, when)
            if priced.unpriced:
                self.unpriced.add(f"{call.provider or '?'}/{call.model or '?'}")
            self.charges.append(self._charge_row(s, call, priced, tenant, call.tokens.by_term, priced.usd))
            self.copies.append(call_copy_row(s, call))
        if plan.may_capture or s.events:
            payload = captured_payload(s)
            if payload is not None:
                self.contexts.add(s.trace_id, s.span_id, payload)

    def by_table(self) -> dict[str, Rows]:
        ctx = self.contexts
        return {
            "spans": self.spans,
            "call_copies": self.copies,
            "charges": self.charges,
            "guard_events": self.events,
            "content_blocks": [_BLOCK_ROW(h, body) for h, body in ctx.blocks.items()],
            "message_chain": [_CHAIN_ROW(t, n, p, b) for (t, n), (p, b) in ctx.nodes.items()],
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
    rows = _RowBuilder(prices or default_prices(), redact_content)
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


@lru_cache(maxsize=1)
def default_prices() -> PriceBook:
    """The shipped price book, built once per process (loading genai-prices is not free)."""
    return PriceBook.default()
