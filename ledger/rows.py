"""Spans -> ledger rows for every table (normalized, priced, redacted), with no connection.

``prepare`` is the pure-Python half of ingest: the decoder processes run it,
so nothing here imports DuckDB (``ledger.write`` inserts what it builds). Each
row is built by column name and turned into a tuple in the order its table
declares (``ledger.tables``); the price terms' columns come from ``TERMS``.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from functools import cache, lru_cache
from typing import Any

import orjson
import pyarrow as pa

from . import conventions as c
from . import terms
from .billed import call_copy_row
from .captured import CONTENT_ATTRIBUTES, OPENINFERENCE_MESSAGE, OPENINFERENCE_REQUEST, captured_payload, content_keys
from .content import ContextRows
from .health_columns import soft_failed, time_to_first_token_ms, tool_fingerprint, tool_of
from .limits import MAX_TIME_NS, MIN_TIME_NS
from .normalize import INCLUDES_CACHE, UNKNOWN, ModelCall, model_call, tenant_of
from .pricing import PriceBook
from .quality import EVALUATION_EVENT, Judgment, SpanContext, judgment_row, openinference_prefixes, span_judgments
from .redact import Redactor, default_policy
from .spans import SpanEvent, SpanLink, SpanRecord
from .tables import table

__all__ = ["MAX_ATTRIBUTE_CHARS", "PreparedBatch", "Rows", "default_prices", "judgment_batch", "prepare"]

# Attribute values longer than this are cut (the original length is noted in
# the value). Captured content is exempt: it goes to the content store.
MAX_ATTRIBUTE_CHARS = 16_384
_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_HEX16 = re.compile(r"^[0-9a-f]{16}$")
_OPENINFERENCE_KIND = "openinference.span.kind"

Rows = list[tuple[Any, ...]]


def _problem(span: SpanRecord) -> str | None:
    """Why a span cannot be stored at all (it is rejected alone), or None."""
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
    start, end = span.start_ns, span.end_ns
    if not (MIN_TIME_NS <= start <= end <= MAX_TIME_NS):
        return f"bad times: startTimeUnixNano {start} endTimeUnixNano {end} (need {MIN_TIME_NS} <= start <= end <= {MAX_TIME_NS})"
    for i, e in enumerate(span.events):
        if not MIN_TIME_NS <= e.time_ns <= MAX_TIME_NS:
            return f"events[{i}].timeUnixNano {e.time_ns} is outside [{MIN_TIME_NS}, {MAX_TIME_NS}]"
    # A name or status that is not text would fail the insert of every span written with it.
    for name in ("name", "status_message", "scope_name", "scope_version"):
        text = getattr(span, name)
        if not isinstance(text, str) or not (text.isascii() or _utf8(text)):
            return f"{name} {text!r:.60} is not valid text"
    return None


def _utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8 column can hold it
        return False
    return True


# --- which attributes are stored or moved to the content store --------------------------------
# Identifiers the ledger joins on, issued by a provider (a response's id, a tool call's id) or by an
# instrumentation (a call's id shared by its attempts), never written by a person or a model: when
# short strings, searched for secrets only (an API key sent as an id is still a key), not for personal
# data. The full scan cost most of a span's redaction: each id is new, so no cache helps, and ~60% of
# hex ids carry what the detectors' pre-check reads as an IBAN or NI-number candidate (17 µs of
# detectors each, on the benchmark's agent spans); and a marker in one made distinct calls one charge.
IDENTIFIER_KEYS = frozenset({c.RESPONSE_ID, c.TOOL_CALL_ID, c.CALL_ID})
_IDENTIFIER_CHARS = 128  # longer is no identifier: scanned as any text is


@dataclass(frozen=True, slots=True)
class _AttributePlan:
    """What ingest does with one set of attribute keys."""

    moved: tuple[str, ...]  # captured content of every kind: it lives in the content store instead
    may_capture: bool  # a captured payload can be rebuilt from these keys
    outputs: tuple[str, ...]  # what the model answered (ledger.captured.content_keys)
    tools: tuple[str, ...]  # a tool's (or another step's) input and output
    judged: tuple[str, ...]  # OpenInference evaluation/annotation prefixes (ledger.quality): judgments
    identifiers: tuple[str, ...]  # of IDENTIFIER_KEYS: not scanned when a short string


@lru_cache(maxsize=4096)
def _attribute_plan(keys: tuple[str, ...], openinference_kind: str | None) -> _AttributePlan:
    """Decided once per key set: the spans of one instrumentation share a handful of them.

    ``openinference_kind``: on an OpenInference LLM span ``input.value`` IS the request.
    """
    llm_span = openinference_kind == "LLM"
    request = [
        key
        for key in keys
        if key in CONTENT_ATTRIBUTES or OPENINFERENCE_MESSAGE.match(key) or (llm_span and key in OPENINFERENCE_REQUEST)
    ]
    outputs, tools = content_keys(keys, openinference_kind)
    # input.value can hold the request on a GenAI "chat" span too (captured_payload reads it there)
    may_capture = bool(request) or "input.value" in keys
    identifiers = tuple(key for key in keys if key in IDENTIFIER_KEYS)
    moved = (*request, *outputs, *tools)
    return _AttributePlan(moved, may_capture, outputs, tools, openinference_prefixes(keys), identifiers)


def _truncated(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_ATTRIBUTE_CHARS:
        return f"{value[:MAX_ATTRIBUTE_CHARS]}…[truncated, {len(value)} chars]"
    return value


def _stored_attributes(attrs: Mapping[str, Any], moved: tuple[str, ...]) -> str:
    """The span's (redacted) attributes as stored (JSON): content moved out, long values cut."""
    if moved:
        attrs = {key: value for key, value in attrs.items() if key not in moved}
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
    # "trace/span: what" for spans kept with a part left out: usage flagged
    # invalid_usage, or captured content that is not a payload (kept as attributes).
    flagged: list[str] = field(default_factory=list)

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


