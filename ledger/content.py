"""Content-addressed storage of captured request payloads.

A payload (``{"model", "system", "tools", "messages", ...}``) is split into
blocks stored once by hash: the system prompt, the tool list, and each message.
A turn's message list is a chain of nodes, ``node = H(prev_node, message)``, so
turn N+1 adds only the nodes for its new messages and the store grows with the
number of distinct messages, not with turns × history. Reassembly walks the
chain back and yields a value equal (as JSON) to what was sent.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import duckdb

__all__ = ["ContextRows", "load_context", "split_payload"]

_SPLIT_KEYS = ("system", "tools", "messages")


def _dumps(value: Any) -> str:
    # Key order is kept (not sorted): the exact payload is what gets reproduced,
    # and an ordering change is itself a cache invalidator worth seeing.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _hash(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


@dataclass
class ContextRows:
    """Rows one or more payloads add to the content tables (duplicates are fine)."""

    blocks: dict[str, str] = field(default_factory=dict)  # hash -> body
    nodes: dict[str, tuple[str | None, str]] = field(default_factory=dict)  # node -> (prev, block)
    contexts: list[tuple[str, str, str, str | None, str | None, str | None, int]] = field(default_factory=list)

    def _block(self, value: Any) -> str:
        body = _dumps(value)
        h = _hash(body)
        self.blocks.setdefault(h, body)
        return h

    def add(self, trace_id: str, span_id: str, payload: dict[str, Any]) -> None:
        envelope = {"order": list(payload), "fields": {k: v for k, v in payload.items() if k not in _SPLIT_KEYS}}
        system = self._block(payload["system"]) if "system" in payload else None
        tools = self._block(payload["tools"]) if "tools" in payload else None
        node: str | None = None
        if "messages" in payload:
            node = _hash("root")
            self.nodes.setdefault(node, (None, self._block(None)))
            for message in payload["messages"]:
                block = self._block(message)
                nxt = _hash(node + block)
                self.nodes.setdefault(nxt, (node, block))
                node = nxt
        size = len(_dumps(payload).encode())
        self.contexts.append((trace_id, span_id, _dumps(envelope), system, tools, node, size))


def split_payload(trace_id: str, span_id: str, payload: dict[str, Any]) -> ContextRows:
    rows = ContextRows()
    rows.add(trace_id, span_id, payload)
    return rows


def load_context(con: duckdb.DuckDBPyConnection, trace_id: str, span_id: str) -> dict[str, Any] | None:
    """The exact payload captured for one model-call span, or None if none was."""
    row = con.execute(
        "SELECT envelope, system_block, tools_block, messages_node FROM contexts WHERE trace_id = ? AND span_id = ?",
        [trace_id, span_id],
    ).fetchone()
    if row is None:
        return None
    envelope, system, tools, node = json.loads(row[0]), row[1], row[2], row[3]
    wanted = [h for h in (system, tools) if h]
    bodies = dict(
        con.execute("SELECT hash, body FROM content_blocks WHERE hash IN (SELECT unnest(?))", [wanted]).fetchall()
    )
    messages: list[Any] = []
    if node:
        chain = con.execute(
            """
            WITH RECURSIVE chain(node, prev, block, depth) AS (
                SELECT node, prev, block, 0 FROM message_chain WHERE node = ?
                UNION ALL
                SELECT m.node, m.prev, m.block, c.depth + 1
                FROM message_chain m JOIN chain c ON m.node = c.prev
            )
            SELECT b.body FROM chain c JOIN content_blocks b ON b.hash = c.block
            WHERE c.prev IS NOT NULL ORDER BY c.depth DESC
            """,
            [node],
        ).fetchall()
        messages = [json.loads(body) for (body,) in chain]
    parts = {
        "system": json.loads(bodies[system]) if system else None,
        "tools": json.loads(bodies[tools]) if tools else None,
        "messages": messages,
    }
    fields = envelope["fields"]
    return {k: parts[k] if k in parts else fields[k] for k in envelope["order"]}
