"""The dashboard's pure logic: token estimates, the prefix diff, cache-break flags, tree order."""

from __future__ import annotations

import json

import pytest

from dashboard.analysis import expense_reasons, payload_components, quadratic_fit, tree_rows
from dashboard.charts import cost_distribution
from dashboard.ui import plain, usd
from ledger.cache_diagnosis import check_cache, merge_prefix_findings, previous_same_call
from ledger.turn_diff import estimate_tokens, first_prefix_change, payload_diff

TOOLS = [{"name": "search", "description": "search the docs"}]


def request(question: str, *, system: str = "You are a support agent.", tools=TOOLS, history=()):  # type: ignore[no-untyped-def]
    return {
        "model": "claude-opus-5",
        "system": system,
        "tools": list(tools),
        "messages": [*history, {"role": "user", "content": question}],
    }


# --- token estimate --------------------------------------------------------------------------
def test_estimate_is_chars_over_four_rounded_up():
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens({"a": 1}) == 2  # '{"a":1}' is 7 characters


def test_components_follow_the_payload_order_and_split_tools_and_messages():
    payload = {
        "model": "m",
        "system": "s" * 400,
        "tools": [{"name": "search_docs"}, {"name": "get_account"}],
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "name": "search_docs", "input": {}}]},
        ],
    }
    parts = payload_components(payload)
    assert [p.part for p in parts] == ["model", "system", "tools[0]", "tools[1]", "messages[0]", "messages[1]"]
    assert parts[1].tokens == 101  # 402 characters with the JSON quotes
    assert parts[2].label == "tool search_docs"
    assert parts[5].label == "assistant: tool_use search_docs"
    assert all(p.tokens == -(-p.chars // 4) for p in parts)


# --- the invalidator finder (seed 000, exercise 7) ------------------------------------------------
def test_healthy_conversation_has_no_prefix_change():
    t1 = request("q1")
    t2 = request(
        "q2", history=[*t1["messages"][:-1], {"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"}]
    )
    assert first_prefix_change(t1, t2) is None


def test_the_probe_itself_is_not_a_finding_but_a_clock_in_the_system_prompt_is():
    a = request("q1", system="You are a support agent. [2026-07-30T09:15:01]")
    b = request("q2", system="You are a support agent. [2026-07-30T09:15:02]")
    change = first_prefix_change({**a, "messages": []}, b)
    assert change is not None
    assert change.part == "system" and change.path == "system"
    assert "2026-07-30T09:15:01" in change.before and "2026-07-30T09:15:02" in change.after
    assert "character 44" in change.what  # len("You are a support agent. [2026-07-30T09:15:0")


def test_shuffled_tool_keys_are_caught_not_normalized_away():
    shuffled = [dict(reversed(list(TOOLS[0].items())))]
    change = first_prefix_change(request("q1"), request("q1", tools=shuffled))
    assert change is not None and change.part == "tools"
    assert "order" in change.what and change.path == "tools[0]"


def test_model_switch_and_edited_history_and_truncation():
    base = request("q1", history=[{"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"}])
    assert first_prefix_change(base, {**base, "model": "claude-haiku-4-5"}).part == "model"  # type: ignore[union-attr]

    edited = json.loads(json.dumps(base))
    edited["messages"][1]["content"] = "OK"
    change = first_prefix_change(base, edited)
    assert change is not None and change.part == "messages[1]" and change.path == "messages[1].content"

    truncated = {**base, "messages": [base["messages"][0], base["messages"][2]]}  # the task kept, the middle dropped
    change = first_prefix_change(base, truncated)
    assert change is not None and change.part == "messages[1]"

    # An independent call of the same site (a summarizer's next document) is not a continuation.
    assert first_prefix_change(request("summarize doc 1"), request("summarize doc 2")) is None
    assert first_prefix_change(request("doc 1"), request("doc 2", system="other")).part == "system"  # type: ignore[union-attr]

    nested = json.loads(json.dumps(base))
    nested["system"] = [{"type": "text", "text": "You are a support agent.", "cache_control": {"type": "ephemeral"}}]
    base_blocks = {**base, "system": [{"type": "text", "text": "You are a support agent."}]}
    change = first_prefix_change(base_blocks, nested)
    assert change is not None and change.path == "system[0].cache_control" and "added" in change.what


def test_payload_diff_keeps_key_order_and_is_empty_for_equal_payloads():
    a = request("q1")
    assert payload_diff(a, a) == ""
    shuffled = request("q1", tools=[dict(reversed(list(TOOLS[0].items())))])
    diff = payload_diff(a, shuffled)
    assert '-      "name": "search",' in diff and '+      "name": "search"' in diff


# --- cache-break flags --------------------------------------------------------------------------------
def _turn(n, read, write, uncached=0, site="agent", model="m"):  # type: ignore[no-untyped-def]
    return {"turn": n, "call_site": site, "model": model, "cache_read_tokens": read,
            "cache_write_tokens": write, "uncached_input_tokens": uncached}  # fmt: skip


def test_five_turn_run_reads_back_everything_it_cached():
    turns = [
        _turn(1, 0, 6_100, 20),
        _turn(2, 6_100, 1_300),
        _turn(3, 7_400, 900),
        _turn(4, 8_300, 700),
        _turn(5, 9_000, 400, 40),
    ]
    assert [c.status for c in check_cache(turns)] == ["written", "cached", "cached", "cached", "cached"]


def test_a_turn_reading_less_than_was_cached_is_flagged_with_the_shortfall():
    checks = check_cache([_turn(1, 0, 6_000), _turn(2, 6_000, 300), _turn(3, 0, 320, 6_320)])
    assert [c.status for c in checks] == ["written", "cached", "broken"]
    assert checks[2].expected_read == 6_300 and "6,300 re-billed" in checks[2].note


def test_1_hour_cache_writes_count_as_cached_for_the_next_turn():
    one_hour = {**_turn(1, 0, 0), "cache_write_1h_tokens": 6_100}  # the run's first call wrote for 1 hour
    checks = check_cache([one_hour, _turn(2, 6_100, 300), _turn(3, 0, 0, 6_400)])
    assert [c.status for c in checks] == ["written", "cached", "broken"]
    assert "wrote 6,100 tokens" in checks[0].note and checks[1].expected_read == 6_100


def test_cache_checks_compare_within_one_call_site_and_model():
    checks = check_cache([_turn(1, 0, 5_000), _turn(2, 0, 0, 900, site="summarizer"), _turn(3, 5_000, 100)])
    assert [c.status for c in checks] == ["written", "not cached", "cached"]
    assert [c.status for c in check_cache([_turn(1, 0, 0, 500), _turn(2, 0, 0, 900)])] == ["not cached", "not cached"]


# --- trace tree ---------------------------------------------------------------------------------------
def test_tree_rows_are_depth_first_by_start_time_and_keep_orphans():
    spans = [
        {"span_id": "c2", "parent_span_id": "r", "start_time": 3},
        {"span_id": "r", "parent_span_id": "", "start_time": 0},
        {"span_id": "g1", "parent_span_id": "c1", "start_time": 2},
        {"span_id": "c1", "parent_span_id": "r", "start_time": 1},
        {"span_id": "o", "parent_span_id": "missing", "start_time": 5},
    ]
    assert [(d, s["span_id"]) for d, s in tree_rows(spans)] == [(0, "r"), (1, "c1"), (2, "g1"), (1, "c2"), (0, "o")]


# --- long tail ---------------------------------------------------------------------------------------
def test_expense_reasons_name_turns_step_cap_and_cache():
    a93 = {"turns": 40, "stop_cause": "max_steps", "hit_rate": 0.0, "input_tokens": 1_904_000, "retry_attempts": 0,
           "loop_trips": 0, "models": "claude-opus-5", "times_median": 99.6}  # fmt: skip
    reasons = expense_reasons(a93, {"median_turns": 1, "median_input_tokens": 24_710})
    assert reasons[0].startswith("40 turns (40× the median)")
    assert "ran into the step cap" in reasons
    assert any(r.startswith("cache hit rate 0% on 1,904,000") for r in reasons)
    assert expense_reasons({"times_median": 0.5}, {}) == ["not expensive: at or below the median cost"]


def test_quadratic_fit_recovers_a_quadratic():
    a, b = quadratic_fit([1, 2, 5, 10], [0.01 * n + 0.002 * n * n for n in (1, 2, 5, 10)])  # type: ignore[misc]
    assert a == pytest.approx(0.01) and b == pytest.approx(0.002)
    assert quadratic_fit([3, 3], [1.0, 2.0]) is None


def test_the_fit_never_predicts_negative_cost_for_a_short_run():
    """#31: cheap short runs and steeply dearer long ones: an unconstrained least-squares fit has
    a = -0.082 and reads -$0.075 for a one-turn run. Each term is a cost, so neither may be negative."""
    turns, cost = [1, 3, 10, 30, 40], [0.01, 0.01, 0.2, 4.0, 9.0]
    a, b = quadratic_fit(turns, cost)  # type: ignore[misc]
    assert a >= 0 and b >= 0
    assert all(a * n + b * n * n >= 0 for n in range(0, 41))


# --- formats and safe labels ---------------------------------------------------------------------------
def test_usd_format():
    assert [usd(v) for v in (0.0427, 0.014925, 9.93, 11.5577, 0, 0.00004, None)] == [
        "$0.0427", "$0.0149", "$9.93", "$11.56", "$0.0000", "$4e-05", "—",
    ]  # fmt: skip


def test_plotly_labels_are_escaped():
    assert plain('<img src=x onerror="alert(1)">') == '&lt;img src=x onerror="alert(1)"&gt;'


def test_cost_distribution_marks_median_and_p95_on_a_log_axis():
    import pandas as pd

    hist = pd.DataFrame({"lo_usd": [0.0, 0.1, 10**0.2], "hi_usd": [0.0, 10**-0.8, 10**0.4], "runs": [1, 3, 2]})
    fig = cost_distribution(hist, 0.12, 2.0, per_decade=5)
    assert fig.layout.xaxis.type == "log"
    names = [t.name for t in fig.data]
    assert names == ["runs", "median $0.1200", "p95 $2.00"]
    steps = fig.data[0]
    assert list(steps.y) == [3, 0, 0, 0, 0, 0, 2, 0]  # empty bins drawn at zero, not skipped


def test_previous_same_call_skips_other_call_sites_and_models():
    turns = [
        _turn(1, 0, 0),
        _turn(2, 0, 0, site="summarizer", model="haiku"),
        _turn(3, 0, 0),
        _turn(4, 0, 0, site="summarizer", model="haiku"),
    ]
    assert previous_same_call(turns) == {3: 1, 4: 2}


def test_payload_findings_name_the_invalidator_and_flag_what_usage_cannot_see():
    checks = check_cache([_turn(1, 0, 6_000), _turn(2, 0, 6_000, 20), _turn(3, 6_000, 0), _turn(4, 6_000, 0)])
    change = first_prefix_change(request("q", system="v1"), request("q", system="v2"))
    merged = merge_prefix_findings(checks, {2: change, 3: None, 4: change})
    assert [c.status for c in merged] == ["written", "broken", "cached", "prefix changed"]
    assert merged[1].note.startswith("broken by system: text differs from character 1; ")
    assert merged[3].note == "cache invalidated at system: text differs from character 1"