def _text(value: Any) -> str | None:
    """A guard event's field for its VARCHAR column: producers may send a number or a list."""
    return value if value is None or isinstance(value, str) else _dumps(value)


# Each table's row, column by column: a Python expression over the row function's parameters.
_SPAN_ROW = table("spans").compile_row(
    "s, tenant, operation, attributes, resource, events, links, ingested_at, content_refs, tool_of, soft_failed, "
    "tool_fingerprint",
    {
        "trace_id": "s.trace_id", "span_id": "s.span_id", "parent_span_id": "s.parent_span_id", "name": "s.name",
        "kind": "s.kind", "operation": "operation", "tenant": "tenant", "start_time": "s.start_ns",
        "end_time": "s.end_ns", "status_code": "s.status_code", "status_message": "s.status_message",
        "attributes": "attributes", "resource": "resource", "events": "events", "scope_name": "s.scope_name",
        "scope_version": "s.scope_version", "ingested_at": "ingested_at", "links": "links",
        "content_refs": "content_refs", "tool": "tool_of(s, operation)", "soft_failure": "soft_failed(s, operation)",
        "call_fingerprint": "tool_fingerprint(s, operation)",
    },
)  # fmt: skip
_GUARD_EVENT_ROW = table("guard_events").compile_row(
    "s, seq, e, attributes, _text",
    {
        "trace_id": "s.trace_id", "span_id": "s.span_id", "seq": "seq", "name": "e.name", "time": "e.time_ns",
        "shape": "_text(e.attributes.get('shape'))", "action": "_text(e.attributes.get('action'))",
        "tool": "_text(e.attributes.get('tool'))", "cause": "_text(e.attributes.get('cause'))", "attributes": "attributes",
    },
)  # fmt: skip


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
        "invalid_usage": "call.invalid_usage != ''", "incomplete_usage": "call.incomplete_usage != ''",
        "ttft_ms": "ttft_ms(s, operation(s))", "cache_split": "call.cache_split", "output_count": "call.output_count",
        "unknown_usage": "unknown[0]", "usage_error_usd": "unknown[1]",
    }  # fmt: skip
    for t in terms.TERMS:
        values[t.tokens_column] = f"tokens[{t.key!r}]"
        values[t.usd_column] = f"usd[{t.key!r}]"
    return table("charges").compile_row("s, call, priced, tenant, tokens, usd, ttft_ms, operation, unknown", values)


# Every usage term given or inferred: nothing flagged. An unknown one is no fault of the exporter's: it is
# counted and listed (report, pages), not named in the export's answer, where it crowded out rejections.
_KNOWN: tuple[bool, Decimal | None] = (False, None)


