"""The SDK's spans and an instrumentation's, for the same billed calls, posted in separate requests in either order.

Each agent (``instrumented_agent.py --sdk-tracing --capture``: the real anthropic
SDK tracing itself, under one real instrumentation, against the local fake API)
keeps its spans in memory and writes them as two OTLP/protobuf bodies encoded
by the official exporter's encoder: the SDK's spans and the rest. The fake
answers the first call with a 529, which the agent retries: the failed attempt
is its own (zero-dollar) charge, never merged into the billed call after it.
Both bodies go to a running collector in each order, and again (an exporter's
redelivery): the charges are the API's bill every time, on the same copies.
"""

from __future__ import annotations

import subprocess
import sys
from decimal import Decimal

import pytest

from collector.receiver import CollectorServer, ServerConfig
from tests.fakes.anthropic_server import FakeAnthropicServer, FakeError, FakeReply

from .conftest import post_otlp, wait_until
from .test_instrumentations import AGENT, INSTRUMENTATIONS, SDK_SCOPE, TRACED, USAGES, expected

PROTOBUF = "application/x-protobuf"
# A failed attempt reported by two spans is one attempt when one span is nested in the
# other (the official and OpenInference instrumentations make theirs the SDK's parent).
# OpenLLMetry's span is the SDK span's sibling, and neither has an id then: two spans
# side by side with no id cannot be told from two parallel calls, so both stay ($0 each).
FAILED_ATTEMPT_ROWS = {"none": 1, "official": 1, "traceloop": 2, "openinference": 1}


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    """Per source: the two request bodies (the SDK's spans, the rest) of one three-turn conversation."""
    out = {}
    for which in TRACED:
        if which != "none":
            pytest.importorskip(INSTRUMENTATIONS[which][1])
        folder = tmp_path_factory.mktemp(f"capture-{which}")
        with FakeAnthropicServer() as fake:
            fake.enqueue(FakeError.overloaded(), *(FakeReply.text("Done.", usage=u) for u in USAGES))
            proc = subprocess.run(
                [sys.executable, str(AGENT), which, fake.base_url, "http://127.0.0.1:9", "--sdk-tracing",
                 "--capture", str(folder)],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert proc.returncode == 0, f"{which} agent failed:\n{proc.stderr[-3000:]}"
            assert [e.status for e in fake.exchanges] == [529, 200, 200, 200]
        out[which] = ((folder / "sdk.pb").read_bytes(), (folder / "others.pb").read_bytes())
    return out


def _ingest_in_order(folder, bodies: list[bytes]):  # type: ignore[no-untyped-def]
    """Post each body as its own request (and every one again), then read the charges and runs."""
    server = CollectorServer(ServerConfig(port=0, db=folder / "ledger.duckdb")).start()
    try:
        for body in [*bodies, *bodies]:
            assert post_otlp(server.url, body, PROTOBUF).status == 200

        def caught_up() -> bool:
            with server.readers.connection() as cur:
                return cur.execute("SELECT count(*) FROM runs_pending").fetchone() == (0,)

        wait_until(caught_up)
        with server.readers.connection() as cur:
            charges = cur.execute(
                """SELECT c.trace_id, c.span_id, s.scope_name, c.status_code, c.uncached_input_tokens,
                          c.cache_write_tokens, c.cache_read_tokens, c.output_tokens,
                          c.usd_input + c.usd_output + c.usd_cache_write + c.usd_cache_read
                   FROM charges c JOIN spans s USING (trace_id, span_id) ORDER BY c.start_time"""
            ).fetchall()
            runs = cur.execute("SELECT sum(model_calls), sum(usd_total) FROM runs").fetchone()
        return charges, runs
    finally:
        server.stop()


@pytest.mark.parametrize("which", TRACED)
def test_copies_in_separate_requests_are_charged_once_in_either_order(captured, tmp_path, which):
    sdk, others = captured[which]
    bill = [expected(u) for u in USAGES]
    want_usd = sum((sum(c.usd) for c in bill), Decimal(0))
    results = []
    for name, order in (("sdk-first", [sdk, others]), ("sdk-last", [others, sdk])):
        (tmp_path / name).mkdir()
        charges, runs = _ingest_in_order(tmp_path / name, order)
        failed = [c for c in charges if c[3] == "ERROR"]
        billed = [c for c in charges if c[3] != "ERROR"]
        assert len(failed) == FAILED_ATTEMPT_ROWS[which] and all(c[8] == 0 for c in failed)
        assert [c[4:8] for c in billed] == [(c.uncached, c.write, c.read, c.out) for c in bill]
        assert [c[8] for c in billed] == [sum(c.usd) for c in bill]
        assert {c[2] for c in billed} == {SDK_SCOPE}  # the documented winner: the SDK's complete usage
        assert runs == (len(charges), want_usd)
        results.append([c[:2] for c in charges])
    assert results[0] == results[1]  # the same copies charged, whichever arrived first
