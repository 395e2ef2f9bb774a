"""The three Anthropic instrumentations on PyPI, around the real SDK, exported by the official OTLP exporter.

Each runs the same three-turn conversation (two plain calls, one streamed)
against a local fake Anthropic API whose usage includes prompt-cache tokens,
in its own process, exporting to a running collector. The ledger must charge
each exactly what the fake API billed, term by term, in exact decimals, and
the same as the harness's own spans (current GenAI conventions) for the same usage.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from ledger import conventions as c
from ledger.ingest import ingest
from ledger.spans import SpanRecord
from ledger.store import open_ledger
from tests.fakes.anthropic_server import FakeAnthropicServer, FakeReply

from .conftest import MS, T0, wait_until

AGENT = Path(__file__).with_name("instrumented_agent.py")
INSTRUMENTATIONS = {
    "official": ("opentelemetry-instrumentation-genai-anthropic", "opentelemetry.instrumentation.genai.anthropic"),
    "traceloop": ("opentelemetry-instrumentation-anthropic", "opentelemetry.instrumentation.anthropic"),
    "openinference": ("openinference-instrumentation-anthropic", "openinference.instrumentation.anthropic"),
}
# What the fake API bills each turn (Anthropic semantics: input_tokens EXCLUDES cache reads and writes).
USAGES = [
    {"input_tokens": 1200, "output_tokens": 310, "cache_creation_input_tokens": 4000, "cache_read_input_tokens": 0},
    {"input_tokens": 150, "output_tokens": 120, "cache_creation_input_tokens": 900, "cache_read_input_tokens": 4000},
    {"input_tokens": 80, "output_tokens": 95, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 4900},
]
STREAMED_TURN = 2
# claude-sonnet-5 in the project price file: $3 in, $15 out per MTok; cache write x1.25, read x0.1.
PER_MTOK = {"in": Decimal(3), "out": Decimal(15), "write": Decimal("3.75"), "read": Decimal("0.30")}


@dataclass(frozen=True)
class Charge:
    uncached: int
    write: int
    read: int
    out: int
    usd: tuple[Decimal, Decimal, Decimal, Decimal]  # input, output, cache write, cache read


def expected(usage: dict[str, int]) -> Charge:
    terms = (
        ("in", usage["input_tokens"]),
        ("out", usage["output_tokens"]),
        ("write", usage["cache_creation_input_tokens"]),
        ("read", usage["cache_read_input_tokens"]),
    )
    usd = tuple(PER_MTOK[k] * n / 1_000_000 for k, n in terms)
    return Charge(usage["input_tokens"], usage["cache_creation_input_tokens"], usage["cache_read_input_tokens"],
                  usage["output_tokens"], usd)  # type: ignore[arg-type]  # fmt: skip


_CHARGE_SQL = """SELECT uncached_input_tokens, cache_write_tokens, cache_read_tokens, output_tokens,
       usd_input, usd_output, usd_cache_write, usd_cache_read, provider, model, unpriced
FROM charges WHERE trace_id = ? ORDER BY start_time"""


def _charges(cur, trace_id: str) -> list[Charge]:  # type: ignore[no-untyped-def]
    rows = cur.execute(_CHARGE_SQL, [trace_id]).fetchall()
    assert all(r[8:] == ("anthropic", "claude-sonnet-5", False) for r in rows), rows
    return [Charge(*r[:4], tuple(r[4:8])) for r in rows]


def harness_ledger_charges() -> list[Charge]:
    """The same usage as turnledger's own harness records it (input INCLUDES cache, current conventions)."""
    con = open_ledger(":memory:")
    trace, root = "a" * 32, "b" * 16
    spans = []
    for i, u in enumerate(USAGES):
        attrs = {
            c.OPERATION_NAME: "chat", c.PROVIDER_NAME: "anthropic", c.REQUEST_MODEL: "claude-sonnet-5",
            c.INPUT_TOKENS: u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"],
            c.OUTPUT_TOKENS: u["output_tokens"], c.CACHE_CREATION_INPUT_TOKENS: u["cache_creation_input_tokens"],
            c.CACHE_READ_INPUT_TOKENS: u["cache_read_input_tokens"],
        }  # fmt: skip
        start = T0 + i * 1000 * MS
        spans.append(SpanRecord(trace, f"{i + 1:016x}", "chat claude-sonnet-5", start, start + MS, root, "CLIENT",
                                attributes=attrs, scope_name="turnledger.harness", scope_version="0.1.0"))  # fmt: skip
    ingest(con, spans)
    return _charges(con, trace)


