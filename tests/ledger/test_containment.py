"""One billed call, one charge, where no id joins the copies: containment (ledger.dedup), and ids nested in JSON.

The copies are the attribute sets the sources write (see tests/ledger/test_framework_usage.py
for where each comes from): the anthropic SDK's own span (every term, the TTL split,
the response id); OpenLLMetry's LangChain span of a streamed call (the cache terms, no
response id) around it as a SIBLING (neither makes its span current for the other);
OpenInference's LangChain span, with the response id only inside ``output.value``; a
LangChain stream that kept only its last event (output, no input). A failed attempt
(429, no usage) is a retry: its own $0 charge. Dollars come from genai-prices.
"""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.dedup import CopyIndex
from ledger.ingest import ingest, prepare, write
from ledger.spans import SpanRecord
from ledger.store import open_ledger

from .test_framework_usage import (
    EXACT,
    LANGCHAIN_USAGE,
    MODEL,
    OUT,
    READ,
    TOTAL_IN,
    UNCACHED,
    WRITE,
    WRITE_1H,
    WRITE_5M,
    langchain_output,
)

T0 = 1_790_000_000_000_000_000
MS = 1_000_000
SDK = "com.anthropic.sdk.python"
OPENLLMETRY = "opentelemetry.instrumentation.langchain"
OPENINFERENCE = "openinference.instrumentation.langchain"


def _t(trace: str) -> str:
    return trace * 32


def _s(n: int, kind: int) -> str:
    return f"{kind:02x}{n:014x}"


def root(trace: str = "a") -> SpanRecord:
    return SpanRecord(_t(trace), "f" * 16, "invoke_agent demo", T0 - 10 * MS, T0 + 10_000 * MS,
                      attributes={"gen_ai.operation.name": "invoke_agent"}, scope_name="demo")  # fmt: skip


def start_of(n: int) -> int:
    return T0 + n * 1_000 * MS


def sdk(n: int, *, offset: int = 2, trace: str = "a") -> SpanRecord:
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic", "gen_ai.request.model": MODEL,
             "gen_ai.response.model": MODEL, "gen_ai.response.id": f"msg_{n}", "anthropic.request.id": f"req_{n}",
             "gen_ai.usage.input_tokens": TOTAL_IN, "gen_ai.usage.output_tokens": OUT,
             "gen_ai.usage.cache_read.input_tokens": READ, "gen_ai.usage.cache_creation.input_tokens": WRITE,
             "anthropic.usage.cache_creation.ephemeral_5m_input_tokens": WRITE_5M,
             "anthropic.usage.cache_creation.ephemeral_1h_input_tokens": WRITE_1H}  # fmt: skip
    t = start_of(n)
    return SpanRecord(_t(trace), _s(n, 1), "anthropic.messages.create", t + offset * MS, t + 98 * MS, "f" * 16,
                      "CLIENT", attributes=attrs, scope_name=SDK, scope_version="2.14.0")  # fmt: skip


def failed_attempt(n: int) -> SpanRecord:
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic", "gen_ai.request.model": MODEL,
             "anthropic.request.id": f"req_{n}_429", "error.type": "429"}  # fmt: skip
    t = start_of(n)
    return SpanRecord(_t("a"), _s(n, 4), "anthropic.messages.create", t + 2 * MS, t + 10 * MS, "f" * 16, "CLIENT",
                      "ERROR", attributes=attrs, scope_name=SDK, scope_version="2.14.0")  # fmt: skip


def openllmetry_stream(n: int) -> SpanRecord:
    """OpenLLMetry 0.62's LangChain span of a streamed call: input including the cache, no response id."""
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.system": "Anthropic", "gen_ai.request.model": MODEL,
             "gen_ai.response.model": MODEL, "gen_ai.usage.input_tokens": TOTAL_IN, "gen_ai.usage.output_tokens": OUT,
             "gen_ai.usage.cache_read.input_tokens": READ, "gen_ai.usage.cache_creation.input_tokens": WRITE,
             "llm.usage.total_tokens": TOTAL_IN + OUT, "llm.is_streaming": True}  # fmt: skip
    t = start_of(n)
    return SpanRecord(_t("a"), _s(n, 2), "ChatAnthropic.chat", t, t + 100 * MS, "f" * 16, "CLIENT",
                      attributes=attrs, scope_name=OPENLLMETRY, scope_version="0.62.1")  # fmt: skip


