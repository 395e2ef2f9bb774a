"""Sample traces: deterministic, committed up to date, telling the seeds' stories and the cache's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from collector.demo.harness_samples import HARNESS_FOLDER, HARNESS_SAMPLES, build_harness
from collector.demo.samples import SCENARIOS as ASSEMBLED
from collector.otlp import decode_json, encode_json, read_file
from ledger import conventions as c
from ledger import queries as q
from ledger.cache_diagnosis import BELOW_MINIMUM, BROKEN, CACHED, NO_BREAKPOINT, WRITTEN, CacheCheck, diagnose
from ledger.content import load_context
from ledger.ingest import ingest
from ledger.pricing import PriceBook
from ledger.store import open_ledger

FOLDER = Path(__file__).resolve().parents[2] / "sample_traces" / HARNESS_FOLDER


@pytest.fixture(scope="module")
def built() -> dict[str, list]:
    return {name: build_harness(name) for name in HARNESS_SAMPLES}


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    con = open_ledger(tmp_path_factory.mktemp("samples") / "harness.duckdb")
    for name in HARNESS_SAMPLES:
        ingest(con, read_file(FOLDER / f"{name}.json"))
    yield con
    con.close()


def _run(con: duckdb.DuckDBPyConnection, name: str) -> dict:
    trace_id = read_file(FOLDER / f"{name}.json")[0].trace_id
    return q.records(con, q.run_summary(trace_id))[0]


def test_committed_files_are_what_the_harness_produces_now(built: dict[str, list]) -> None:
    for name, spans in built.items():
        doc = json.loads((FOLDER / f"{name}.json").read_text())
        assert doc["_generated"].startswith("by `turnledger samples`"), name
        assert decode_json(doc) == decode_json(encode_json(spans)), f"{name}: run `turnledger samples`"


def test_building_twice_gives_identical_traces(built: dict[str, list]) -> None:
    for name in ("pto_happy_path", "retry_storm", "research_with_summarizer"):
        assert build_harness(name) == built[name]


def test_the_samples_are_small(built: dict[str, list]) -> None:
    # Production-sized prompts (a 4,000-token prefix, captured on every call) make a five-turn run ~115 KB.
    sizes = {p.name: p.stat().st_size for p in FOLDER.glob("*.json")}
    assert set(sizes) == {f"{n}.json" for n in HARNESS_SAMPLES}
    assert sum(sizes.values()) < 2_000_000 and max(sizes.values()) < 200_000


def test_budget_burner_stops_at_step_11_with_12990_tokens(ledger: duckdb.DuckDBPyConnection) -> None:
    run = _run(ledger, "budget_burner")
    assert (run["stop_cause"], run["model_calls"], run["status_code"], run["error_type"]) == (
        "budget_exceeded", 11, "ERROR", "budget_exceeded")  # fmt: skip
    tokens = run["uncached_input_tokens"] + run["cache_write_tokens"] + run["cache_read_tokens"] + run["output_tokens"]
    assert tokens == 12_990
    assert run["stop_detail"] == "12,990 tokens >= budget 12,000"


def test_pto_happy_path_runs_its_two_tools_in_parallel(built: dict[str, list]) -> None:
    spans = built["pto_happy_path"]
    tools = [s for s in spans if s.name.startswith("execute_tool")]
    assert sorted(s.attributes[c.TOOL_NAME] for s in tools) == ["get_pto_balance", "search_kb"]
    a, b = tools
    assert a.start_ns < b.end_ns and b.start_ns < a.end_ns  # overlapping: run concurrently
    root = next(s for s in spans if not s.parent_span_id)
    assert root.attributes[c.STOP_CAUSE] == "completed" and root.status_code == "UNSET"


def test_the_other_stories(ledger: duckdb.DuckDBPyConnection, built: dict[str, list]) -> None:
    looping = _run(ledger, "looping_search")
    assert (looping["stop_cause"], looping["loop_trips"], looping["tool_calls"]) == ("loop_detected", 2, 5)
    recovering = _run(ledger, "recovering_date_error")
    assert recovering["stop_cause"] == "completed"
    first_tool = next(s for s in built["recovering_date_error"] if s.name.startswith("execute_tool"))
    assert first_tool.status_code == "ERROR" and "YYYY-MM-DD" in first_tool.attributes[c.TOOL_CALL_RESULT]
    handoff = _run(ledger, "refund_handoff")
    assert handoff["stop_cause"] == "handoff"
    shipping = _run(ledger, "shipping_soft_failure")
    assert (shipping["stop_cause"], shipping["error_type"], shipping["soft_failures"]) == ("max_steps", "max_steps", 6)
    retry = _run(ledger, "retry_storm")
    assert (retry["model_calls"], retry["retry_attempts"], retry["turns"]) == (4, 2, 2)
    research = _run(ledger, "research_with_summarizer")
    assert research["models"] == "claude-haiku-4-5,claude-opus-5"
    sites = {r["call_site"] for r in q.records(ledger, q.call_site_attribution())}
    assert sites == {"agent", "summarizer"}
    shapes = {(r["shape"], r["nudges"], r["halts"]) for r in q.records(ledger, q.loop_trips())}
    assert shapes == {(s, 1, 1) for s in ("repeat", "cycle", "stall")}  # step-cap halts are counted apart
    assert q.records(ledger, q.guard_summary())[0]["step_cap_halts"] == 1


def test_every_turn_of_every_sample_has_its_context(ledger: duckdb.DuckDBPyConnection) -> None:
    missing = ledger.execute("SELECT count(*) FROM charges ch ANTI JOIN contexts USING (trace_id, span_id)").fetchone()
    assert missing == (0,)


def _diagnosis(con: duckdb.DuckDBPyConnection, name: str) -> list[CacheCheck]:
    """Each call's cache verdict, as the run explorer and `turnledger diff` compute it."""
    trace_id = read_file(FOLDER / f"{name}.json")[0].trace_id
    turns = q.records(con, q.run_turns(trace_id))
    spans = {int(t["turn"]): str(t["span_id"]) for t in turns}
    return diagnose(turns, lambda turn: load_context(con, trace_id, spans[turn]), PriceBook.default().cache_minimum)


