"""Captured contexts: exact reproduction, redaction at the door, linear storage."""

from __future__ import annotations

import json
import zlib

from collector.demo.samples import SYSTEM, TOOLS, Trace
from ledger.content import load_context
from ledger.ingest import ingest
from ledger.store import open_ledger


def _long_run(key: str, turns: int) -> tuple[list, list[dict]]:
    """A run of `turns` model calls; each call re-sends the whole history plus one exchange."""
    t = Trace(key)
    messages = [{"role": "user", "content": "Summarise every open ticket for acme."}]
    payloads = []
    for i in range(turns):
        payload = {"model": "claude-opus-5", "max_tokens": 4096, "system": SYSTEM, "tools": TOOLS,
                   "messages": [dict(m) for m in messages], "temperature": 0}  # fmt: skip
        payloads.append(payload)
        t.chat("claude-opus-5", (50, 0, 1000 + 300 * i, 120), payload=payload)
        messages.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "search_docs", "input": {"q": f"ticket page {i}"}}]})  # fmt: skip
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"ticket {i}: " + "details " * 60}]})  # fmt: skip
    return t.finish("completed"), payloads


def test_context_is_reproduced_equal_as_json_value(ledger):
    spans, payloads = _long_run("exact", 6)
    ingest(ledger, spans)
    chats = [s for s in spans if s.name.startswith("chat")]
    for span, sent in zip(chats, payloads, strict=True):
        got = load_context(ledger, span.trace_id, span.span_id)
        assert got == sent
        assert list(got) == list(sent)  # key order kept too: an ordering change is a cache invalidator


def test_no_context_when_capture_was_off(ledger, load):
    load("openai_style")  # the one sample span without a captured request
    span_id = ledger.execute("SELECT span_id, trace_id FROM charges LIMIT 1").fetchone()
    assert load_context(ledger, span_id[1], span_id[0]) is None


def _stored_bytes(con) -> int:
    """What the content rows hold. A call's message list repeats the one before it plus its new
    messages: its zstd column stores that repeat as a back-reference, so the lists count here
    compressed in row order (zlib standing in for DuckDB's zstd)."""
    stored = con.execute(
        """SELECT (SELECT coalesce(sum(octet_length(hash) + strlen(body)), 0) FROM content_blocks)
                + (SELECT coalesce(sum(octet_length(hash) + strlen(body) + 32), 0) FROM run_blocks)
                + (SELECT coalesce(sum(strlen(envelope) + 96), 0) FROM contexts)"""
    ).fetchone()[0]
    lists = "".join(m for (m,) in con.execute("SELECT messages FROM contexts ORDER BY rowid").fetchall() if m)
    return int(stored) + len(zlib.compress(lists.encode()))


def test_context_storage_grows_linearly_with_turns(tmp_path):
    sizes = {}
    for turns in (20, 40):
        con = open_ledger(tmp_path / f"{turns}.duckdb")
        spans, payloads = _long_run(f"growth-{turns}", turns)
        ingest(con, spans)
        sizes[turns] = _stored_bytes(con), sum(len(json.dumps(p, separators=(",", ":"))) for p in payloads)
        con.close()
    stored20, naive20 = sizes[20]
    stored40, naive40 = sizes[40]
    # Full histories grow ~quadratically (x4 for x2 turns); the store grows ~linearly (x2).
    assert naive40 / naive20 > 3.5
    assert stored40 / stored20 < 2.2
    assert stored40 < naive40 / 10


def test_secrets_in_captured_payloads_never_reach_the_database(ledger, db_path):
    t = Trace("secrets")
    payload = {
        "model": "claude-opus-5",
        "system": "key sk-ant-api03-SECRETSECRETSECRET123 for ops",
        "messages": [
            {"role": "user", "content": "Email jane.doe@example.com, card 4111 1111 1111 1111"},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "charge",
                        "input": {"card_number": "4242424242424242", "note": "x"},
                    }
                ],
            },
        ],
    }
    t.chat("claude-opus-5", (10, 0, 0, 5), payload=payload)
    ingest(ledger, t.finish("completed"))
    ledger.execute("CHECKPOINT")
    raw = db_path.read_bytes()
    dumped = json.dumps(ledger.execute("SELECT hex(hash), body FROM content_blocks").fetchall())
    dumped += json.dumps(ledger.execute("SELECT hex(hash), body FROM run_blocks").fetchall())
    for secret in ("sk-ant-api03-SECRET", "jane.doe@example.com", "4111 1111 1111 1111", "4242424242424242"):
        assert secret not in dumped
        assert secret.encode() not in raw


def test_compacting_a_ledger_keeps_its_content_compressed(tmp_path):
    """``compact`` (what ``turnledger prune`` ends with) writes its copy in the ledger's storage format:
    in DuckDB's default one the content's zstd columns were stored uncompressed and the copy grew."""
    from ledger.retention import compact

    path = tmp_path / "ledger.duckdb"
    con = open_ledger(path)
    runs = [_long_run(f"compact-{i}", 12) for i in range(20)]
    for spans, _ in runs:
        ingest(con, spans)
    con.close()
    before, after = compact(path)
    con = open_ledger(path, read_only=True)
    compression = (
        "SELECT DISTINCT compression FROM pragma_storage_info(?) WHERE column_name = ? AND segment_type = 'VARCHAR'"
    )
    assert con.execute(compression, ["run_blocks", "body"]).fetchall() == [("ZSTD",)]
    assert after <= before, (before, after)
    spans, payloads = runs[7]
    chats = [s for s in spans if s.name.startswith("chat")]
    assert [load_context(con, s.trace_id, s.span_id) for s in chats] == payloads
    con.close()
