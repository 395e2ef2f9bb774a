"""Content-addressed storage of captured content: requests, responses, tool arguments and results.

A request payload (``{"model", "system", "tools", "messages", ...}``) is split
into blocks stored once each by their 16-byte hash: the system prompt, the tool
list and each message. What many runs send alike (the system prompt and the tool
list) is stored once for the whole ledger (``content_blocks``); everything else
(messages, answers, tool arguments and results) once per run (``run_blocks``,
beside its trace id). A call's ``contexts`` row lists its message blocks (their
hashes, in order): turn N+1 repeats turn N's list plus its new messages, and the
column's zstd stores that repeat as a back-reference, so the store grows with
the number of distinct messages, not with turns x history.

Why per run: a block keyed by its hash alone must be found through an index on
the hash, and DuckDB's index costs ~49 bytes per random key, more than most
compressed messages. A run's blocks are found through an index on its trace id
instead, which costs a few bytes per row (a run has many), and a run's content
is also what it deletes when its detail is dropped (``ledger.retention``). Only
a message sent again in another run is stored again (measured in
benchmarks/content_store.py: <1% of the workload's blocks).

Other content attributes (what the model answered, a tool's arguments and
result: ``ledger.captured``) leave the span's attribute JSON too; the span keeps
a reference per attribute (``Refs``): a block hash, a list of hashes for a JSON
list of messages (each message a block, so an answer and the next request's
copy of it are one block), or a value too small to be worth a block. A model
call's output references sit on its ``contexts`` row, a tool span's on its
``spans.content_refs``.

Reassembly reads the run's rows of ``contexts`` and ``run_blocks`` through
their trace index and the shared blocks through their key, so its cost follows
the run's size, not the ledger's, and yields a value equal (as JSON, key order
included) to what was sent or answered.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from .captured import captured_response, json_value
from .redact import Redactor
from .tables import table
from .wire_request import WireRequest, wire_request

if TYPE_CHECKING:  # the decoder processes build content rows and never load DuckDB
    import duckdb

__all__ = [
    "CAPTURE_SETTINGS",
    "CapturedTurn",
    "ContextRows",
    "load_context",
    "load_response",
    "load_turn",
    "trace_attributes",
]

# Where message content is switched on, by who produces the spans: most users do not run our harness,
# so naming only TURNLEDGER_CAPTURE sent them looking for a setting their agent never reads.
CAPTURE_SETTINGS = (
    "turn message capture on where the spans come from: OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true "
    "(OpenTelemetry GenAI instrumentations), TRACELOOP_TRACE_CONTENT=true (OpenLLMetry), OPENINFERENCE_HIDE_INPUTS "
    "and _OUTPUTS unset (OpenInference), OTEL_LOG_USER_PROMPTS=1 (Claude Code), TURNLEDGER_CAPTURE=redacted "
    "(turnledger's harness, the default); docs/frameworks.md gives each framework's setup"
)

_SPLIT_KEYS = ("system", "tools", "messages")


def _dumps(value: Any) -> str:
    # Key order is kept (not sorted): the exact payload is what gets reproduced,
    # and an ordering change is itself a cache invalidator worth seeing. orjson
    # writes the same compact form ~10x faster (every turn re-sends its history);
    # the stdlib takes what orjson refuses (integers past 64 bits).
    try:
        return orjson.dumps(value).decode()
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# A block's key: 16 bytes (BLOB). References kept in JSON (``Refs``) and the message lists
# spell keys in hex (zstd absorbs the hex spelling: benchmarks/content_store.py).
KEY_BYTES = 16
_HEX_CHARS = 2 * KEY_BYTES


def _hash(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=KEY_BYTES).digest()


def _message_keys(listed: str) -> list[bytes]:
    """A ``contexts.messages`` value (the message blocks' keys in hex, one after another) -> the keys."""
    return [bytes.fromhex(listed[i : i + _HEX_CHARS]) for i in range(0, len(listed), _HEX_CHARS)]


# A value at most this long stays inline in the references: measured on
# benchmarks/agent_workload.py, a block (its hash, its row, its key in the index) costs
# more than DuckDB's compression of the same text inline until values reach ~1 KB.
INLINE_CHARS = 1024

# One attribute's reference: a block hash, a list of items (a JSON list, one block per
# item), or {"v": value} for a small value kept inline. An item is a hash, or
# {"b": hash, "x": {...}} for a message stored as its role and content (the block the
# next request's copy of it shares) plus the fields after them (say its finish_reason).
# Every block a reference names is one of its run's (``run_blocks``).
Item = str | dict[str, Any]
Ref = str | list[Item] | dict[str, Any]
Refs = dict[str, Ref]
_MESSAGE_CORE = ("role", "content")

_CONTEXT_ROW = table("contexts").compile_row(
    "trace_id, span_id, envelope, system, tools, messages, response",
    {
        "trace_id": "trace_id", "span_id": "span_id", "envelope": "envelope", "system_block": "system",
        "tools_block": "tools", "messages": "messages", "response": "response",
    },
)  # fmt: skip
_SHARED_ROW = table("content_blocks").compile_row("key, body", {"hash": "key", "body": "body"})
_RUN_BLOCK_ROW = table("run_blocks").compile_row(
    "trace_id, key, body", {"trace_id": "trace_id", "hash": "key", "body": "body"}
)


@dataclass
class ContextRows:
    """Rows that captured content adds to the content tables.

    Blocks repeat across batches by design (turn N+1 re-sends turn N's messages):
    ``ledger.write`` inserts only those not stored yet.
    """

    policy: Redactor | None = None  # None: blocks stored as received
    shared: dict[bytes, str] = field(default_factory=dict)  # key -> body: system prompts and tool lists
    run_blocks: dict[tuple[str, bytes], str] = field(default_factory=dict)  # (trace id, key) -> body
    contexts: list[tuple[Any, ...]] = field(default_factory=list)  # rows of the contexts table

    def mark(self) -> tuple[int, int, int]:
        """Where the rows stand now, for ``undo``."""
        return len(self.shared), len(self.run_blocks), len(self.contexts)

    def undo(self, mark: tuple[int, int, int]) -> None:
        """Drop every row added since ``mark`` (entries are only ever added, so the last ones are those)."""
        shared, run_blocks, contexts = mark
        while len(self.shared) > shared:
            self.shared.popitem()
        while len(self.run_blocks) > run_blocks:
            self.run_blocks.popitem()
        del self.contexts[contexts:]

    def rows(self) -> dict[str, list[tuple[Any, ...]]]:
        """The rows, per content table."""
        return {
            "content_blocks": [_SHARED_ROW(k, body) for k, body in self.shared.items()],
            "run_blocks": [_RUN_BLOCK_ROW(t, k, body) for (t, k), body in self.run_blocks.items()],
            "contexts": self.contexts,
        }

    def _body(self, value: Any) -> tuple[bytes, str]:
        body = _dumps(value)
        if self.policy is not None:
            body = self.policy.block(body)
        return _hash(body), body

    def _shared(self, value: Any) -> bytes:
        key, body = self._body(value)
        self.shared.setdefault(key, body)
        return key

    def _run_block(self, trace_id: str, value: Any) -> bytes:
        key, body = self._body(value)
        self.run_blocks.setdefault((trace_id, key), body)
        return key

    def refs(self, trace_id: str, values: Mapping[str, Any]) -> str:
        """Content attributes -> their references as stored (JSON), each value redacted into its run's blocks."""
        out: Refs = {}
        for key, value in values.items():
            items = json_value(value) if isinstance(value, str) and value.startswith("[") else None
            if isinstance(items, list) and items and all(isinstance(i, dict) for i in items):
                out[key] = [self._message(trace_id, item) for item in items]
            elif (isinstance(value, str) and len(value) <= INLINE_CHARS) or isinstance(value, (bool, int, float)):
                out[key] = {"v": self.policy.value(value) if self.policy is not None else value}
            else:
                out[key] = self._run_block(trace_id, value).hex()
        return _dumps(out)

    def _message(self, trace_id: str, message: dict[str, Any]) -> Item:
        """An output message's reference: its role and content are the message a later request re-sends."""
        keys = list(message)
        if keys[: len(_MESSAGE_CORE)] != list(_MESSAGE_CORE) or len(keys) == len(_MESSAGE_CORE):
            return self._run_block(trace_id, message).hex()
        extra = {k: message[k] for k in keys[len(_MESSAGE_CORE) :]}
        core = self._run_block(trace_id, {k: message[k] for k in _MESSAGE_CORE}).hex()
        return {"b": core, "x": self.policy.value(extra) if self.policy is not None else extra}

    def add(
        self, trace_id: str, span_id: str, payload: dict[str, Any] | None, outputs: Mapping[str, Any] | None = None
    ) -> None:
        """One model call's content: its request ``payload`` and its ``outputs`` attributes (either may be absent)."""
        response = self.refs(trace_id, outputs) if outputs else None
        if payload is None:
            self.contexts.append(_CONTEXT_ROW(trace_id, span_id, "null", None, None, None, response))
            return
        fields = {k: v for k, v in payload.items() if k not in _SPLIT_KEYS}
        envelope = {"order": list(payload), "fields": self.policy.value(fields) if self.policy else fields}
        system = self._shared(payload["system"]) if "system" in payload else None
        tools = self._shared(payload["tools"]) if "tools" in payload else None
        messages = None
        if "messages" in payload:
            messages = "".join(self._run_block(trace_id, m).hex() for m in payload["messages"])
        self.contexts.append(_CONTEXT_ROW(trace_id, span_id, _dumps(envelope), system, tools, messages, response))


# The lookups of a rebuild, each through an index: a run's rows by its trace id (DuckDB takes an
# index for one equality only, so the call is picked out here), shared blocks by their key. A run's
# block bodies are read by row id after their keys through the index: fetched through the index,
# each row decompresses its whole zstd vector again (13 ms against 7 for the same rows, measured on
# benchmarks/content_store.py's 10k ledger), and only the call's blocks are read, not the run's.
RUN_CONTEXTS = (
    "SELECT span_id, envelope, system_block, tools_block, messages, response FROM contexts WHERE trace_id = ?"
)
RUN_RESPONSES = "SELECT span_id, response FROM contexts WHERE trace_id = ?"
RUN_BLOCK_ROWS = "SELECT hash, rowid FROM run_blocks WHERE trace_id = ?"
BLOCKS_BY_ROW = "SELECT hash, body FROM run_blocks WHERE rowid IN (SELECT unnest(?))"
RUN_BLOCKS = "SELECT hash, body FROM run_blocks WHERE trace_id = ?"
SHARED_BLOCKS = "SELECT hash, body FROM content_blocks WHERE hash IN (SELECT unnest(?))"  # one filter: an index join


def _bodies(
    con: duckdb.DuckDBPyConnection, trace_id: str, run_keys: list[bytes], shared: list[bytes]
) -> dict[bytes, Any]:
    """The bodies of these blocks of one run and of the ledger's shared ones, parsed, by key."""
    out: dict[bytes, Any] = {}
    wanted = set(run_keys)
    if wanted:
        rows = [row for key, row in con.execute(RUN_BLOCK_ROWS, [trace_id]).fetchall() if bytes(key) in wanted]
        found = con.execute(BLOCKS_BY_ROW, [rows]).fetchall()
        if not wanted <= {bytes(key) for key, _ in found}:  # rows moved meanwhile (a checkpoint after a delete)
            found = con.execute(RUN_BLOCKS, [trace_id]).fetchall()
        out.update((bytes(key), json.loads(body)) for key, body in found if bytes(key) in wanted)
    if shared:
        found = con.execute(SHARED_BLOCKS, [list(set(shared))]).fetchall()
        out.update((bytes(key), json.loads(body)) for key, body in found)
    return out


def _ref_keys(refs: Refs) -> list[bytes]:
    hashes: list[str] = []
    for ref in refs.values():
        if isinstance(ref, str):
            hashes.append(ref)
        elif isinstance(ref, list):
            hashes += [item if isinstance(item, str) else item["b"] for item in ref]
    return [bytes.fromhex(h) for h in hashes]


def _item(item: Item, bodies: Mapping[bytes, Any]) -> Any:
    return bodies[bytes.fromhex(item)] if isinstance(item, str) else {**bodies[bytes.fromhex(item["b"])], **item["x"]}


def _resolved(refs: Refs, bodies: Mapping[bytes, Any]) -> dict[str, Any]:
    """The attributes the references stand for (a JSON list comes back as its compact JSON text)."""
    out: dict[str, Any] = {}
    for key, ref in refs.items():
        if isinstance(ref, dict):
            out[key] = ref["v"]
        elif isinstance(ref, str):
            out[key] = bodies[bytes.fromhex(ref)]
        else:
            out[key] = _dumps([_item(item, bodies) for item in ref])
    return out


def trace_attributes(con: duckdb.DuckDBPyConnection, trace_id: str) -> dict[str, dict[str, Any]]:
    """Every span of a trace -> its attribute set as received (content restored; secrets redacted)."""
    spans = con.execute("SELECT span_id, attributes, content_refs FROM spans WHERE trace_id = ?", [trace_id]).fetchall()
    responses = dict(con.execute(RUN_RESPONSES, [trace_id]).fetchall())  # None: nothing answered
    parsed = {sid: [json.loads(r) for r in (refs, responses.get(sid)) if r] for sid, _, refs in spans}
    bodies = _bodies(con, trace_id, [k for refs in parsed.values() for p in refs for k in _ref_keys(p)], [])
    out: dict[str, dict[str, Any]] = {}
    for sid, attributes, _ in spans:
        attrs = json.loads(attributes) if attributes else {}
        for p in parsed[sid]:
            attrs.update(_resolved(p, bodies))
        out[sid] = attrs
    return out


@dataclass(frozen=True, slots=True)
class CapturedTurn:
    """One model call's captured request payload and response (each None when not captured), and
    the request rebuilt in its provider's wire format (``ledger.wire_request``; None: no request
    reported, or its provider unknown)."""

    request: dict[str, Any] | None
    response: Any
    wire: WireRequest | None = None


def _context_row(con: duckdb.DuckDBPyConnection, trace_id: str, span_id: str) -> tuple[Any, ...] | None:
    return next((row[1:] for row in con.execute(RUN_CONTEXTS, [trace_id]).fetchall() if row[0] == span_id), None)


def load_turn(con: duckdb.DuckDBPyConnection, trace_id: str, span_id: str) -> CapturedTurn | None:
    """The exact request and response captured for one model-call span, or None if neither was,
    with the request rebuilt in its provider's wire format (``ledger.wire_request``).

    A span that captured none but reports a billed call another span captured
    (``ledger.dedup``: the SDK's own span beside an instrumentation's) gives that one's.
    """
    found = _turn_row(con, trace_id, span_id)
    if found is None:
        return None
    (content_trace, content_span), row = found
    turn = _captured_turn(con, content_trace, row)
    # The request's parameters: the span that captured the content, then the asked one's over them
    # (a provider SDK's span beside a framework's reports what the client itself set).
    if content_trace == trace_id:  # one read of the run's spans for both (the usual case)
        spans = _span_attributes(con, trace_id, (content_span, span_id))
        attrs = {**spans[content_span], **spans[span_id]}
    else:
        attrs = {**_span_attributes(con, content_trace, (content_span,))[content_span],
                 **_span_attributes(con, trace_id, (span_id,))[span_id]}  # fmt: skip
    return CapturedTurn(turn.request, turn.response, wire_request(turn.request, attrs))


def _turn_row(
    con: duckdb.DuckDBPyConnection, trace_id: str, span_id: str
) -> tuple[tuple[str, str], tuple[Any, ...]] | None:
    """The ``contexts`` row holding a call's content, and the span it belongs to (``load_turn``)."""
    row = _context_row(con, trace_id, span_id)
    if row is None:
        from .dedup import copy_with_context  # here: ledger.rows imports this module where DuckDB is never loaded

        copy = copy_with_context(con, trace_id, span_id)
        if copy is None:
            return None
        trace_id, span_id = copy
        row = _context_row(con, trace_id, span_id)
        if row is None:
            return None
    return (trace_id, span_id), row


def _span_attributes(
    con: duckdb.DuckDBPyConnection, trace_id: str, span_ids: tuple[str, ...]
) -> dict[str, dict[str, Any]]:
    """These spans' stored attributes (content moved out), by span id: {} for one not found."""
    out: dict[str, dict[str, Any]] = {sid: {} for sid in span_ids}
    # One equality (the trace index); the spans are picked out here.
    for sid, text in con.execute("SELECT span_id, attributes FROM spans WHERE trace_id = ?", [trace_id]).fetchall():
        if sid in out and text:
            attrs = json.loads(text)
            out[sid] = attrs if isinstance(attrs, dict) else {}
    return out


def _captured_turn(con: duckdb.DuckDBPyConnection, trace_id: str, row: tuple[Any, ...]) -> CapturedTurn:
    envelope, response_refs = json.loads(row[0]), row[4]
    system, tools = (bytes(key) if key is not None else None for key in row[1:3])
    message_blocks = _message_keys(row[3] or "")
    refs: Refs = json.loads(response_refs) if response_refs else {}
    bodies = _bodies(con, trace_id, [*message_blocks, *_ref_keys(refs)], [k for k in (system, tools) if k])
    response = captured_response(_resolved(refs, bodies), llm_span=True) if refs else None
    if envelope is None:
        return CapturedTurn(None, response)
    parts: dict[str, Callable[[], Any]] = {
        "system": lambda: bodies[system] if system else None,
        "tools": lambda: bodies[tools] if tools else None,
        "messages": lambda: [bodies[b] for b in message_blocks],
    }
    fields = envelope["fields"]
    request = {k: parts[k]() if k in parts else fields[k] for k in envelope["order"]}
    return CapturedTurn(request, response)


def load_context(con: duckdb.DuckDBPyConnection, trace_id: str, span_id: str) -> dict[str, Any] | None:
    """The exact request payload captured for one model-call span, or None if none was (``load_turn``)."""
    found = _turn_row(con, trace_id, span_id)
    return _captured_turn(con, found[0][0], found[1]).request if found is not None else None


def load_response(con: duckdb.DuckDBPyConnection, trace_id: str, span_id: str) -> Any:
    """What the model answered on one model-call span (its output messages), or None if not captured."""
    found = _turn_row(con, trace_id, span_id)
    return _captured_turn(con, found[0][0], found[1]).response if found is not None else None