@pytest.fixture(scope="module")
def conversations(tmp_path_factory):
    """Run all three agents (in parallel processes) into one collector; trace id per instrumentation."""
    from collector.receiver import CollectorServer, ServerConfig

    db = tmp_path_factory.mktemp("instrumentations") / "ledger.duckdb"
    server = CollectorServer(ServerConfig(port=0, db=db)).start()
    try:
        traces = _run_agents(list(INSTRUMENTATIONS), server.url)
        yield server, traces
    finally:
        server.stop()


def _trace(conversations, which: str) -> str:  # type: ignore[no-untyped-def]
    _, traces = conversations
    if which not in traces:
        pytest.fail(f"{INSTRUMENTATIONS[which][0]} is not installed: pip install -e '.[dev]'")
    return traces[which]


@pytest.mark.parametrize("which", list(INSTRUMENTATIONS))
def test_plain_calls_are_charged_exactly_what_the_api_billed(conversations, which):
    server, _ = conversations
    with server.readers.connection() as cur:
        charges = _charges(cur, _trace(conversations, which))
    assert len(charges) == len(USAGES)
    plain = [i for i in range(len(USAGES)) if i != STREAMED_TURN]
    want = [expected(USAGES[i]) for i in plain]
    assert [charges[i] for i in plain] == want
    assert [harness_ledger_charges()[i] for i in plain] == want  # the harness's own ledger agrees


@pytest.mark.parametrize(
    "which",
    [
        "official",
        pytest.param(
            "traceloop",
            marks=pytest.mark.xfail(
                strict=True,
                reason="upstream bug in opentelemetry-instrumentation-anthropic 0.62.4 (streaming.py): it ADDS "
                "message_delta's cumulative output_tokens to message_start's, over-counting a streamed reply "
                "by message_start's count (1 here, as the real API sends); the span reports 96 for 95",
            ),
        ),
        "openinference",
    ],
)
def test_streamed_call_is_charged_its_final_usage(conversations, which):
    server, _ = conversations
    with server.readers.connection() as cur:
        charges = _charges(cur, _trace(conversations, which))
    assert charges[STREAMED_TURN] == expected(USAGES[STREAMED_TURN]) == harness_ledger_charges()[STREAMED_TURN]


@pytest.mark.parametrize("which", list(INSTRUMENTATIONS))
def test_captured_messages_reach_the_context_store_redacted(conversations, which):
    server, _ = conversations
    trace_id = _trace(conversations, which)
    from ledger.content import load_context

    with server.readers.connection() as cur:
        span_ids = [r[0] for r in cur.execute("SELECT span_id FROM charges WHERE trace_id = ? ORDER BY start_time",
                                              [trace_id]).fetchall()]  # fmt: skip
        payloads = [load_context(cur, trace_id, s) for s in span_ids]
    assert all(payloads), "every model call's request content should be captured"
    last = str(payloads[-1])
    assert "Which settings page was that?" in last and "summarise it in one line" in last  # the whole history
    assert "terse support agent" in last  # the system prompt
    assert "bob@example.com" not in last and "[REDACTED:email]" in last
    assert "sk-ant-api03" not in last


@pytest.mark.parametrize("which", list(INSTRUMENTATIONS))
def test_request_content_is_not_also_kept_unredacted_in_span_attributes(conversations, which):
    server, _ = conversations
    trace_id = _trace(conversations, which)
    with server.readers.connection() as cur:
        rows = cur.execute("SELECT attributes FROM spans WHERE trace_id = ?", [trace_id]).fetchall()
    stored = " ".join(r[0] for r in rows)
    assert "bob@example.com" not in stored and "sk-ant-api03" not in stored


# --- the anthropic SDK tracing itself beside each instrumentation: one charge per billed call -----------
# With ``--sdk-tracing`` every billed call is reported twice (the SDK's ``anthropic.messages.create`` and the
# instrumentation's span, nested or side by side); "none" is the SDK's spans alone. The ledger charges each
# call once, on the SDK's copy (it reports every usage term and its scope name sorts first: ledger.billed).
TRACED = ["none", *INSTRUMENTATIONS]
SDK_SCOPE = "com.anthropic.sdk.python"


