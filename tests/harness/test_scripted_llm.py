"""ScriptedLLM: deterministic, with usage that behaves like the real API's."""

from __future__ import annotations

import itertools
import json

import pytest

from collector.demo.scenarios import build
from collector.demo.scripted_llm import PromptCacheModel, Reply, ScriptedLLM
from collector.harness import run_agent
from collector.harness.llm import ProviderError, build_request
from ledger.pricing import PriceBook

TOOLS = [{"name": "search_kb", "description": "Search.", "input_schema": {"type": "object", "properties": {}}}]
BIG_SYSTEM = "Policy text. " * 400  # ~1,300 tokens: above the 1,024-token caching minimum


def request(messages, system=BIG_SYSTEM, cache=True):
    return build_request("claude-opus-5", system, messages, TOOLS, 1024, cache=cache)


def history(turns: int) -> list[dict]:
    messages: list[dict] = [{"role": "user", "content": "Tell me about PTO."}]
    for i in range(turns):
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{i}", "name": "search_kb", "input": {"query": f"page {i}"}}],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": f"result {i} " * 30}],
            }
        )
    return messages


def test_input_tokens_track_the_json_size_of_the_request() -> None:
    req = request(history(3), cache=False)
    uncached, write, read = PromptCacheModel(min_tokens=1024).usage(req)
    assert write == read == 0
    size = len(json.dumps({k: req[k] for k in ("system", "messages", "tools")}, separators=(",", ":")))
    assert abs(uncached - size / 4) < 0.1 * size / 4


def test_first_call_writes_later_calls_read_the_previous_prefix_and_write_the_rest() -> None:
    cache = PromptCacheModel(min_tokens=1024)
    u1, w1, r1 = cache.usage(request(history(0)))
    u2, w2, r2 = cache.usage(request(history(1)))
    u3, w3, r3 = cache.usage(request(history(2)))
    assert (u1, r1) == (0, 0) and w1 > 1024  # first call: everything is written
    assert r2 == w1 and w2 > 0 and u2 == 0  # the previous prompt is read, only the new part written
    assert r3 == r2 + w2  # and so on: each call reads what the last one cached
    assert w3 == w2 and u3 == 0  # equal-sized turns write equal amounts: only the new part


def test_a_changed_prefix_reads_nothing() -> None:
    cache = PromptCacheModel(min_tokens=1024)
    cache.usage(request(history(1)))
    _, write, read = cache.usage(request(history(2), system="Today is 2026-09-25. " + BIG_SYSTEM))
    assert read == 0 and write > 1024


def test_moving_the_cache_marker_does_not_break_the_cache() -> None:
    cache = PromptCacheModel(min_tokens=1024)
    first = request(history(1))
    cache.usage(first)
    second = request(history(1))
    del second["cache_control"]  # same bytes, one breakpoint fewer
    second["messages"][-1]["content"][0]["cache_control"] = {"type": "ephemeral"}
    assert cache.usage(second)[2] > 0


def test_prefixes_below_the_minimum_are_not_cached() -> None:
    assert PromptCacheModel(min_tokens=1024).usage(request(history(0), system="Short."))[1:] == (0, 0)


@pytest.mark.parametrize("model", ["claude-opus-5", "claude-sonnet-5", "claude-haiku-4-5-20251001"])
def test_each_model_caches_from_its_minimum_in_the_price_book(model: str) -> None:
    minimum = PriceBook.default().cache_minimum(model)
    assert minimum is not None
    assert ScriptedLLM(lambda v: Reply.answer("ok"), model=model).prompt_cache.min_tokens == minimum
    text = "Policy text. " * minimum  # ~4 characters a token: cut to a little over, then under, the minimum
    system = text[: 4 * minimum + 200]
    llm = ScriptedLLM(lambda v: Reply.answer("ok"), model=model)
    assert llm.complete(system, [{"role": "user", "content": "x"}], TOOLS, 100).usage.cache_creation_input_tokens > 0
    short = text[: 4 * minimum - 600]  # the breakpoint is ignored
    llm = ScriptedLLM(lambda v: Reply.answer("ok"), model=model)
    assert llm.complete(short, [{"role": "user", "content": "x"}], TOOLS, 100).usage.cache_creation_input_tokens == 0


