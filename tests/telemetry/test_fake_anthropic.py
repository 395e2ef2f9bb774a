"""End to end with real parts: the real ``anthropic`` SDK against a local fake Messages API,
the harness with telemetry on, spans exported BOTH in-process into one DuckDB file and
with the official OTLP/HTTP exporter into a real ``CollectorServer`` writing another.

Each ledger must hold exactly what the server said: token figures equal to the usage it
returned, USD equal to ``ledger.pricing`` of those tokens, and ``turnledger context``
giving back the very request body the server received, turn by turn.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import redirect_stdout
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest

from collector.cli import main
from collector.harness import AgentResult, Runtime, Tool, run_agent
from collector.harness.llm import ClaudeLLM
from collector.harness.telemetry import LedgerSpanExporter, OTelObserver, otlp_exporter, tracer_provider
from collector.receiver import CollectorServer, ServerConfig
from ledger.pricing import PriceBook, TokenCounts
from ledger.store import open_ledger
from tests.fakes.anthropic_server import Exchange, FakeAnthropicServer, FakeError, FakeReply
from tests.telemetry.helpers import Sleeps

MODEL = "claude-sonnet-5"
T0, HOUR = 1_790_000_000_000_000_000, 3_600_000_000_000
SYSTEM = "You are the HR assistant. Look things up before answering; cite document ids."


def _tool(name: str, fn: Any, *props: str) -> Tool:
    schema = {"type": "object", "properties": {p: {"type": "string"} for p in props}, "required": list(props)}
    return Tool({"name": name, "description": f"{name} tool", "input_schema": schema}, fn)


TOOLS = [
    _tool("search_kb", lambda query: f"[hr-001] Up to 5 unused PTO days roll over (query: {query})", "query"),
    _tool("get_pto_balance", lambda employee: json.dumps({"employee": employee, "days_left": 12}), "employee"),
]


def respond(body: dict[str, Any]) -> FakeReply:
    """Turn 1: two tools at once; turn 2: one more look-up; turn 3: the answer. Usage from the
    server's own prompt-cache model: the first call writes the prefix, later calls read it."""
    turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
    if turn == 0:
        return FakeReply.tools(
            ("toolu_a1", "search_kb", {"query": "PTO rollover"}),
            ("toolu_a2", "get_pto_balance", {"employee": "alice"}),
            text="Checking the policy and the balance together.",
        )
    if turn == 1:
        return FakeReply.tools(("toolu_b1", "search_kb", {"query": "PTO lapse date"}))
    return FakeReply.text("Alice has 12 days; up to 5 roll over and the rest lapse on December 31 [hr-001].")


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Two runs (non-streamed with a 429 first; streamed), exported both ways."""
    tmp = tmp_path_factory.mktemp("fake_anthropic")
    embedded, served = tmp / "embedded.duckdb", tmp / "served.duckdb"
    collector = CollectorServer(ServerConfig(port=0, db=served)).start()
    provider = tracer_provider([LedgerSpanExporter(embedded), otlp_exporter(collector.url, timeout=10)])
    observer = OTelObserver(provider, capture="redacted")
    sleeps = Sleeps()
    results: list[AgentResult] = []
    exchanges: list[list[Exchange]] = []
    try:
        with FakeAnthropicServer(respond) as server:
            server.enqueue(FakeError.rate_limited(retry_after=3))
            for i, stream in enumerate((False, True)):
                before = len(server.exchanges)
                with ClaudeLLM(MODEL, base_url=server.base_url, api_key="test-key", timeout=10, stream=stream) as llm:
                    results.append(
                        run_agent(
                            llm,
                            "How many PTO days does alice have, and what rolls over?",
                            TOOLS,
                            system=SYSTEM,
                            tenant="initech",
                            observer=observer,
                            runtime=Runtime.seeded(i, sleep=sleeps, start_ns=T0 + i * HOUR),
                        )
                    )
                exchanges.append(server.exchanges[before:])
        assert provider.force_flush()
    finally:
        provider.shutdown()
        collector.stop()
    yield {
        "paths": {"embedded": embedded, "served": served},
        "results": results,
        "exchanges": exchanges,
        "sleeps": sleeps,
    }


def test_the_runs_did_what_the_server_scripted(ledgers: dict[str, Any]) -> None:
    assert [r.stop_cause for r in ledgers["results"]] == ["completed", "completed"]
    first, second = ledgers["exchanges"]
    assert [e.status for e in first] == [429, 200, 200, 200]
    assert [e.status for e in second] == [200, 200, 200]
    assert [e.body.get("stream", False) for e in second] == [True, True, True]
    assert 3 <= ledgers["sleeps"][0] <= 3 * 1.3  # retry-after honoured
    reads = [e.response["usage"]["cache_read_input_tokens"] for e in first[1:]]
    assert reads[0] == 0 and all(r > 0 for r in reads[1:])  # prompt caching: later turns read the prefix


def _trace_ids(con: Any) -> list[str]:
    return [r[0] for r in con.execute("SELECT trace_id FROM runs ORDER BY started_at").fetchall()]


@pytest.mark.parametrize("way", ["embedded", "served"])
def test_ledger_tokens_and_usd_equal_what_the_server_returned(ledgers: dict[str, Any], way: str) -> None:
    prices = PriceBook.default()
    with open_ledger(ledgers["paths"][way], read_only=True) as con:
        traces = _trace_ids(con)
        assert len(traces) == 2
        for trace_id, exchanges in zip(traces, ledgers["exchanges"], strict=True):
            charges = con.execute(
                """SELECT attempt, status_code, error_type, model, start_time, uncached_input_tokens,
                          cache_write_tokens, cache_read_tokens, output_tokens,
                          usd_input, usd_output, usd_cache_write, usd_cache_read, unpriced
                   FROM charges WHERE trace_id = ? ORDER BY start_time""",
                [trace_id],
            ).fetchall()
            assert len(charges) == len(exchanges)  # one charge per HTTP attempt, the 429 included
            for charge, exchange in zip(charges, exchanges, strict=True):
                _attempt, status, error, model, start, *tokens = charge[:9]
                usd, unpriced = charge[9:13], charge[13]
                if exchange.status != 200:
                    assert (status, error, tokens, sum(usd)) == ("ERROR", "429", [0, 0, 0, 0], 0)
                    continue
                u = exchange.response["usage"]
                expected = TokenCounts(
                    uncached_input=u["input_tokens"],
                    cache_write=u["cache_creation_input_tokens"],
                    cache_read=u["cache_read_input_tokens"],
                    output=u["output_tokens"],
                )
                assert tokens == [expected.uncached_input, expected.cache_write, expected.cache_read, expected.output]
                assert model == exchange.response["model"] == MODEL and not unpriced
                priced = prices.price("anthropic", model, expected, start.replace(tzinfo=UTC))
                assert usd == (priced.usd_input, priced.usd_output, priced.usd_cache_write, priced.usd_cache_read)
        runs_total = con.execute("SELECT sum(usd_total) FROM runs").fetchone()[0]
        charges_total = con.execute(
            "SELECT sum(usd_input + usd_output + usd_cache_write + usd_cache_read) FROM charges"
        ).fetchone()[0]
        assert runs_total == charges_total > 0


@pytest.mark.parametrize("way", ["embedded", "served"])
def test_context_returns_exactly_the_request_body_the_server_received(
    ledgers: dict[str, Any], way: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(ledgers["paths"][way])
    with open_ledger(db, read_only=True) as con:
        traces = _trace_ids(con)
    for trace_id, exchanges in zip(traces, ledgers["exchanges"], strict=True):
        answered = [e for e in exchanges if e.status == 200]  # the attempt each turn ended with
        for turn, exchange in enumerate(answered, 1):
            out = io.StringIO()
            with redirect_stdout(out):
                assert main(["context", trace_id, "--turn", str(turn), "--db", db]) == 0
            shown = json.loads(out.getvalue())
            message = exchange.response
            answer = [{"role": "assistant", "content": message["content"], "finish_reason": message["stop_reason"]}]
            assert shown["request"] == exchange.body  # the SDK orders a request's keys its own way
            assert shown["response"] == answer  # what the server answered, its stop reason included
            if turn < len(answered):  # and, key order included, the message the next request re-sends
                resent = {k: v for k, v in shown["response"][0].items() if k != "finish_reason"}
                assert json.dumps(resent) in json.dumps(answered[turn].body["messages"])
        # The failed first attempt's payload was captured too, and it is the one the server saw.
        if exchanges[0].status != 200:
            with open_ledger(db, read_only=True) as con:
                from ledger.content import load_context

                span_id = con.execute(
                    "SELECT span_id FROM charges WHERE trace_id = ? AND attempt = 1 ORDER BY start_time LIMIT 1",
                    [trace_id],
                ).fetchone()[0]
                assert load_context(con, trace_id, span_id) == exchanges[0].body


def test_both_ways_out_write_the_same_ledger(ledgers: dict[str, Any]) -> None:
    def snapshot(path: Path) -> list[Any]:
        with open_ledger(path, read_only=True) as con:
            return con.execute(
                """SELECT trace_id, span_id, parent_span_id, name, start_time, end_time, status_code, attributes, events
                   FROM spans ORDER BY trace_id, start_time, span_id"""
            ).fetchall()

    embedded, served = (snapshot(ledgers["paths"][w]) for w in ("embedded", "served"))
    assert len(embedded) == len(served) > 0
    assert embedded == served
