"""Responses and tool content in the content store: exact rebuild, redaction, dedup, old ledgers, indexes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ledger import queries as q
from ledger import schema
from ledger.content import (
    INLINE_CHARS,
    RUN_BLOCK_ROWS,
    RUN_BLOCKS,
    RUN_CONTEXTS,
    RUN_RESPONSES,
    SHARED_BLOCKS,
    ContextRows,
    load_context,
    load_response,
    trace_attributes,
)
from ledger.ingest import ingest
from ledger.rows import prepare
from ledger.spans import SpanRecord
from ledger.store import open_ledger
from ledger.write import write
from tests.ledger.old_content_layout import OldContentRows
from tests.ledger.test_billed_once import charges, official_span, sdk_span

T0 = 1_790_000_000_000_000_000
MS = 1_000_000
TRACE, CHAT, TOOL = "a" * 32, "b" * 16, "c" * 16
CHAT_ATTRS = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic", "gen_ai.request.model": "claude-sonnet-5",
              "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 20}  # fmt: skip
ANSWER = [{"role": "assistant", "content": [{"type": "text", "text": "Rolled over: " + "five days " * 20},
           {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"who": "alice", "n": 2}}],
           "finish_reason": "tool_use"}]  # fmt: skip
LONG_RESULT = "balance row " * (INLINE_CHARS // 8)


def _span(span_id: str, attrs: dict[str, Any], name: str = "chat claude-sonnet-5") -> SpanRecord:
    return SpanRecord(TRACE, span_id, name, T0, T0 + 50 * MS, "", "CLIENT", attributes=attrs)


# Each third-party shape: (its output attributes, the response they stand for).
SHAPES = {
    "genai": ({"gen_ai.output.messages": json.dumps(ANSWER)}, ANSWER),
    "openinference-flattened": (
        {"openinference.span.kind": "LLM", "llm.output_messages.0.message.role": "assistant",
         "llm.output_messages.0.message.content": "It is " + "sunny " * 40},
        [{"role": "assistant", "content": "It is " + "sunny " * 40}],
    ),
    "openinference-output-value": (
        {"openinference.span.kind": "LLM", "output.mime_type": "application/json",
         "output.value": json.dumps({"id": "msg_9", "content": [{"type": "text", "text": "hi " * 50}], "stop_reason": "end_turn"})},
        {"id": "msg_9", "content": [{"type": "text", "text": "hi " * 50}], "stop_reason": "end_turn"},
    ),
    "traceloop": (
        {"gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "Done. " * 30,
         "gen_ai.completion.0.finish_reason": "stop"},
        [{"role": "assistant", "content": "Done. " * 30, "finish_reason": "stop"}],
    ),
}  # fmt: skip


@pytest.mark.parametrize("shape", SHAPES)
def test_a_response_is_rebuilt_exactly_and_leaves_the_span_attributes(shape: str) -> None:
    outputs, expected = SHAPES[shape]
    attrs = {**CHAT_ATTRS, **outputs}
    con = open_ledger(":memory:")
    assert not ingest(con, [_span(CHAT, attrs)]).rejected
    response = load_response(con, TRACE, CHAT)
    assert json.dumps(response) == json.dumps(expected)  # equal, key order included
    stored = json.loads(con.execute("SELECT attributes FROM spans").fetchone()[0])
    moved = [k for k in outputs if k not in ("openinference.span.kind", "output.mime_type")]
    assert not set(moved) & set(stored)  # only references stay with the span
    restored = trace_attributes(con, TRACE)[CHAT]
    assert {
        k: json.loads(v) if k in ("gen_ai.output.messages", "output.value") else v for k, v in restored.items()
    } == {k: json.loads(v) if k in ("gen_ai.output.messages", "output.value") else v for k, v in attrs.items()}


def test_tool_arguments_and_results_are_content_addressed_each_distinct_block_once_per_run() -> None:
    con = open_ledger(":memory:")
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
            "gen_ai.tool.call.arguments": '{"who": "alice"}', "gen_ai.tool.call.result": LONG_RESULT}  # fmt: skip
    spans = [_span(TOOL, tool, "execute_tool lookup"), _span("d" * 16, tool, "execute_tool lookup")]
    ingest(con, spans)
    blocks = con.execute("SELECT count(*) FROM run_blocks WHERE body = ?", [json.dumps(LONG_RESULT)]).fetchone()
    assert blocks == (1,)  # two spans of one run, one block
    for span_id in (TOOL, "d" * 16):
        assert trace_attributes(con, TRACE)[span_id] == tool
    tree = q.run(con, q.run_trace_tree(TRACE))
    assert tree["tool_result"].tolist() == [LONG_RESULT, LONG_RESULT]
    assert tree["tool_arguments"].tolist() == ['{"who": "alice"}'] * 2


def test_our_answer_and_the_next_request_share_the_message_block() -> None:
    rows = ContextRows()
    message = {"role": "assistant", "content": [{"type": "text", "text": "x" * 200}]}
    rows.add(TRACE, CHAT, None, {"gen_ai.output.messages": json.dumps([{**message, "finish_reason": "end_turn"}])})
    rows.add(TRACE, "d" * 16, {"model": "m", "messages": [{"role": "user", "content": "q"}, message]})
    # Two blocks: the user's message, and the answer stored once (its finish_reason beside the reference).
    assert sorted(rows.run_blocks.values()) == sorted(
        json.dumps(m, separators=(",", ":")) for m in (message, {"role": "user", "content": "q"})
    )


def test_secrets_in_a_response_and_a_tool_result_never_reach_the_database(db_path) -> None:
    secret_key, email = "sk-ant-api03-SECRETSECRETSECRET123", "jane.doe@example.com"
    answer = [{"role": "assistant", "content": [{"type": "text", "text": f"Use {secret_key} and mail {email}"}]}]
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.result": f"owner {email} " + "row " * 400,
            "gen_ai.tool.call.arguments": json.dumps({"api_key": secret_key})}  # fmt: skip
    con = open_ledger(db_path)
    ingest(con, [_span(CHAT, {**CHAT_ATTRS, "gen_ai.output.messages": json.dumps(answer)}), _span(TOOL, tool)])
    con.execute("CHECKPOINT")
    shown = json.dumps([load_response(con, TRACE, CHAT), trace_attributes(con, TRACE)])
    stored = json.dumps(con.execute("SELECT hex(hash), body FROM content_blocks").fetchall())
    stored += json.dumps(con.execute("SELECT hex(hash), body FROM run_blocks").fetchall())
    stored += json.dumps(con.execute("SELECT attributes, content_refs FROM spans").fetchall())
    con.close()
    raw = db_path.read_bytes()
    for secret in (secret_key, email):
        assert secret not in shown and secret not in stored and secret.encode() not in raw
    assert "[REDACTED" in shown


def test_two_copies_of_a_call_with_responses_are_charged_once_and_either_gives_the_answer() -> None:
    con = open_ledger(":memory:")
    sdk, official = sdk_span("1", "2"), official_span("1", "3", "2")
    for span in (sdk, official):
        span.attributes["gen_ai.output.messages"] = json.dumps(ANSWER)
    ingest(con, [sdk, official])
    assert len(charges(con)) == 1
    assert (
        load_response(con, sdk.trace_id, sdk.span_id)
        == load_response(con, official.trace_id, official.span_id)
        == ANSWER
    )


def test_a_ledger_from_before_migration_10_opens_and_rebuilds_its_old_contexts(db_path, monkeypatch) -> None:
    payload = {"model": "m", "system": "be brief", "messages": [{"role": "user", "content": "hi"}]}
    rows = OldContentRows()
    rows.add(TRACE, CHAT, payload)
    old = [m for m in schema.MIGRATIONS if m[0] < 10]
    with monkeypatch.context() as m:
        m.setattr(schema, "MIGRATIONS", old)
        con = open_ledger(db_path)
        assert schema.schema_version(con) == 9
        rows.insert(con, with_response=False)
        con.execute(
            "INSERT INTO spans (trace_id, span_id, parent_span_id, name, kind, start_time, end_time, status_code, "
            "attributes, ingested_at) VALUES (?, ?, '', 'execute_tool t', 'INTERNAL', make_timestamp_ns(?), "
            "make_timestamp_ns(?), 'UNSET', ?, now())",
            [TRACE, TOOL, T0, T0 + MS, json.dumps({"gen_ai.tool.call.result": "old inline result"})],
        )
        con.close()
    con = open_ledger(db_path)  # migrations 10 and 13 run now
    assert schema.schema_version(con) == max(v for v, _, _ in schema.MIGRATIONS)
    assert load_context(con, TRACE, CHAT) == payload and load_response(con, TRACE, CHAT) is None
    assert q.run(con, q.run_trace_tree(TRACE))["tool_result"].tolist() == ["old inline result"]
    assert trace_attributes(con, TRACE)[TOOL] == {"gen_ai.tool.call.result": "old inline result"}


def _plan(con, sql: str, params: list[Any]) -> str:  # type: ignore[no-untyped-def]
    return str(con.execute("EXPLAIN ANALYZE " + sql, params).fetchall()[0][1])


def test_a_turn_is_rebuilt_through_the_indexes_not_a_table_scan() -> None:
    """The lookups ``load_turn`` and ``trace_attributes`` make: each one an index scan (a run's rows by
    its trace id, shared blocks by their key), so their cost does not grow with the ledger."""
    con = open_ledger(":memory:")
    spans = [
        _span(
            f"{i:016x}",
            {
                **CHAT_ATTRS,
                "turnledger.request.body": json.dumps(
                    {"system": f"prompt {i % 3}", "messages": [{"role": "user", "content": str(i)}]}
                ),
            },
        )
        for i in range(1, 200)
    ]
    ingest(
        con,
        [
            SpanRecord(f"{i:032x}", s.span_id, s.name, s.start_ns, s.end_ns, attributes=s.attributes)
            for i, s in enumerate(spans, 1)
        ],
    )
    trace = f"{7:032x}"
    hashes = [h for (h,) in con.execute("SELECT hash FROM content_blocks LIMIT 3").fetchall()]
    assert len(hashes) == 3  # the three system prompts, shared by the runs
    for sql, params in (
        (RUN_CONTEXTS, [trace]),
        (RUN_RESPONSES, [trace]),
        (RUN_BLOCK_ROWS, [trace]),
        (RUN_BLOCKS, [trace]),
        (SHARED_BLOCKS, [hashes]),
    ):
        plan = _plan(con, sql, params)
        assert "Index Scan" in plan and "Sequential Scan" not in plan, plan


def _turn(span_id: str, history: list[dict[str, Any]], trace: str = TRACE) -> SpanRecord:
    body = {"model": "claude-sonnet-5", "system": "be brief", "messages": history}
    return SpanRecord(trace, span_id, "chat claude-sonnet-5", T0, T0 + MS, "", "CLIENT",
                      attributes={**CHAT_ATTRS, "turnledger.request.body": json.dumps(body)})  # fmt: skip


def test_a_run_resending_its_history_stores_each_message_once_whether_batches_coalesce_or_not() -> None:
    """Each turn re-sends the run's history: the blocks a run already holds are not inserted again,
    from another commit or from another batch of the same commit (the server coalesces batches);
    another run sending the same message gets its own block, the shared system prompt does not."""
    history = [{"role": "user", "content": f"message {i} " * 40} for i in range(6)]
    turns = [_turn(f"{i + 1:016x}", history[: 2 * i + 2]) for i in range(3)]
    other = _turn("f" * 16, history[:2], trace="e" * 32)
    apart, together = open_ledger(":memory:"), open_ledger(":memory:")
    for span in turns:  # one commit per turn
        ingest(apart, [span])
    write(together, [prepare([turns[0]]), prepare(turns[1:]), prepare([other])])  # one commit, three batches
    ingest(apart, [other])
    for con in (apart, together):
        per_run = con.execute("SELECT trace_id, count(*), count(DISTINCT hash) FROM run_blocks GROUP BY 1 ORDER BY 1")
        assert per_run.fetchall() == [(TRACE, 6, 6), ("e" * 32, 2, 2)]
        assert con.execute("SELECT count(*) FROM content_blocks").fetchone() == (1,)
        for span in (*turns, other):
            sent = json.loads(span.attributes["turnledger.request.body"])
            assert load_context(con, span.trace_id, span.span_id) == sent


def test_a_turn_is_rebuilt_when_its_blocks_rows_moved_between_the_two_reads(monkeypatch) -> None:
    """Bodies are read by row id after the keys: if the rows moved in between (a checkpoint after a
    delete renumbers them), the run's blocks are read by trace instead; the turn comes back whole."""
    import ledger.content as content

    history = [{"role": "user", "content": f"message {i} " * 40} for i in range(4)]
    con = open_ledger(":memory:")
    ingest(con, [_turn("1" * 16, history)])
    sent = json.loads(_turn("1" * 16, history).attributes["turnledger.request.body"])
    monkeypatch.setattr(content, "BLOCKS_BY_ROW", content.BLOCKS_BY_ROW.replace("rowid IN", "rowid + 1000 IN"))
    assert load_context(con, TRACE, "1" * 16) == sent