def _hit_rate(run: dict) -> float:
    read = run["cache_read_tokens"]
    return read / (run["uncached_input_tokens"] + run["cache_write_tokens"] + read)


def test_the_healthy_cache_sample_reads_back_every_turn(ledger: duckdb.DuckDBPyConnection) -> None:
    checks = _diagnosis(ledger, "healthy_cache")
    assert [c.status for c in checks] == [WRITTEN] + [CACHED] * 4
    assert _hit_rate(_run(ledger, "healthy_cache")) > 0.7  # the seeds' "healthy" band
    assert [c.status for c in _diagnosis(ledger, "pto_happy_path")] == [WRITTEN, CACHED]


def test_a_clock_in_the_system_prompt_breaks_every_turn_and_is_named(ledger: duckdb.DuckDBPyConnection) -> None:
    checks = _diagnosis(ledger, "clock_in_system_prompt")
    assert [c.status for c in checks] == [WRITTEN] + [BROKEN] * 4
    assert all(c.note.startswith("broken by system[0].text: text differs from character") for c in checks[1:])
    healthy, broken = _run(ledger, "healthy_cache"), _run(ledger, "clock_in_system_prompt")
    assert _hit_rate(broken) == 0 and broken["usd_total"] > 2 * healthy["usd_total"]  # the break's cost


def test_a_reordered_tool_list_breaks_once_at_the_first_tool(ledger: duckdb.DuckDBPyConnection) -> None:
    checks = _diagnosis(ledger, "reordered_tools")
    assert [c.status for c in checks] == [WRITTEN, CACHED, BROKEN, CACHED, CACHED]
    assert checks[2].note.startswith("broken by tools[0].name: text differs from character 0")
    healthy, reordered = _run(ledger, "healthy_cache"), _run(ledger, "reordered_tools")
    assert healthy["usd_total"] < reordered["usd_total"] < _run(ledger, "clock_in_system_prompt")["usd_total"]


def test_an_evicted_cache_breaks_without_a_changed_prefix(ledger: duckdb.DuckDBPyConnection) -> None:
    checks = _diagnosis(ledger, "cache_break")  # the fake provider drops the cache 1 s after writing it
    assert [c.status for c in checks] == [WRITTEN, CACHED, BROKEN]
    assert "broken by" not in checks[2].note and "cache evicted early: 1 s after turn 2" in checks[2].note


def test_a_short_prompt_on_haiku_is_below_its_minimum(ledger: duckdb.DuckDBPyConnection) -> None:
    checks = _diagnosis(ledger, "below_minimum")
    assert [c.status for c in checks] == [BELOW_MINIMUM] * 2
    assert all("claude-haiku-4-5 caches 4,096 or more" in c.note for c in checks)
    run = _run(ledger, "below_minimum")  # a prompt claude-opus-5 would cache (its minimum is 512)
    assert run["uncached_input_tokens"] / run["model_calls"] > PriceBook.default().cache_minimum("claude-opus-5")


@pytest.fixture(scope="module")
def assembled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    con = open_ledger(tmp_path_factory.mktemp("samples") / "assembled.duckdb")
    for name in ASSEMBLED:
        ingest(con, read_file(FOLDER.parent / f"{name}.json"))
    yield con
    con.close()


def test_the_expensive_sample_runs_carry_their_payloads(assembled: duckdb.DuckDBPyConnection) -> None:
    runs = q.records(assembled, q.long_tail(limit=6))
    assert [round(float(r["usd_total"]), 2) for r in runs][:5] == [9.93, 0.82, 0.26, 0.21, 0.14]  # the seeds'
    missing = assembled.execute(
        "SELECT count(*) FROM charges ch ANTI JOIN contexts USING (trace_id, span_id) WHERE model <> 'gpt-4o'"
    ).fetchone()
    assert missing == (0,)  # every call of every run has its request (but the OpenAI-style span's)


def test_the_long_tail_run_is_diagnosed_as_never_cached(assembled: duckdb.DuckDBPyConnection) -> None:
    a93 = next(s for s in ASSEMBLED["long_tail"]() if s.attributes.get(c.CONVERSATION_ID) == "conv-a93").trace_id
    turns = q.records(assembled, q.run_turns(a93))
    spans = {int(t["turn"]): str(t["span_id"]) for t in turns}
    checks = diagnose(turns, lambda n: load_context(assembled, a93, spans[n]), PriceBook.default().cache_minimum)
    assert len(checks) == 40 and {c.status for c in checks} == {NO_BREAKPOINT}
