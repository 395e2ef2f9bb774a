"""One charge per billed call, whoever reports it, whatever the arrival order (ledger.billed, ledger.dedup).

The copies here carry the attributes the real sources put on their spans (checked
against the real SDK and instrumentations in tests/server/test_instrumentations.py
and test_billed_once_http.py): the anthropic SDK's ``anthropic.messages.create``
(every usage term, the response id and the request id), the official GenAI
instrumentation's ``chat`` span (no cache-read count when it is 0) and
OpenInference's LLM span (the response id only inside ``output.value``).
"""

from __future__ import annotations

import json
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.ingest import ingest, prepare, write
from ledger.spans import SpanRecord
from ledger.store import open_ledger

T0 = 1_790_000_000_000_000_000
MS = 1_000_000
MODEL = "claude-sonnet-5"  # $3 in, $15 out per MTok; cache write x1.25, read x0.1 (project price file)
USAGE = {"input_tokens": 1200, "output_tokens": 310, "cache_creation_input_tokens": 4000, "cache_read_input_tokens": 0}
# 1200 x $3 + 310 x $15 + 4000 x $3.75, per million tokens
BILL = (Decimal(1200) * 3 + Decimal(310) * 15 + Decimal(4000) * Decimal("3.75")) / 1_000_000
SDK = "com.anthropic.sdk.python"
OFFICIAL = "opentelemetry.instrumentation.genai.anthropic"
OPENINFERENCE = "openinference.instrumentation.anthropic"


def _ids(trace: str, span: str) -> tuple[str, str]:
    return trace * 32, span * 16


def sdk_span(trace: str, span: str, parent: str = "", *, response_id: str | None = "msg_1", start: int = T0,
             end: int = T0 + 50 * MS, error: bool = False, usage: dict[str, int] = USAGE) -> SpanRecord:  # fmt: skip
    attrs: dict[str, object] = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic",
                                "gen_ai.request.model": MODEL, "anthropic.request.id": f"req_{span}"}  # fmt: skip
    if not error:
        cached = usage["cache_creation_input_tokens"] + usage["cache_read_input_tokens"]
        attrs |= {"gen_ai.response.model": MODEL, "gen_ai.usage.input_tokens": usage["input_tokens"] + cached,
                  "gen_ai.usage.output_tokens": usage["output_tokens"],
                  "gen_ai.usage.cache_write.input_tokens": usage["cache_creation_input_tokens"],
                  "gen_ai.usage.cache_read.input_tokens": usage["cache_read_input_tokens"]}  # fmt: skip
        if response_id:
            attrs["gen_ai.response.id"] = response_id
    t, s = _ids(trace, span)
    return SpanRecord(t, s, "anthropic.messages.create", start, end, parent and parent * 16, "CLIENT",
                      "ERROR" if error else "OK", attributes=attrs, scope_name=SDK, scope_version="2.14.0")  # fmt: skip


def official_span(trace: str, span: str, parent: str = "", *, response_id: str | None = "msg_1", start: int = T0 - MS,
                  end: int = T0 + 51 * MS, error: bool = False) -> SpanRecord:  # fmt: skip
    attrs: dict[str, object] = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic",
                                "gen_ai.request.model": MODEL}  # fmt: skip
    if not error:
        u = USAGE
        attrs |= {"gen_ai.response.model": MODEL, "gen_ai.usage.output_tokens": u["output_tokens"],
                  "gen_ai.usage.input_tokens": u["input_tokens"] + u["cache_creation_input_tokens"],
                  "gen_ai.usage.cache_write.input_tokens": u["cache_creation_input_tokens"]}  # fmt: skip
        if response_id:
            attrs["gen_ai.response.id"] = response_id
    t, s = _ids(trace, span)
    return SpanRecord(t, s, f"chat {MODEL}", start, end, parent and parent * 16, "CLIENT",
                      "ERROR" if error else "UNSET", attributes=attrs, scope_name=OFFICIAL, scope_version="0.1")  # fmt: skip


