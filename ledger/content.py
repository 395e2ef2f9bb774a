"""Content-addressed storage of captured content: requests, responses, tool arguments and results.

A request payload (``{"model", "system", "tools", "messages", ...}``) is split
into blocks stored once by their 16-byte hash (``content_blocks``): the system
prompt, the tool list and each message. A call's ``contexts`` row lists its
message blocks (their hashes, in order): turn N+1 repeats turn N's list plus its
new messages, and the column's zstd stores that repeat as a back-reference, so
the store grows with the number of distinct messages, not with turns x history
(DuckDB compresses a vector of 2,048 rows as one: a run's calls written further
apart than that pay their list's 32 hex characters per message again).
Measured in benchmarks/content_store.py, the per-trace chain of nodes this
replaced (migration 13; one row and two index entries per message) cost more
than every list together.

Other content attributes (what the model answered, a tool's arguments and
result: ``ledger.captured``) leave the span's attribute JSON too; the span keeps
a reference per attribute (``Refs``): a block hash, a list of hashes for a JSON
list of messages (each message a block, so an answer and the next request's
copy of it are one block), or a value too small to be worth a block. A model
call's output references sit on its ``contexts`` row, a tool span's on its
``spans.content_refs``.

Reassembly reads the call's row and its blocks each through their key (migration
13), so its cost does not grow with the ledger, and yields a value equal (as JSON,
key order included) to what was sent or answered.
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

if TYPE_CHECKING:  # the decoder processes build content rows and never load DuckDB
    import duckdb

__all__ = ["CapturedTurn", "ContextRows", "call_key", "load_context", "load_response", "load_turn", "trace_attributes"]

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


# A block's key: 16 bytes (BLOB), half the bytes of its hex spelling in the column and in
# the primary key's index, which costs more than the key itself (benchmarks/content_store.py).
# References kept in JSON (``Refs``) and the message lists spell keys in hex.
KEY_BYTES = 16
_HEX_CHARS = 2 * KEY_BYTES


def _hash(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=KEY_BYTES).digest()


def call_key(trace_id: str, span_id: str) -> bytes:
    """A contexts row's key: one 16-byte column, since DuckDB looks up no composite key through its index
    (a (trace_id, span_id) key and a trace index cost ~3x this one's index; the ids' length keeps it unambiguous)."""
    return _hash(f"{len(trace_id)}:{trace_id}{span_id}")


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
Item = str | dict[str, Any]
Ref = str | list[Item] | dict[str, Any]
Refs = dict[str, Ref]
_MESSAGE_CORE = ("role", "content")

_CONTEXT_ROW = table("contexts").compile_row(
    "call, trace_id, span_id, envelope, system, tools, messages, size, response",
    {
        "call": "call", "trace_id": "trace_id", "span_id": "span_id", "envelope": "envelope", "system_block": "system",
        "tools_block": "tools", "messages": "messages", "payload_bytes": "size", "response": "response",
    },
)  # fmt: skip
_BLOCK_ROW = table("content_blocks").compile_row("key, body", {"hash": "key", "body": "body"})


@dataclass
class ContextRows:
    """Rows that captured content adds to the content tables (duplicate blocks are fine: INSERT OR IGNORE)."""

    policy: Redactor | None = None  # None: blocks stored as received
    blocks: dict[bytes, str] = field(default_factory=dict)  # key -> body
    contexts: list[tuple[Any, ...]] = field(default_factory=list)  # rows of the contexts table

    def mark(self) -> tuple[int, int]:
        """Where the rows stand now, for ``undo``."""
        return len(self.blocks), len(self.contexts)

    def undo(self, mark: tuple[int, int]) -> None:
        """Drop every row added since ``mark`` (entries are only ever added, so the last ones are those)."""
        blocks, contexts = mark
        while len(self.blocks) > blocks:
            self.blocks.popitem()
        del self.contexts[contexts:]

    def rows(self) -> dict[str, list[tuple[Any, ...]]]:
        """The rows, per content table."""
        return {"content_blocks": [_BLOCK_ROW(k, body) for k, body in self.blocks.items()], "contexts": self.contexts}

    def _block(self, value: Any) -> bytes:
        body = _dumps(value)
        if self.policy is not None:
            body = self.policy.block(body)
        key = _hash(body)
        self.blocks.setdefault(key, body)
        return key

    def refs(self, values: Mapping[str, Any]) -> str:
        """Content attributes -> their references as stored (JSON), each value redacted into its blocks."""
        out: Refs = {}
        for key, value in values.items():
            items = json_value(value) if isinstance(value, str) and value.startswith("[") else None
            if isinstance(items, list) and items and all(isinstance(i, dict) for i in items):
                out[key] = [self._message(item) for item in items]
            elif (isinstance(value, str) and len(value) <= INLINE_CHARS) or isinstance(value, (bool, int, float)):
                out[key] = {"v": self.policy.value(value) if self.policy is not None else value}
            else:
                out[key] = self._block(value).hex()
        return _dumps(out)

    def _message(self, message: dict[str, Any]) -> Item:
        """An output message's reference: its role and content are the message a later request re-sends."""
        keys = list(message)
        if keys[: len(_MESSAGE_CORE)] != list(_MESSAGE_CORE) or len(keys) == len(_MESSAGE_CORE):
            return self._block(message).hex()
        extra = {k: message[k] for k in keys[len(_MESSAGE_CORE) :]}
        core = self._block({k: message[k] for k in _MESSAGE_CORE}).hex()
        return {"b": core, "x": self.policy.value(extra) if self.policy is not None else extra}

    def add(
        self, trace_id: str, span_id: str, payload: dict[str, Any] | None, outputs: Mapping[str, Any] | None = None
    ) -> None:
        """One model call's content: its request ``payload`` and its ``outputs`` attributes (either may be absent)."""
        response = self.refs(outputs) if outputs else None
        if payload is None:
            key = call_key(trace_id, span_id)
            self.contexts.append(_CONTEXT_ROW(key, trace_id, span_id, "null", None, None, None, 0, response))
            return
        fields = {k: v for k, v in payload.items() if k not in _SPLIT_KEYS}
        envelope = {"order": list(payload), "fields": self.policy.value(fields) if self.policy else fields}
        system = self._block(payload["system"]) if "system" in payload else None
        tools = self._block(payload["tools"]) if "tools" in payload else None
        messages = "".join(self._block(m).hex() for m in payload["messages"]) if "messages" in payload else None
        size = len(_dumps(payload).encode())
        key = call_key(trace_id, span_id)
        row = _CONTEXT_ROW(key, trace_id, span_id, _dumps(envelope), system, tools, messages, size, response)
        self.contexts.append(row)