_NOT_A_PAYLOAD: dict[str, Any] = {}  # a sentinel: the span carries content, but no payload
_NOT_STORED = "\0not stored"  # a sentinel: the span's content rows could not be built (flagged)


class _RowBuilder:
    """Rows for each table, filled span by span as tuples (the cheapest Python row)."""

    def __init__(self, prices: PriceBook, policy: Redactor | None) -> None:
        self.prices = prices
        self.policy = policy  # None: stored as received
        self.spans: Rows = []
        self.charges: Rows = []
        self.copies: Rows = []  # one per charge row: which billed call it reports (ledger.billed)
        self.events: Rows = []
        self.evaluations: Rows = []  # judgments the spans carry (ledger.quality)
        self.contexts = ContextRows(policy=policy)
        self.unpriced: set[str] = set()
        self.flagged: list[str] = []
        self.now_us = int(datetime.now(UTC).timestamp() * 1e6)
        # One OTLP request shares a resource dict across its spans: redacted and dumped once.
        self._resources: dict[int, str] = {}
        self._redacted_resources: dict[int, dict[str, Any]] = {}
        self._charge_row = _charge_row(terms.TERMS)

    def _resource(self, resource: dict[str, Any]) -> str:
        key = id(resource)
        cached = self._resources.get(key)
        if cached is None:
            cached = self._resources[key] = _dumps(resource)
        return cached

    def _redacted(self, s: SpanRecord, plan: _AttributePlan) -> SpanRecord:
        """The span as stored: every string redacted but short identifiers, the content to move aside
        left for the content store (which redacts it block by block)."""
        p = self.policy
        if p is None:
            return s
        ids: tuple[str, ...] = ()
        if plan.identifiers:
            attributes = s.attributes
            ids = tuple(
                key for key in plan.identifiers
                if type(value := attributes[key]) is str and len(value) <= _IDENTIFIER_CHARS
            )  # fmt: skip
        name, status, scope, version = (
            p.text(s.name),
            p.text(s.status_message),
            p.text(s.scope_name),
            p.text(s.scope_version),
        )
        attrs = p.attributes(s.attributes, plan.moved, identifiers=ids)  # ids: searched for secrets only
        events = tuple(map(self._redacted_event, s.events)) if s.events else s.events
        links = tuple(map(self._redacted_link, s.links)) if s.links else s.links
        resource = self._redacted_resources.get(id(s.resource))
        if resource is None:
            resource = self._redacted_resources[id(s.resource)] = p.attributes(s.resource)
        if (
            name is s.name and status is s.status_message and scope is s.scope_name and version is s.scope_version
            and attrs is s.attributes and resource is s.resource
            and all(map(operator.is_, events, s.events)) and all(map(operator.is_, links, s.links))
        ):  # fmt: skip
            return s
        return SpanRecord(
            s.trace_id, s.span_id, name, s.start_ns, s.end_ns, s.parent_span_id, s.kind, s.status_code, status,
            attrs, events, resource, scope, version, s.problem, links,
        )  # fmt: skip

    def _redacted_event(self, e: SpanEvent) -> SpanEvent:
        assert self.policy is not None
        name, attrs = self.policy.text(e.name), self.policy.attributes(e.attributes)
        return e if name is e.name and attrs is e.attributes else SpanEvent(name, e.time_ns, attrs)

    def _redacted_link(self, x: SpanLink) -> SpanLink:
        assert self.policy is not None
        attrs = self.policy.attributes(x.attributes)
        return x if attrs is x.attributes else SpanLink(x.trace_id, x.span_id, attrs)

    def add(self, received: SpanRecord) -> None:
        """Every row of one span, or (raising) none: rows are appended only once all are built."""
        kind = received.attributes.get(_OPENINFERENCE_KIND)
        plan = _attribute_plan(tuple(received.attributes), kind if isinstance(kind, str) else None)
        s = self._redacted(received, plan)  # what every row below is built from
        tenant = tenant_of(s)
        events = "[]"
        guard_rows = []
        judged = False
        if s.events:
            events = _dumps([{"name": e.name, "time_ns": e.time_ns, "attributes": e.attributes} for e in s.events])
            for seq, e in enumerate(s.events):
                if e.name in c.GUARD_EVENTS:
                    guard_rows.append(_GUARD_EVENT_ROW(s, seq, e, _dumps(e.attributes), _text))
                judged = judged or e.name == EVALUATION_EVENT
        eval_rows, eval_notes = self._judgments(s, tenant, plan.judged) if judged or plan.judged else ([], [])
        charge = copy = None
        call = model_call(s)
        if call is not None:
            when = datetime.fromtimestamp(s.start_ns / 1e9, UTC)
            priced = self.prices.price(call.provider, call.model, call.tokens, when)
            unknown = (
                _KNOWN if call.cache_split != UNKNOWN and call.output_count != UNKNOWN else self._unknown(call, when)
            )
            charge = self._charge_row(
                s, call, priced, tenant, call.tokens.by_term, priced.usd, time_to_first_token_ms, _operation, unknown
            )
            copy = call_copy_row(s, call)
        resource, operation = self._resource(s.resource), _operation(s)
        flagged = len(self.flagged)
        content_refs: str | None = None
        try:
            # The content store redacts the payload block by block, so it is read as received.
            payload = self._payload(received) if plan.may_capture or received.events else None
            if payload is _NOT_A_PAYLOAD:
                stored = self._kept_content(received)
            else:
                stored = _stored_attributes(s.attributes, plan.moved)
                content_refs = self._add_content(received, payload, plan, model_call=call is not None)
                if content_refs is _NOT_STORED:  # the last step that can fail
                    stored, content_refs = self._kept_content(received), None
        except BaseException:
            del self.flagged[flagged:]  # the span is rejected: nothing of it is kept, notes included
            raise
        links = (
            _dumps([{"trace_id": x.trace_id, "span_id": x.span_id, "attributes": x.attributes} for x in s.links])
            if s.links
            else "[]"
        )
        self.spans.append(
            _SPAN_ROW(
                s,
                tenant,
                operation,
                stored,
                resource,
                events,
                links,
                self.now_us,
                content_refs,
                tool_of,
                soft_failed,
                tool_fingerprint,
            )
        )
        self.events += guard_rows
        self.evaluations += eval_rows
        self.flagged += eval_notes
        if call is not None and charge is not None and copy is not None:
            if priced.unpriced:
                self.unpriced.add(f"{call.provider or '?'}/{call.model or '?'}")
            if call.invalid_usage:
                self.flagged.append(f"{s.trace_id}/{s.span_id}: invalid_usage: {call.invalid_usage}")
            if call.incomplete_usage:
                self.flagged.append(f"{s.trace_id}/{s.span_id}: incomplete_usage: {call.incomplete_usage}")
            self.charges.append(charge)
            self.copies.append(copy)

    def _unknown(self, call: ModelCall, when: datetime) -> tuple[bool, Decimal | None]:
        """(flagged, its largest error in USD; None: unbounded) for a call with a term its source did not give.

        A prompt count that includes the cache, given without the split, may hide reads or writes: priced
        as uncached input, it is off by at most what the other input terms would have cost. A count that
        excludes the cache, or a missing output count, bounds nothing. A split that could change nothing
        (a model without cache prices) is recorded, not flagged."""
        if call.output_count == UNKNOWN or call.convention != INCLUDES_CACHE:
            return True, None
        error = self.prices.split_error(call.provider, call.model, call.tokens, when)
        return error > 0, error

    def _judgments(self, s: SpanRecord, tenant: str | None, prefixes: tuple[str, ...]) -> tuple[Rows, list[str]]:
        """The evaluations rows of the (redacted) span's judgments, and a flag note for each one left out."""
        rows: Rows = []
        notes: list[str] = []
        ctx = SpanContext(s.trace_id, s.span_id, tenant, s.end_ns)
        for found in span_judgments(ctx, ((e.name, e.time_ns, e.attributes) for e in s.events), s.attributes, prefixes):
            if isinstance(found, str):
                notes.append(f"{s.trace_id}/{s.span_id}: {found}")
            else:
                rows.append(judgment_row(found, self.now_us))
        return rows, notes

    def _kept_content(self, received: SpanRecord) -> str:
        """The stored attributes of a span whose content could not be a payload: it stays among them, redacted."""
        attrs = received.attributes if self.policy is None else self.policy.attributes(received.attributes)
        return _stored_attributes(attrs, ())

    def _flag_content(self, s: SpanRecord, why: str) -> None:
        self.flagged.append(f"{s.trace_id}/{s.span_id}: captured content not stored ({why}); kept as attributes")

    def _payload(self, s: SpanRecord) -> dict[str, Any] | None:
        """The span's captured payload; ``_NOT_A_PAYLOAD`` (flagged) if what it carries is not one.

        Content that is not a payload (``gen_ai.input.messages`` that is not JSON,
        not a list) never costs the span: it stays among its attributes.
        """
        try:
            payload = captured_payload(s)
        except Exception as exc:
            self._flag_content(s, f"{type(exc).__name__}: {str(exc)[:80]}")
            return _NOT_A_PAYLOAD
        if payload is not None and not isinstance(payload.get("messages", []), list):
            self._flag_content(s, f"messages are {type(payload['messages']).__name__}, not a JSON list")
            return _NOT_A_PAYLOAD
        return payload

    def _add_content(
        self, s: SpanRecord, payload: dict[str, Any] | None, plan: _AttributePlan, *, model_call: bool
    ) -> str | None:
        """Add a span's content rows, all or none; returns its ``spans.content_refs`` (None: nothing
        referenced there), or ``_NOT_STORED`` (flagged) when they cannot be built.

        A model call's request and answer go to its ``contexts`` row; a tool's arguments and
        result (and the output of a span that is no model call) are referenced from the span.
        """
        a = s.attributes
        outputs = {k: a[k] for k in plan.outputs}
        apart = {k: a[k] for k in plan.tools}
        if outputs and payload is None and not model_call:
            apart, outputs = {**outputs, **apart}, {}
        if payload is None and not outputs and not apart:
            return None
        ctx = self.contexts
        mark = ctx.mark()
        try:
            if payload is not None or outputs:
                ctx.add(s.trace_id, s.span_id, payload, outputs)
            return ctx.refs(s.trace_id, apart) if apart else None
        except Exception as exc:  # e.g. nested past what the JSON serializers take
            ctx.undo(mark)
            self._flag_content(s, f"{type(exc).__name__}: {str(exc)[:80]}")
            return _NOT_STORED

    def by_table(self) -> dict[str, Rows]:
        return {
            "spans": self.spans,
            "call_copies": self.copies,
            "charges": self.charges,
            "guard_events": self.events,
            "evaluations": self.evaluations,
            **self.contexts.rows(),
        }