def openinference_span(trace: str, span: str, parent: str = "", *, response_id: str = "msg_1") -> SpanRecord:
    u = USAGE
    attrs = {"openinference.span.kind": "LLM", "llm.provider": "anthropic", "llm.model_name": MODEL,
             "llm.token_count.prompt": u["input_tokens"] + u["cache_creation_input_tokens"],
             "llm.token_count.completion": u["output_tokens"],
             "llm.token_count.prompt_details.cache_write": u["cache_creation_input_tokens"],
             "output.value": json.dumps({"id": response_id, "type": "message", "model": MODEL}),
             "output.mime_type": "application/json"}  # fmt: skip
    t, s = _ids(trace, span)
    return SpanRecord(t, s, "messages.create", T0 - 2 * MS, T0 + 52 * MS, parent and parent * 16, "INTERNAL",
                      attributes=attrs, scope_name=OPENINFERENCE, scope_version="0.1.20")  # fmt: skip


def root_span(trace: str, span: str = "9") -> SpanRecord:
    t, s = _ids(trace, span)
    return SpanRecord(t, s, "conversation", T0 - 10 * MS, T0 + 500 * MS, scope_name="demo-agent")


def charges(con) -> list[tuple[str, str, Decimal]]:  # type: ignore[no-untyped-def]
    """(trace, span, usd) of every charge, in a stable order."""
    rows = con.execute(
        "SELECT trace_id, span_id, usd_input + usd_output + usd_cache_write + usd_cache_read FROM charges "
        "ORDER BY trace_id, span_id"
    ).fetchall()
    return [(t[0], s[0], usd) for t, s, usd in rows]


def marks(con) -> dict[tuple[str, str], tuple[str, str] | None]:  # type: ignore[no-untyped-def]
    rows = con.execute("SELECT trace_id, span_id, duplicate_of_trace, duplicate_of FROM call_copies").fetchall()
    return {(t[0], s[0]): (dt[0], d[0]) if d else None for t, s, dt, d in rows}


def runs(con) -> dict[str, tuple[int, Decimal]]:  # type: ignore[no-untyped-def]
    return {t[0]: (n, usd) for t, n, usd in con.execute("SELECT trace_id, model_calls, usd_total FROM runs").fetchall()}


def test_the_sdk_and_an_instrumentation_nested_are_charged_once_on_the_more_complete_copy():
    con = open_ledger(":memory:")
    ingest(con, [root_span("a"), official_span("a", "1", "9"), sdk_span("a", "2", "1")])
    assert charges(con) == [("a", "2", BILL)]  # the SDK reports cache reads too: 4 usage terms to 3
    assert marks(con) == {("a", "1"): ("a", "2"), ("a", "2"): None}
    assert runs(con) == {"a": (1, BILL)}


def test_a_better_copy_arriving_later_in_another_trace_takes_the_charge_and_both_runs_follow():
    con = open_ledger(":memory:")
    ingest(con, [root_span("a"), official_span("a", "1", "9")])
    assert charges(con) == [("a", "1", BILL)] and runs(con) == {"a": (1, BILL)}
    ingest(con, [root_span("b"), sdk_span("b", "2", "9")])  # minutes later, another request, another trace
    assert charges(con) == [("b", "2", BILL)]
    assert marks(con) == {("a", "1"): ("b", "2"), ("b", "2"): None}
    assert runs(con) == {"a": (0, Decimal(0)), "b": (1, BILL)}


def test_a_worse_copy_arriving_later_is_not_charged():
    con = open_ledger(":memory:")
    ingest(con, [root_span("b"), sdk_span("b", "2", "9")])
    ingest(con, [root_span("a"), official_span("a", "1", "9")])
    assert charges(con) == [("b", "2", BILL)]
    assert runs(con) == {"a": (0, Decimal(0)), "b": (1, BILL)}


def test_openinference_is_matched_by_the_id_inside_its_output_value():
    con = open_ledger(":memory:")
    ingest(con, [openinference_span("a", "1")])
    ingest(con, [sdk_span("b", "2")])
    assert charges(con) == [("b", "2", BILL)]
    assert marks(con)[("a", "1")] == ("b", "2")


