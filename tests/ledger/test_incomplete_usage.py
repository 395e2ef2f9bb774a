"""Usage that is part of a call's is flagged incomplete_usage: counted, listed, shown, never a cache break.

The issue's run: turn 1 writes 6,100 tokens to the cache (41 uncached, 67 output);
turn 2 is a LangChain streamed call whose instrumentation kept the classic
``message_delta`` usage only (input 0, output 96); turn 3 reads the 6,100 back.
Before the flag, turn 2 was judged "broken, 6,100 re-billed": money never charged.
"""

from __future__ import annotations

from ledger import conventions as c
from ledger import queries as q
from ledger.cache_diagnosis import BROKEN, CACHED, INCOMPLETE, WRITTEN, check_cache
from ledger.ingest import prepare, write
from ledger.report import build_report, format_report
from ledger.spans import SpanRecord
from ledger.store import open_ledger

MODEL = "claude-sonnet-4-6"
TRACE = "a" * 32
T0 = 1_790_000_000_000_000_000
S = 10**9
LANGCHAIN = "openinference.instrumentation.langchain"


def sdk_call(n: int, *, write: int = 0, read: int = 0) -> SpanRecord:
    attrs = {c.OPERATION_NAME: "chat", c.PROVIDER_NAME: "anthropic", c.REQUEST_MODEL: MODEL,
             c.RESPONSE_ID: f"msg_{n}", c.INPUT_TOKENS: 41 + write + read, c.OUTPUT_TOKENS: 67,
             "gen_ai.usage.cache_write.input_tokens": write, c.CACHE_READ_INPUT_TOKENS: read}  # fmt: skip
    return SpanRecord(TRACE, f"{n:016x}", f"chat {MODEL}", T0 + n * 10 * S, T0 + n * 10 * S + S, "f" * 16,
                      attributes=attrs, scope_name="com.anthropic.sdk.python")  # fmt: skip


def streamed_delta_only(n: int) -> SpanRecord:
    attrs = {"openinference.span.kind": "LLM", "llm.provider": "anthropic", "llm.model_name": MODEL,
             "llm.token_count.prompt": 0, "llm.token_count.completion": 96, "llm.token_count.total": 96}  # fmt: skip
    return SpanRecord(TRACE, f"{n:016x}", "ChatAnthropic", T0 + n * 10 * S, T0 + n * 10 * S + S, "f" * 16,
                      attributes=attrs, scope_name=LANGCHAIN)  # fmt: skip


def root() -> SpanRecord:
    return SpanRecord(
        TRACE, "f" * 16, "invoke_agent demo", T0, T0 + 60 * S, attributes={c.OPERATION_NAME: "invoke_agent"}
    )


def test_a_stream_with_output_and_no_input_is_flagged_counted_listed_and_not_a_cache_break():
    con = open_ledger(":memory:")
    batch = prepare([root(), sdk_call(1, write=6_100), streamed_delta_only(2), sdk_call(3, read=6_100)])
    write(con, [batch])
    assert [f for f in batch.flagged if "incomplete_usage" in f] == [f"{TRACE}/{2:016x}: incomplete_usage: "
        "output 96 with no input tokens: the usage of part of the call (a stream's last event)"]  # fmt: skip
    flags = con.execute("SELECT span_id, incomplete_usage, output_tokens FROM charges ORDER BY span_id").fetchall()
    assert flags == [(f"{1:016x}", False, 67), (f"{2:016x}", True, 96), (f"{3:016x}", False, 67)]
    assert con.execute("SELECT incomplete_usage_calls, model_calls FROM runs").fetchall() == [(1, 3)]

    built = build_report(con)
    assert built["incomplete_usage_calls"] == 1
    (listed,) = built["incomplete_usage"]
    assert (listed["model"], listed["scope_name"], listed["calls"], listed["runs"], listed["output_tokens"]) == (
        MODEL, LANGCHAIN, 1, 1, 96)  # fmt: skip
    assert (listed["last_trace_id"], listed["last_span_id"]) == (TRACE, f"{2:016x}")
    assert "INCOMPLETE USAGE" in format_report(built)

    query = q.run_turns(TRACE)
    cursor = con.execute(query.sql, query.params)
    turns = [dict(zip([d[0] for d in cursor.description], row, strict=True)) for row in cursor.fetchall()]
    verdicts = [check.status for check in check_cache(turns)]
    assert verdicts == [WRITTEN, INCOMPLETE, CACHED]
    assert BROKEN not in verdicts