def prepare(
    spans: Iterable[SpanRecord],
    prices: PriceBook | None = None,
    *,
    redact_content: bool = True,
    policy: Redactor | None = None,
) -> PreparedBatch:
    """Validate spans and build every row they add (normalized, priced, redacted); nothing is stored.

    Invalid spans are listed in ``rejected`` and the rest still go on. Every
    stored string passes ``policy`` (default: ``ledger.redact.default_policy()``,
    which ``TURNLEDGER_REDACT*`` configures); ``redact_content=False`` stores
    spans as received, for a producer that redacted already (ours) or on purpose.
    """
    chosen = (policy or default_policy()) if redact_content else None
    rows = _RowBuilder(prices or default_prices(), chosen if chosen is not None and chosen.enabled else None)
    received = 0
    rejected: list[str] = []
    first_starts: dict[str, int] = {}
    for s in spans:
        received += 1
        try:
            problem = _problem(s)
            if not problem:
                rows.add(s)
        except Exception as exc:  # whatever one span holds, it costs only that span
            problem = f"cannot be stored: {type(exc).__name__}: {str(exc)[:120]}"
        if problem:
            rejected.append(f"{s.trace_id}/{s.span_id}: {problem}")
            continue
        first = first_starts.get(s.trace_id)
        if first is None or s.start_ns < first:
            first_starts[s.trace_id] = s.start_ns
    return PreparedBatch(received, rejected, first_starts, rows.unpriced, rows.by_table(), flagged=rows.flagged)


def judgment_batch(judgments: Iterable[Judgment]) -> PreparedBatch:
    """Judgments sent apart from spans (``POST /v1/feedback``) as a batch ``ledger.write`` commits like spans."""
    now_us = int(datetime.now(UTC).timestamp() * 1e6)
    rows: Rows = []
    firsts: dict[str, int] = {}
    for j in judgments:
        rows.append(judgment_row(j, now_us))
        firsts[j.trace_id] = min(j.time_ns, firsts.get(j.trace_id, j.time_ns))
    return PreparedBatch(0, [], firsts, set(), {"evaluations": rows})


@lru_cache(maxsize=1)
def default_prices() -> PriceBook:
    """The shipped price book, built once per process (loading genai-prices is not free)."""
    return PriceBook.default()