def test_coalesced_commit_and_redelivered_batches_are_exactly_once():
    con = open_ledger(":memory:")
    first, second = [root_span("a"), official_span("a", "1", "9")], [root_span("b"), sdk_span("b", "2", "9")]
    write(con, [prepare(first), prepare(second)])  # one commit for two requests (the writer coalesces)
    assert charges(con) == [("b", "2", BILL)]
    for batch in (first, second, first + second):  # exporters retry: the same spans again
        report = write(con, [prepare(batch)])
        assert report.charges_written == 0
        assert charges(con) == [("b", "2", BILL)]
    write(con, [prepare(second), prepare(second), prepare(first)])  # a redelivery inside one coalesced commit
    assert charges(con) == [("b", "2", BILL)]
    assert runs(con) == {"a": (0, Decimal(0)), "b": (1, BILL)}


def test_failed_attempts_without_a_response_id_nested_are_one_attempt_in_either_order():
    for order in ((0, 1), (1, 0)):
        con = open_ledger(":memory:")
        spans = [official_span("a", "1", "9", error=True), sdk_span("a", "2", "1", error=True)]
        for i in order:
            ingest(con, [spans[i]])
        assert len(charges(con)) == 1 and charges(con)[0][2] == 0


def test_a_copy_without_an_id_nested_under_one_with_it_joins_its_key_and_a_third_copy_elsewhere():
    con = open_ledger(":memory:")
    ingest(con, [sdk_span("a", "2", "1", response_id=None)])  # a child with usage but no id, its parent not yet here
    ingest(con, [official_span("a", "1", "9")])  # the parent, with the response id: one call
    ingest(con, [openinference_span("b", "3")])  # the same response id in another trace
    assert charges(con) == [("a", "2", BILL)]
    assert marks(con) == {("a", "1"): ("a", "2"), ("a", "2"): None, ("b", "3"): ("a", "2")}


def test_retries_are_not_duplicates():
    con = open_ledger(":memory:")
    failed = sdk_span("a", "1", "9", error=True, start=T0, end=T0 + 10 * MS)
    retried = sdk_span("a", "2", "9", response_id="msg_2", start=T0 + 20 * MS, end=T0 + 70 * MS)
    ingest(con, [root_span("a"), failed, retried])
    assert [c[:2] for c in charges(con)] == [("a", "1"), ("a", "2")]
    assert runs(con) == {"a": (2, BILL)}


def test_nested_spans_with_different_response_ids_are_two_calls():
    con = open_ledger(":memory:")
    ingest(con, [official_span("a", "1", "9", response_id="msg_1"), sdk_span("a", "2", "1", response_id="msg_2")])
    assert len(charges(con)) == 2


def test_a_reused_response_id_far_apart_in_time_is_two_calls():
    con = open_ledger(":memory:")  # a replayed fixture (or a fake) answering every run with the same id
    later = T0 + 600_000 * MS
    ingest(con, [sdk_span("a", "1"), sdk_span("b", "2", start=later, end=later + 50 * MS)])
    assert [c[:2] for c in charges(con)] == [("a", "1"), ("b", "2")]


_COPIES = [
    lambda: official_span("a", "1", "9"),
    lambda: sdk_span("a", "2", "1"),  # nested under the official span
    lambda: openinference_span("b", "3"),  # another trace, another process's view of the same response
    lambda: root_span("a"),
]


@settings(max_examples=40, deadline=None)
@given(
    order=st.permutations(range(len(_COPIES))),
    cuts=st.lists(st.booleans(), min_size=len(_COPIES), max_size=len(_COPIES)),
    coalesce=st.booleans(),
    redeliver=st.lists(st.integers(0, len(_COPIES) - 1), max_size=3),
)
def test_any_arrival_order_batching_and_redelivery_ends_in_the_same_single_charge(order, cuts, coalesce, redeliver):
    con = open_ledger(":memory:")
    batches: list[list[SpanRecord]] = [[]]
    for i, cut in zip(order, cuts, strict=True):
        batches[-1].append(_COPIES[i]())
        if cut:
            batches.append([])
    batches += [[_COPIES[i]()] for i in redeliver]
    batches = [b for b in batches if b]
    if coalesce:
        write(con, [prepare(b) for b in batches])
    else:
        for b in batches:
            write(con, [prepare(b)])
    assert charges(con) == [("a", "2", BILL)]
    assert marks(con) == {("a", "1"): ("a", "2"), ("a", "2"): None, ("b", "3"): ("a", "2")}
    assert runs(con).get("a") == (1, BILL)
    assert runs(con).get("b", (0, Decimal(0))) == (0, Decimal(0))