def _bodies(con: duckdb.DuckDBPyConnection, keys: list[bytes]) -> dict[bytes, Any]:
    if not keys:
        return {}
    rows = con.execute(BLOCKS, [list(set(keys))]).fetchall()
    return {bytes(key): json.loads(body) for key, body in rows}


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
    keys = [call_key(trace_id, sid) for sid, _, _ in spans]
    responses = dict(con.execute(CALL_RESPONSES, [keys]).fetchall()) if keys else {}  # None: nothing answered
    parsed = {sid: [json.loads(r) for r in (refs, responses.get(sid)) if r] for sid, _, refs in spans}
    bodies = _bodies(con, [k for refs in parsed.values() for p in refs for k in _ref_keys(p)])
    out: dict[str, dict[str, Any]] = {}
    for sid, attributes, _ in spans:
        attrs = json.loads(attributes) if attributes else {}
        for p in parsed[sid]:
            attrs.update(_resolved(p, bodies))
        out[sid] = attrs
    return out


@dataclass(frozen=True, slots=True)
class CapturedTurn:
    """One model call's captured request payload and response (each None when not captured)."""

    request: dict[str, Any] | None
    response: Any


# The lookups of a rebuild and of a trace's answers, each through a table's key (its ART index).
CALL_CONTEXT = "SELECT envelope, system_block, tools_block, messages, response FROM contexts WHERE call = ?"
CALL_RESPONSES = "SELECT span_id, response FROM contexts WHERE call IN (SELECT unnest(?))"  # one filter: an index join
BLOCKS = "SELECT hash, body FROM content_blocks WHERE hash IN (SELECT unnest(?))"


def _context_row(con: duckdb.DuckDBPyConnection, trace_id: str, span_id: str) -> tuple[Any, ...] | None:
    return con.execute(CALL_CONTEXT, [call_key(trace_id, span_id)]).fetchone()


def load_turn(con: duckdb.DuckDBPyConnection, trace_id: str, span_id: str) -> CapturedTurn | None:
    """The exact request and response captured for one model-call span, or None if neither was.

    A span that captured none but reports a billed call another span captured
    (``ledger.dedup``: the SDK's own span beside an instrumentation's) gives that one's.
    """
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
    envelope, response_refs = json.loads(row[0]), row[4]
    system, tools = (bytes(key) if key is not None else None for key in row[1:3])
    message_blocks = _message_keys(row[3] or "")
    refs: Refs = json.loads(response_refs) if response_refs else {}
    bodies = _bodies(con, [k for k in (system, tools, *message_blocks, *_ref_keys(refs)) if k])
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
    turn = load_turn(con, trace_id, span_id)
    return turn.request if turn is not None else None


def load_response(con: duckdb.DuckDBPyConnection, trace_id: str, span_id: str) -> Any:
    """What the model answered on one model-call span (its output messages), or None if not captured."""
    turn = load_turn(con, trace_id, span_id)
    return turn.response if turn is not None else None
