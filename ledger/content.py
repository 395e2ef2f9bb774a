"""Content-addressed storage of captured request payloads.

A payload (``{"model", "system", "tools", "messages", ...}``) is split into
blocks stored once by hash: the system prompt, the tool list and each message.
A turn's message list is a chain of nodes, ``node = H(prev_node, message)``,
kept per trace: turn N+1 adds only the nodes of its new messages, so the store
grows with the number of distinct messages, not with turns x history.
Reassembly reads the run's nodes, walks back from the turn's tail and yields a
value equal (as JSON, key order included) to what was sent.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from .redact import Redactor
from .tables import table

if TYPE_CHECKING:  # the decoder processes build content rows and never load DuckDB
    import duckdb

__all__ = ["ContextRows", "load_context"]

_SPLIT_KEYS = ("system", "tools", "messages")
_ROOT = "root"


def _dumps(value: Any) -> str:
    # Key order is kept (not sorted): the exact payload is what gets reproduced,
    # and an ordering change is itself a cache invalidator worth seeing. orjson
    # writes the same compact form ~10x faster (every turn re-sends its history);
    # the stdlib takes what orjson refuses (integers past 64 bits).
    try:
        return orjson.dumps(value).decode()
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _hash(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


_CONTEXT_ROW = table("contexts").compile_row(
    "trace_id, span_id, envelope, system, tools, node, size",
    {
        "trace_id": "trace_id", "span_id": "span_id", "envelope": "envelope", "system_block": "system",
        "tools_block": "tools", "messages_node": "node", "payload_bytes": "size",
    },
)  # fmt: skip


@dataclass
class ContextRows:
    """Rows that payloads add to the content tables (duplicates are fine: INSERT OR IGNORE)."""

    policy: Redactor | None = None  # None: blocks stored as received
    blocks: dict[str, str] = field(default_factory=dict)  # hash -> body
    nodes: dict[tuple[str, str], tuple[str | None, str]] = field(default_factory=dict)  # (trace, node) -> (prev, block)
    contexts: list[tuple[Any, ...]] = field(default_factory=list)  # rows of the contexts table

    def _block(self, value: Any) -> str:
        body = _dumps(value)
        if self.policy is not None:
            body = self.policy.block(body)
        h = _hash(body)
        self.blocks.setdefault(h, body)
        return h

    def add(self, trace_id: str, span_id: str, payload: dict[str, Any]) -> None:
        fields = {k: v for k, v in payload.items() if k not in _SPLIT_KEYS}
        envelope = {"order": list(payload), "fields": self.policy.value(fields) if self.policy else fields}
        system = self._block(payload["system"]) if "system" in payload else None
        tools = self._block(payload["tools"]) if "tools" in payload else None
        node: str | None = None
        if "messages" in payload:
            node = _ROOT
            for message in payload["messages"]:
                block = self._block(message)
                nxt = _hash(node + block)
                self.nodes.setdefault((trace_id, nxt), (node, block))
                node = nxt
        size = len(_dumps(payload).encode())
        self.contexts.append(_CONTEXT_ROW(trace_id, span_id, _dumps(envelope), system, tools, node, size))


def _bodies(con: duckdb.DuckDBPyConnection, hashes: list[str]) -> dict[str, Any]:
    if not hashes:
        return {}
    rows = con.execute("SELECT hash, body FROM content_blocks WHERE hash IN (SELECT unnest(?))", [hashes]).fetchall()
    return {h: json.loads(body) for h, body in rows}


def _context_row(con: duckdb.DuckDBPyConnection, trace_id: str, span_id: str) -> tuple[Any, ...] | None:
    return con.execute(
        "SELECT envelope, system_block, tools_block, messages_node FROM contexts WHERE trace_id = ? AND span_id = ?",
        [trace_id, span_id],
    ).fetchone()


def load_context(con: duckdb.DuckDBPyConnection, trace_id: str, span_id: str) -> dict[str, Any] | None:
    """The exact payload captured for one model-call span, or None if none was.

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
    envelope, system, tools, tail = json.loads(row[0]), row[1], row[2], row[3]
    message_blocks: list[str] = []
    if tail and tail != _ROOT:
        links = {
            node: (prev, block)
            for node, prev, block in con.execute(
                "SELECT node, prev, block FROM message_chain WHERE trace_id = ?", [trace_id]
            ).fetchall()
        }
        node = tail
        while node != _ROOT:
            node, block = links[node]
            message_blocks.append(block)
        message_blocks.reverse()
    bodies = _bodies(con, [h for h in (system, tools, *message_blocks) if h])
    parts: dict[str, Callable[[], Any]] = {
        "system": lambda: bodies[system] if system else None,
        "tools": lambda: bodies[tools] if tools else None,
        "messages": lambda: [bodies[b] for b in message_blocks],
    }
    fields = envelope["fields"]
    return {k: parts[k]() if k in parts else fields[k] for k in envelope["order"]}