def openinference(n: int, *, trace: str = "a", incomplete: bool = False) -> SpanRecord:
    usage = {"input_tokens": 0, "output_tokens": 96, "total_tokens": 96} if incomplete else LANGCHAIN_USAGE
    prompt, completion = (0, 96) if incomplete else (TOTAL_IN, OUT)
    attrs = {"openinference.span.kind": "LLM", "llm.provider": "anthropic", "llm.model_name": MODEL,
             "llm.token_count.prompt": prompt, "llm.token_count.completion": completion,
             "llm.token_count.prompt_details.cache_read": 0 if incomplete else READ,
             "output.value": langchain_output(usage, "" if incomplete else f"msg_{n}"),
             "output.mime_type": "application/json"}  # fmt: skip
    t = start_of(n)
    return SpanRecord(_t(trace), _s(n, 3), "ChatAnthropic", t + MS, t + 99 * MS, "f" * 16, "INTERNAL",
                      attributes=attrs, scope_name=OPENINFERENCE, scope_version="0.1.50")  # fmt: skip


def charged(con) -> list[tuple[str, str, int, int, int, int, int, Decimal]]:  # type: ignore[no-untyped-def]
    return con.execute(
        "SELECT trace_id[1:1], span_id, uncached_input_tokens, cache_read_tokens, cache_write_tokens, "
        "cache_write_1h_tokens, output_tokens, "
        "usd_input + usd_output + usd_cache_write + usd_cache_read + usd_cache_write_1h FROM charges ORDER BY span_id"
    ).fetchall()


WHOLE = (UNCACHED, READ, WRITE_5M, WRITE_1H, OUT, EXACT)


def test_the_sdk_span_inside_a_sibling_framework_span_is_one_charge_in_either_order():
    for order in ((0, 1), (1, 0)):
        con = open_ledger(":memory:")
        spans = [openllmetry_stream(0), sdk(0)]
        for i in order:
            ingest(con, [root(), spans[i]])
        assert charged(con) == [("a", _s(0, 1), *WHOLE)]
        assert con.execute("SELECT model_calls, usd_total FROM runs").fetchall() == [(1, EXACT)]


def test_openinference_langchain_joins_the_sdk_span_by_the_id_nested_in_its_output_value():
    con = open_ledger(":memory:")
    ingest(con, [openinference(0, trace="b")])
    ingest(con, [sdk(0)])  # another trace, another request: only the id joins them
    assert charged(con) == [("a", _s(0, 1), *WHOLE)]


def test_a_failed_attempt_inside_the_framework_span_stays_its_own_charge():
    con = open_ledger(":memory:")
    ingest(con, [root(), openllmetry_stream(0), failed_attempt(0), sdk(0, offset=20)])
    assert charged(con) == [("a", _s(0, 1), *WHOLE), ("a", _s(0, 4), 0, 0, 0, 0, 0, Decimal(0))]


def test_an_outer_span_takes_one_inner_call_only():
    """Two calls of the same model at once inside one framework span: the span is one of them, not both."""
    con = open_ledger(":memory:")
    first, second = sdk(0), sdk(0, offset=3)
    attrs = {k: v for k, v in second.attributes.items() if k != "gen_ai.response.id"}  # no id to tell them apart
    second = SpanRecord(second.trace_id, _s(9, 1), second.name, second.start_ns, second.end_ns - MS,
                        second.parent_span_id, second.kind, attributes={**attrs, "anthropic.request.id": "req_other"},
                        scope_name=SDK)  # fmt: skip
    ingest(con, [root(), openllmetry_stream(0), first, second])
    assert [row[1] for row in charged(con)] == [_s(0, 1), _s(9, 1)]


def test_copies_of_one_call_far_apart_in_time_are_not_contained():
    con = open_ledger(":memory:")
    ingest(con, [root(), openllmetry_stream(0), sdk(1)])
    assert [row[1] for row in charged(con)] == [_s(1, 1), _s(0, 2)]


