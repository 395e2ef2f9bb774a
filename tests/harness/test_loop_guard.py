"""LoopGuard: each detector fires on its own shape and stays quiet on the others
(seed 000 exercise 4, "Test it" scenarios 1, 2, 3, 5, 6), and in a full run
the nudge comes first and the halt second."""

from __future__ import annotations

import pytest

from collector.demo.scenarios import build
from collector.harness import InMemoryObserver, LoopGuard, run_agent
from ledger import conventions as c


def test_repeat_trips_on_the_fourth_identical_call() -> None:  # scenario 1
    g = LoopGuard()  # repeat=3, cycle=2, stall=6
    out = [g.check("search_docs", {"q": "rate limit"}, {"step": i}) for i in range(4)]
    assert out[:3] == [None, None, None]
    assert out[3] is not None and out[3].shape == "repeat" and not out[3].halt
    assert "4 times" in out[3].message


def test_argument_order_does_not_hide_a_repeat() -> None:
    g = LoopGuard(repeat=1)
    assert g.check("t", {"a": 1, "b": 2}) is None
    trip = g.check("t", {"b": 2, "a": 1})
    assert trip is not None and trip.shape == "repeat"


def test_cycle_trips_on_a_frozen_world_while_repeat_stays_quiet() -> None:  # scenario 2
    g = LoopGuard()
    ab = [g.check(t, {"path": "config.yaml"}, {"mtime": 1}) for t in ("read_file", "write_file", "read_file")]
    assert ab[:2] == [None, None]
    assert ab[2] is not None and ab[2].shape == "cycle" and "cycling" in ab[2].message


def test_stall_trips_after_six_steps_without_progress() -> None:  # scenario 3
    g = LoopGuard()
    st = [g.check(f"edit_{i}", {"i": i}, {"step": i}, progress=3.0) for i in range(8)]
    assert st[:7] == [None] * 7
    assert st[7] is not None and st[7].shape == "stall"


def test_any_improvement_resets_the_stall_count() -> None:
    g = LoopGuard()
    # Progress improves every 6th step: never 7 steps in a row without a new best.
    trips = [g.check(f"t{i}", {"i": i}, {"s": i}, progress=float(i // 6)) for i in range(30)]
    assert trips == [None] * 30


def test_step_cap_halts_without_raising() -> None:  # scenario 5
    g = LoopGuard(max_steps=2)
    assert [g.check(f"t{i}", {}, {"s": i}) for i in range(2)] == [None, None]
    trip = g.check("t2", {}, {"s": 2})
    assert trip is not None and trip.shape == "step_cap" and trip.halt and g.halted


def test_no_false_positive_on_a_varied_progressing_run() -> None:  # scenario 6
    g = LoopGuard()
    assert all(g.check(f"tool_{i}", {"i": i}, {"step": i}, progress=float(i)) is None for i in range(12))
    assert g.trips == 0


def test_first_trip_nudges_second_trip_halts() -> None:
    g = LoopGuard()
    assert [g.check("search", {"q": "x"}) for _ in range(3)] == [None, None, None]
    first = g.check("search", {"q": "x"})
    assert first is not None and not first.halt and not g.halted
    second = g.check("search", {"q": "x"})
    assert second is not None and second.halt and g.halted


def test_without_a_state_snapshot_a_read_only_run_is_not_a_cycle() -> None:
    g = LoopGuard()
    assert all(g.check("search_kb", {"query": f"q{i}"}, None) is None for i in range(10))


@pytest.mark.parametrize("scenario, shape", [("looping", "repeat"), ("cycle", "cycle"), ("stall", "stall")])
def test_each_shape_trips_only_its_own_detector_in_a_run(scenario: str, shape: str) -> None:
    b = build(scenario)
    obs = InMemoryObserver()
    result = run_agent(b.llm, b.task, b.tools, observer=obs, **b.options)

    trips = [(e.attributes["shape"], e.attributes["action"]) for e in obs.events_named(c.EVENT_LOOP_TRIP)]
    assert trips == [(shape, "nudge"), (shape, "halt")]
    assert result.stop_cause == "loop_detected" and not result.ok
    assert shape in result.detail and result.missing


def test_the_nudge_reaches_the_model_as_an_error_result_before_the_halt() -> None:
    b = build("looping")
    result = run_agent(b.llm, b.task, b.tools, **b.options)

    # Calls 1-3 run normally, call 4 is answered with the nudge, call 5 halts.
    assert len(result.steps) == 5
    nudged = [e for s in result.steps for e in s.tool_executions if e.nudged]
    assert len(nudged) == 1 and nudged[0].is_error
    results = [
        b
        for m in result.transcript
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
    assert results[-1]["is_error"] is True and "exact arguments 4 times" in results[-1]["content"]
    # The model was called again after reading the nudge; only then did the run stop.
    assert result.transcript[-1]["role"] == "assistant"


@pytest.mark.parametrize("scenario", ["happy", "recovering", "budget_burner", "cache_break"])
def test_healthy_and_non_loop_runs_never_trip(scenario: str) -> None:
    b = build(scenario)
    obs = InMemoryObserver()
    run_agent(b.llm, b.task, b.tools, observer=obs, **b.options)
    assert obs.events_named(c.EVENT_LOOP_TRIP) == []