def _run_agents(which_all: list[str], collector_url: str, *extra: str) -> dict[str, str]:
    """Run one agent per entry (in parallel processes) against its own fake; trace id per entry."""
    fakes = {which: FakeAnthropicServer().start() for which in which_all}
    for fake in fakes.values():
        fake.enqueue(*(FakeReply.text("Done.", usage=u) for u in USAGES))
    try:
        procs = {
            which: subprocess.Popen(
                [sys.executable, str(AGENT), which, fakes[which].base_url, collector_url, *extra],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for which in which_all
            if which == "none" or importlib.util.find_spec(INSTRUMENTATIONS[which][1]) is not None
        }
        traces = {}
        for which, proc in procs.items():
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, f"{which} agent failed:\n{err[-3000:]}"
            traces[which] = out.strip().splitlines()[-1]
            assert len(fakes[which].exchanges) == len(USAGES)
        return traces
    finally:
        for fake in fakes.values():
            fake.stop()


def _runs_caught_up(server) -> None:  # type: ignore[no-untyped-def]
    """Wait for the runs rows the writer deferred under load (at most its runs lag) to be rebuilt."""

    def caught_up() -> bool:
        with server.readers.connection() as cur:
            return cur.execute("SELECT count(*) FROM runs_pending").fetchone() == (0,)

    wait_until(caught_up)


@pytest.fixture(scope="module")
def traced_conversations(tmp_path_factory):
    """The SDK's tracing on: the SDK alone and beside each instrumentation, into one running collector."""
    from collector.receiver import CollectorServer, ServerConfig

    db = tmp_path_factory.mktemp("sdk-traced") / "ledger.duckdb"
    server = CollectorServer(ServerConfig(port=0, db=db)).start()
    try:
        traces = _run_agents(TRACED, server.url, "--sdk-tracing")
        _runs_caught_up(server)
        yield server, traces
    finally:
        server.stop()


@pytest.mark.parametrize("which", TRACED)
def test_sdk_traced_calls_are_charged_once_exactly_what_the_api_billed(traced_conversations, which):
    server, _ = traced_conversations
    trace_id = _trace(traced_conversations, which)
    with server.readers.connection() as cur:
        charges = _charges(cur, trace_id)
        sources = cur.execute(
            "SELECT DISTINCT s.scope_name FROM charges c JOIN spans s USING (trace_id, span_id) WHERE c.trace_id = ?",
            [trace_id],
        ).fetchall()
    assert charges == [expected(u) for u in USAGES]  # streamed turn included: the SDK's copy is charged
    assert sources == [(SDK_SCOPE,)]


@pytest.mark.parametrize("which", list(INSTRUMENTATIONS))
def test_the_instrumentations_copies_stay_spans_marked_as_duplicates(traced_conversations, which):
    from ledger import queries as q

    server, _ = traced_conversations
    trace_id = _trace(traced_conversations, which)
    with server.readers.connection() as cur:
        charged = {r[0] for r in cur.execute("SELECT span_id FROM charges WHERE trace_id = ?", [trace_id]).fetchall()}
        tree = q.run(cur, q.run_trace_tree(trace_id))
        scopes = dict(cur.execute("SELECT span_id, scope_name FROM spans WHERE trace_id = ?", [trace_id]).fetchall())
    marked = [row for row in tree.to_dict("records") if isinstance(row["duplicate_of"], str)]
    assert len(marked) == len(USAGES)
    assert {scopes[row["span_id"]] for row in marked} == {INSTRUMENTATIONS[which][1]}
    assert {row["duplicate_of"] for row in marked} == charged  # each names the SDK span charged for its call
    assert all(pd.isna(row["usd"]) and pd.isna(row["duplicate_of_trace"]) for row in marked)


@pytest.mark.parametrize("which", TRACED)
def test_runs_rollup_counts_each_billed_call_once(traced_conversations, which):
    server, _ = traced_conversations
    trace_id = _trace(traced_conversations, which)
    want = sum((sum(expected(u).usd) for u in USAGES), Decimal(0))
    with server.readers.connection() as cur:
        row = cur.execute("SELECT model_calls, usd_total FROM runs WHERE trace_id = ?", [trace_id]).fetchone()
    assert row == (len(USAGES), want)


def test_report_totals_are_the_api_bill(traced_conversations):
    from ledger.report import build_report

    server, traces = traced_conversations
    want = len(traces) * sum((sum(expected(u).usd) for u in USAGES), Decimal(0))
    with server.readers.connection() as cur:
        report = build_report(cur)
    assert Decimal(str(report["total_usd"])) == want
    assert sum(m["calls"] for m in report["models"]) == len(traces) * len(USAGES)