# --- any arrival: the property --------------------------------------------------------------------
# Three billed calls (and a retry): call 0 seen by the SDK, OpenLLMetry's stream span and, in another
# trace, OpenInference; call 1 by the SDK after a 429 and OpenLLMetry; call 2 by the SDK, OpenLLMetry
# and an OpenInference stream that kept only its last event.
_COPIES = [
    lambda: root(),
    lambda: sdk(0),
    lambda: openllmetry_stream(0),
    lambda: openinference(0, trace="b"),
    lambda: failed_attempt(1),
    lambda: sdk(1, offset=20),
    lambda: openllmetry_stream(1),
    lambda: sdk(2),
    lambda: openllmetry_stream(2),
    lambda: openinference(2, incomplete=True),
]
EXPECTED = [("a", _s(n, 1), *WHOLE) for n in range(3)] + [("a", _s(1, 4), 0, 0, 0, 0, 0, Decimal(0))]


@settings(max_examples=60, deadline=None)
@given(
    order=st.permutations(range(len(_COPIES))),
    cuts=st.lists(st.booleans(), min_size=len(_COPIES), max_size=len(_COPIES)),
    coalesce=st.booleans(),
    indexed=st.booleans(),
    redeliver=st.lists(st.integers(0, len(_COPIES) - 1), max_size=2),
)
def test_any_permutation_and_split_charges_each_call_once_with_the_richest_usage(
    order, cuts, coalesce, indexed, redeliver
):
    con = open_ledger(":memory:")
    index = CopyIndex.load(con) if indexed else None  # the writer's, as collectors keep it
    batches: list[list[SpanRecord]] = [[]]
    for i, cut in zip(order, cuts, strict=True):
        batches[-1].append(_COPIES[i]())
        if cut:
            batches.append([])
    batches += [[_COPIES[i]()] for i in redeliver]
    batches = [b for b in batches if b]
    if coalesce:
        write(con, [prepare(b) for b in batches], copy_index=index)
    else:
        for b in batches:
            write(con, [prepare(b)], copy_index=index)
    assert sorted(charged(con), key=lambda r: r[1]) == sorted(EXPECTED, key=lambda r: r[1])
    # trace b holds only a copy charged in trace a: no run of $0
    assert con.execute("SELECT trace_id[1:1], model_calls, usd_total FROM runs").fetchall() == [("a", 4, 3 * EXACT)]
    copies = dict(con.execute("SELECT span_id, duplicate_of FROM call_copies").fetchall())
    assert copies[_s(2, 3)] == _s(2, 1) and copies[_s(0, 3)] == _s(0, 1)  # the incomplete one and the far one


def test_two_spans_of_one_source_one_inside_the_other_are_two_calls_run_in_parallel():
    con = open_ledger(":memory:")
    outer, inner = openllmetry_stream(0), openllmetry_stream(0)
    inner = SpanRecord(inner.trace_id, _s(8, 2), inner.name, inner.start_ns + 5 * MS, inner.end_ns - 5 * MS,
                       inner.parent_span_id, inner.kind, attributes=inner.attributes, scope_name=OPENLLMETRY)  # fmt: skip
    ingest(con, [root(), outer, inner])
    assert [row[1] for row in charged(con)] == [_s(0, 2), _s(8, 2)]


def test_a_trace_of_only_copies_charged_elsewhere_or_of_bookkeeping_is_no_run():
    con = open_ledger(":memory:")
    ingest(con, [openinference(0, trace="b")])  # first: charged, so a run
    assert con.execute("SELECT trace_id[1:1], model_calls FROM runs").fetchall() == [("b", 1)]
    created = SpanRecord(_t("c"), "c" * 16, "create_agent demo", T0, T0 + MS,
                         attributes={"gen_ai.operation.name": "create_agent", "gen_ai.agent.name": "demo"},
                         scope_name=OPENLLMETRY)  # fmt: skip
    ingest(con, [root(), sdk(0), created])  # the richer copy takes the charge from trace b
    assert con.execute("SELECT trace_id[1:1], model_calls, usd_total FROM runs").fetchall() == [("a", 1, EXACT)]


def test_prune_lists_a_trace_that_is_no_run_after_the_runs_before_the_cutoff():
    from datetime import UTC, datetime

    from ledger.retention import traces_before

    con = open_ledger(":memory:")
    ingest(con, [openinference(0, trace="b")])
    ingest(con, [root(), sdk(0)])  # trace b is no run now: its copy is charged in trace a
    cutoff = datetime.fromtimestamp((T0 + 20_000 * MS) / 1e9, UTC).replace(tzinfo=None)
    assert traces_before(con, cutoff) == [_t("a"), _t("b")]
    assert traces_before(con, datetime.fromtimestamp(T0 / 1e9 - 60, UTC).replace(tzinfo=None)) == []