def test_a_short_prompt_caches_on_opus_5_and_not_on_haiku_4_5() -> None:
    """The triage prompt (~550 tokens) is over claude-opus-5's 512 and under claude-haiku-4-5's 4,096."""
    usage = {}
    for model in ("claude-opus-5", "claude-haiku-4-5"):
        b = build("triage", model=model)
        usage[model] = [s.usage for s in run_agent(b.llm, b.task, b.tools, **b.options).steps]
    assert usage["claude-opus-5"][1].cache_read_input_tokens > 512
    assert all(u.cache_creation_input_tokens == u.cache_read_input_tokens == 0 for u in usage["claude-haiku-4-5"])


def _cache_usage(name: str) -> list[tuple[int, int, int]]:
    b = build(name, model="claude-sonnet-5")
    result = run_agent(b.llm, b.task, b.tools, **b.options)
    return [(s.usage.input_tokens, s.usage.cache_creation_input_tokens, s.usage.cache_read_input_tokens)
            for s in result.steps]  # fmt: skip


def test_a_production_sized_prompt_caches_every_turn_after_the_first() -> None:
    usage = _cache_usage("policy_research")
    assert len(usage) == 5 and usage[0][1] > 3_000 and usage[0][2] == 0
    for (_, write, read), (uncached, _, next_read) in itertools.pairwise(usage):
        assert next_read == read + write and uncached == 0  # each turn reads all the last one cached
    reads = sum(r for *_, r in usage)
    assert reads / sum(map(sum, usage)) > 0.7  # the seeds' "healthy" band


def test_a_clock_in_the_system_prompt_rewrites_the_cache_every_turn() -> None:
    healthy, broken = _cache_usage("policy_research"), _cache_usage("clock_in_prompt")
    assert [r for *_, r in broken] == [0] * 5  # nothing is ever read back
    assert all(write > 3_000 for _, write, _ in broken)  # the whole prompt written again, every turn
    assert sum(w for _, w, _ in broken) > 4 * sum(w for _, w, _ in healthy)


def test_a_reordered_tool_list_breaks_the_cache_once() -> None:
    usage = _cache_usage("tools_reordered")
    assert usage[1][2] > 0 and usage[2][2] == 0 and usage[2][1] > 3_000  # turn 3: the tools moved
    assert usage[3][2] == usage[2][1] and usage[4][2] > 0  # then the new order is cached again


def test_an_evicted_cache_reads_zero() -> None:
    b = build("cache_break")
    result = run_agent(b.llm, b.task, b.tools, **b.options)
    reads = [s.usage.cache_read_input_tokens for s in result.steps]
    assert reads[0] == 0 and reads[1] > 0 and reads[2] == 0


def test_runs_are_deterministic() -> None:
    runs = []
    for _ in range(2):
        b = build("happy")
        result = run_agent(b.llm, b.task, b.tools, run_id="fixed", **b.options)
        runs.append(([s.usage for s in result.steps], result.transcript))
    assert runs[0] == runs[1]


def test_faults_fail_one_attempt_each_then_the_call_succeeds() -> None:
    llm = ScriptedLLM(lambda v: Reply.answer("hi"), faults={0: [ProviderError(529)]})
    req = llm.build_request("s", [{"role": "user", "content": "x"}], [], 100)
    try:
        llm.send(req)
    except ProviderError as e:
        assert e.status == 529
    else:
        raise AssertionError("the scripted fault did not fire")
    assert llm.send(req).text == "hi" and llm.calls == 1


def test_output_over_max_tokens_is_truncated_like_the_api() -> None:
    llm = ScriptedLLM(lambda v: Reply.answer("word " * 500))
    resp = llm.complete("s", [{"role": "user", "content": "x"}], [], 50)
    assert resp.stop_reason == "max_tokens" and resp.usage.output_tokens == 50 and len(resp.text) < 2500
