"""The query builders added for the dashboard, on the sample ledger, against the seed figures."""

from __future__ import annotations

import pytest

from ledger import queries as q

from .conftest import CACHE_BREAK, FIVE_TURN

RETRY_RUN = "e75d8bc5a27f11b433ccb1283df48b52"
BUDGET_RUN = "35bdd0c8ce66d31423d98455448ff3ab"
A93 = "b70f36bc38254433cfd5faee14c1b6a5"


def one(df):  # type: ignore[no-untyped-def]
    assert len(df) == 1
    return df.iloc[0]


def test_new_builders_are_registered_and_exported():
    for name in ("filter_values", "time_bounds", "charge_totals", "cost_histogram", "cost_by_turns", "typical_run",
                 "find_runs", "run_header", "run_trace_tree", "run_guard_events", "run_budget_limits",
                 "loop_trips_over_time", "loop_trip_runs", "loop_spend", "budget_events",
                 "alert_history", "price_sources"):  # fmt: skip
        assert q.QUERIES[name] is getattr(q, name) and name in q.__all__


def test_filter_values_and_bad_dimension(sample_db, rows):
    assert rows(sample_db, q.filter_values("model"))["value"].tolist() == [
        "claude-opus-5", "claude-sonnet-5", "gpt-4o", "mystery-model-1",
    ]  # fmt: skip
    assert rows(sample_db, q.filter_values("tenant"))["value"].tolist() == ["acme", "globex", "initech"]
    with pytest.raises(ValueError, match="dimension='runs; DROP'"):
        q.filter_values("runs; DROP")


def test_charge_totals_match_the_canonical_queries(sample_db, rows):
    totals = one(rows(sample_db, q.charge_totals()))
    by_cause = rows(sample_db, q.retry_charges())
    assert totals["retry_attempts"] == by_cause["attempts"].sum() == 1
    assert totals["retry_usd"] == pytest.approx(by_cause["usd"].sum()) == pytest.approx(0.00495)
    assert totals["retry_share_of_spend"] == pytest.approx(0.00495 / 11.5577)
    cache = one(rows(sample_db, q.cache_hit_rate()))
    assert totals["hit_rate"] == pytest.approx(cache["hit_rate"]) and totals["verdict"] == cache["verdict"] == "broken"
    assert totals["total_usd"] == pytest.approx(11.5577) and totals["unpriced_calls"] == 1


def test_cost_histogram_counts_every_run_once(sample_db, rows):
    hist = rows(sample_db, q.cost_histogram(bins_per_decade=5))
    assert hist["runs"].sum() == 10
    zero = hist[hist["lo_usd"] == 0]
    assert zero["runs"].tolist() == [1]  # the unpriced run
    a93 = hist[(hist["lo_usd"] <= 9.93) & (hist["hi_usd"] > 9.93)]
    assert a93["runs"].tolist() == [1]


def test_cost_by_turns_and_typical_run(sample_db, rows):
    by_turns = rows(sample_db, q.cost_by_turns()).set_index("turns")
    assert by_turns.loc[40, "median_usd"] == pytest.approx(9.93)
    assert by_turns["runs"].sum() == 10
    typical = one(rows(sample_db, q.typical_run()))
    assert typical["median_usd"] == pytest.approx(0.0997)
    assert typical["runs_from_p95"] == 1 and typical["share_of_spend_from_p95"] == pytest.approx(9.93 / 11.5577)


def test_find_runs_by_prefix_cause_cost_and_order(sample_db, rows):
    assert rows(sample_db, q.find_runs(trace_id=FIVE_TURN[:8].upper()))["trace_id"].tolist() == [FIVE_TURN]
    assert rows(sample_db, q.find_runs(stop_cause="max_steps"))["trace_id"].tolist() == [A93]
    assert rows(sample_db, q.find_runs(min_usd=0.5, max_usd=1.0))["trace_id"].tolist() == [BUDGET_RUN]
    by_cost = rows(sample_db, q.find_runs(order="cost", limit=2))["usd_total"].tolist()
    assert by_cost == pytest.approx([9.93, 0.82])
    with pytest.raises(ValueError):
        q.find_runs(order="usd_total; --")


def test_run_header_has_the_five_turn_hit_rate(sample_db, rows):
    header = one(rows(sample_db, q.run_header(FIVE_TURN)))
    assert round(header["hit_rate"], 3) == 0.765 and header["verdict"] == "healthy"
    assert header["usd_total"] == pytest.approx(0.0997)


