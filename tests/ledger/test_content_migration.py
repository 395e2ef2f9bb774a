"""Migrations 13 and 19: a ledger written with the old content layout opens and rebuilds every captured turn."""

from __future__ import annotations

import json

from ledger import queries as q
from ledger import schema
from ledger.content import load_context, load_response, trace_attributes
from ledger.ingest import ingest
from ledger.spans import SpanRecord
from ledger.store import open_ledger
from tests.ledger.old_content_layout import OldContentRows

T0 = 1_790_000_000_000_000_000
MS = 1_000_000
SYSTEM = [{"type": "text", "text": "You triage tickets. " * 30}]
TOOLS = [{"name": "lookup", "description": "Find a ticket", "input_schema": {"type": "object"}}]
CHAT = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic", "gen_ai.request.model": "claude-sonnet-5",
        "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 20}  # fmt: skip
LONG_RESULT = "ticket row " * 200


def _history(turns: int) -> list[dict]:
    messages: list[dict] = [{"role": "user", "content": "Close the stale tickets."}]
    for i in range(turns):
        messages.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "lookup", "input": {"n": i}}]})  # fmt: skip
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": f"row {i}"}]})  # fmt: skip
    return messages


def _payload(turn: int, **extra: object) -> dict:
    return {"model": "claude-sonnet-5", "max_tokens": 512, "system": SYSTEM, "tools": TOOLS,
            "messages": _history(turn), **extra}  # fmt: skip


# What the old file holds: two runs sharing the system prompt and tools, an answer, a call whose
# request has no messages (and one with an empty list), a call with an answer and no request.
CALLS = {
    ("a" * 32, f"{i + 1:016x}"): (_payload(i), None) for i in range(4)
} | {
    ("b" * 32, "1" * 16): (_payload(2, temperature=0), [{"role": "assistant", "content": "done", "finish_reason": "end_turn"}]),
    ("b" * 32, "2" * 16): ({"model": "m", "system": "brief"}, None),
    ("b" * 32, "3" * 16): ({"messages": [], "model": "m"}, None),
    ("b" * 32, "4" * 16): (None, [{"role": "assistant", "content": "final " * 300}]),
}  # fmt: skip


def _old_ledger(db_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    rows = OldContentRows()
    for (trace, span), (payload, answer) in CALLS.items():
        rows.add(trace, span, payload, {"gen_ai.output.messages": json.dumps(answer)} if answer else None)
    tool_refs = OldContentRows()
    refs = {"gen_ai.tool.call.result": tool_refs._block(LONG_RESULT)}  # a tool result too long to stay inline
    with monkeypatch.context() as m:
        m.setattr(schema, "MIGRATIONS", [x for x in schema.MIGRATIONS if x[0] < 13])
        con = open_ledger(db_path)
        assert schema.schema_version(con) == 12
        rows.insert(con, with_response=True)
        con.executemany("INSERT INTO content_blocks VALUES (?, ?)", list(tool_refs.blocks.items()))
        con.execute(
            "INSERT INTO spans (trace_id, span_id, parent_span_id, name, kind, start_time, end_time, status_code, "
            "attributes, ingested_at, content_refs) VALUES (?, ?, '', 'execute_tool lookup', 'INTERNAL', "
            "make_timestamp_ns(?), make_timestamp_ns(?), 'UNSET', '{}', now(), ?)",
            ["b" * 32, "9" * 16, T0, T0 + MS, json.dumps(refs)],
        )
        con.close()


def test_an_old_ledger_opens_and_every_captured_turn_is_rebuilt(db_path, monkeypatch) -> None:
    _old_ledger(db_path, monkeypatch)
    con = open_ledger(db_path)  # migrations 13 and 19 run now
    assert schema.schema_version(con) >= 19
    for (trace, span), (payload, answer) in CALLS.items():
        got = load_context(con, trace, span)
        assert json.dumps(got) == json.dumps(payload)  # equal, key order included
        assert load_response(con, trace, span) == answer
    assert trace_attributes(con, "b" * 32)["9" * 16] == {"gen_ai.tool.call.result": LONG_RESULT}
    assert q.run(con, q.run_trace_tree("b" * 32))["tool_result"].tolist() == [LONG_RESULT]
    tables = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert "message_chain" not in tables
    # What runs share stays shared (the two system prompts, the tool list); the rest is per run.
    shared = {json.loads(b) for (b,) in con.execute("SELECT body FROM content_blocks").fetchall() if b.startswith('"')}
    assert con.execute("SELECT count(*) FROM content_blocks").fetchone()[0] == 3 and shared == {"brief"}
    per_run = dict(con.execute("SELECT trace_id, count(*) FROM run_blocks GROUP BY 1").fetchall())
    assert per_run == {"a" * 32: 7, "b" * 32: 8}  # b: 5 messages, 2 answers, the tool result
    con.close()


def test_a_run_continued_after_migration_stores_only_its_new_blocks(db_path, monkeypatch) -> None:
    _old_ledger(db_path, monkeypatch)
    con = open_ledger(db_path)
    count = "SELECT (SELECT count(*) FROM content_blocks), (SELECT count(*) FROM run_blocks)"
    shared, per_run = con.execute(count).fetchone()
    sent = _payload(5)  # run a's next call: the same system, tools and history, plus four new messages
    span = SpanRecord("a" * 32, "5" * 16, "chat claude-sonnet-5", T0, T0 + MS, "", "CLIENT",
                      attributes={**CHAT, "turnledger.request.body": json.dumps(sent)})  # fmt: skip
    assert not ingest(con, [span]).rejected
    assert con.execute(count).fetchone() == (shared, per_run + 4)
    assert json.dumps(load_context(con, "a" * 32, "5" * 16)) == json.dumps(sent)
    con.close()
