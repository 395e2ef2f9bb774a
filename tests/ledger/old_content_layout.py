"""Captured requests written the way turnledger stored them before migration 13, for migration tests.

Blocks keyed by 32-char hex hashes; a turn's messages a per-trace chain of nodes
(``node = H(prev, block)``, 64-bit, from ``"root"``) with the call's tail node on
its contexts row. Unredacted, as ``ContextRows(policy=None)`` stored them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import orjson

from ledger.content import ContextRows

_SPLIT_KEYS = ("system", "tools", "messages")


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


@dataclass
class OldContentRows:
    blocks: dict[str, str] = field(default_factory=dict)  # hex hash -> body
    chain: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)  # (trace, node) -> (prev, block)
    contexts: list[tuple[Any, ...]] = field(default_factory=list)  # its 8 columns from migration 10 to 12

    def _block(self, value: Any) -> str:
        body = _dumps(value)
        key = hashlib.blake2b(body.encode(), digest_size=16).hexdigest()
        self.blocks.setdefault(key, body)
        return key

    def add(
        self, trace_id: str, span_id: str, payload: dict[str, Any] | None, outputs: dict[str, Any] | None = None
    ) -> None:
        """One call's rows; ``outputs`` (migration 10's answers) are referenced as they are now, in hex."""
        response = None
        if outputs:
            answers = ContextRows()
            response = answers.refs(trace_id, outputs)
            self.blocks.update({key.hex(): body for (_, key), body in answers.run_blocks.items()})
        if payload is None:
            self.contexts.append((trace_id, span_id, "null", None, None, None, 0, response))
            return
        fields = {k: v for k, v in payload.items() if k not in _SPLIT_KEYS}
        envelope = _dumps({"order": list(payload), "fields": fields})
        system = self._block(payload["system"]) if "system" in payload else None
        tools = self._block(payload["tools"]) if "tools" in payload else None
        node = None
        if "messages" in payload:
            node = "root"
            for message in payload["messages"]:
                block = self._block(message)
                nxt = hashlib.blake2b((node + block).encode(), digest_size=8).hexdigest()
                self.chain.setdefault((trace_id, nxt), (node, block))
                node = nxt
        size = len(_dumps(payload).encode())
        self.contexts.append((trace_id, span_id, envelope, system, tools, node, size, response))

    def insert(self, con: Any, *, with_response: bool) -> None:
        """Into a ledger whose content tables are still the old ones (``with_response``: migration 10 ran)."""
        con.executemany("INSERT INTO content_blocks VALUES (?, ?)", list(self.blocks.items()))
        con.executemany("INSERT INTO message_chain VALUES (?, ?, ?, ?)", [(*k, *v) for k, v in self.chain.items()])
        rows = self.contexts if with_response else [r[:-1] for r in self.contexts]
        con.executemany(f"INSERT INTO contexts VALUES ({', '.join('?' * len(rows[0]))})", rows)