def test_run_trace_tree_has_durations_soft_failures_and_attempt_charges(sample_db, rows):
    tree = rows(sample_db, q.run_trace_tree(RETRY_RUN))
    assert len(tree) == 13
    root = tree[tree["operation"] == "invoke_agent"].iloc[0]
    assert root["offset_ms"] == 0 and root["duration_ms"] == pytest.approx(15_113)
    tools = tree[tree["operation"] == "execute_tool"]
    assert tools["soft_failure"].all() and (tools["tool_result"] == "0 results").all()
    attempts = tree[tree["attempt"].fillna(0) >= 1].sort_values("offset_ms")
    assert attempts.iloc[0]["status_code"] == "ERROR" and attempts.iloc[0]["usd"] == 0
    assert attempts.iloc[1]["attempt"] == 2 and attempts.iloc[1]["usd"] == pytest.approx(0.00495)


def test_run_guard_events_and_budget_limits(sample_db, rows):
    events = rows(sample_db, q.run_guard_events(RETRY_RUN))
    assert events["name"].tolist() == [
        "turnledger.retry", "turnledger.loop_detector.trip", "turnledger.loop_detector.trip",
    ]  # fmt: skip
    assert events["action"].tolist()[1:] == ["nudge", "halt"]
    limits = rows(sample_db, q.run_budget_limits(BUDGET_RUN))
    assert limits[["source", "limit_usd", "fraction"]].values.tolist() == [["event", 1.0, 0.82]]
    assert rows(sample_db, q.run_budget_limits(FIVE_TURN)).empty


def test_loop_queries_count_the_model_calls_between_the_repeated_tool_calls(sample_db, rows):
    runs = rows(sample_db, q.loop_trip_runs()).set_index("trace_id")
    run = runs.loc[RETRY_RUN]
    assert run["tool"] == "search_docs" and run["trips"] == 2
    assert run["repeated_calls"] == 5 and run["actions"] == "halt, nudge"
    # Calls 2..5 of the loop sit between the first and the last search_docs: (1300+150i)*$3/M + 60*$15/M.
    assert run["loop_usd"] == pytest.approx(sum((1_300 + 150 * i) * 3e-6 + 60 * 15e-6 for i in range(1, 5)))
    assert run["run_usd"] == pytest.approx(0.03345)
    # The long-tail runs report no loop detector: their repeated get_shipping_status is found in the spans,
    # and as nothing stopped them the loop lasts to the last repeated call: every model call but the first
    # (before any tool) and the last (after the last tool) chose the same call again.
    detected = runs[runs["actions"] == "detected"]
    assert set(detected["tool"]) == {"get_shipping_status"} and (detected["trips"] == 1).all()
    for trace_id, loop in detected.iterrows():
        turns = rows(sample_db, q.run_turns(trace_id))
        assert loop["repeated_calls"] == len(turns) - 1
        assert loop["loop_usd"] == pytest.approx(turns["usd"].iloc[1:-1].sum())
    assert sorted(detected["repeated_calls"]) == [4, 5, 39]
    total = one(rows(sample_db, q.loop_spend()))
    assert total["trips"] == 5 and total["detected_trips"] == 3 and total["runs_affected"] == 4
    assert total["loop_usd"] == pytest.approx(runs["loop_usd"].sum())
    assert total["spend_in_affected_runs"] == pytest.approx(runs["run_usd"].sum())
    over_time = rows(sample_db, q.loop_trips_over_time(bucket="hour"))
    assert over_time[["shape", "tool", "trips", "runs_affected"]].values.tolist() == [
        ["repeat", "get_shipping_status", 1, 1], ["repeat", "search_docs", 2, 1],
        ["repeat", "get_shipping_status", 1, 1], ["repeat", "get_shipping_status", 1, 1],
    ]  # fmt: skip


def test_budget_events_status_alerts_and_price_sources(sample_db, rows):
    events = one(rows(sample_db, q.budget_events()))
    assert events["trace_id"] == BUDGET_RUN and events["level"] == "warn"
    assert events["spent_usd"] == pytest.approx(0.82) and events["limit_usd"] == 1.0
    assert rows(sample_db, q.alert_history()).empty
    prices = rows(sample_db, q.price_sources()).set_index("model")
    assert prices.loc["mystery-model-1", "price_source"] == "unpriced"
    assert prices.loc["claude-opus-5", "usd"] == pytest.approx(11.52175)


def test_builders_follow_filters(sample_db, rows):
    globex = q.Filters(tenant="globex")
    assert one(rows(sample_db, q.time_bounds(globex)))["runs"] == 3
    assert set(rows(sample_db, q.loop_trip_runs(globex))["tenant"]) == {"globex"}
    assert rows(sample_db, q.loop_trip_runs(q.Filters(tenant="initech"))).empty
    assert one(rows(sample_db, q.charge_totals(q.Filters(model="claude-opus-5"))))["retry_attempts"] == 0


def test_cache_break_run_is_in_the_extended_ledger(extended_db, rows):
    turns = rows(extended_db, q.run_turns(CACHE_BREAK))
    assert turns["cache_read_tokens"].tolist() == [0, 6_000, 0]
