"""Every guard decision is a span event on the span it judged, and the ledger counts it.

Each scenario runs through the real harness, the OTel SDK and the in-process
exporter into a DuckDB file; the figures come from ``ledger.queries``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from opentelemetry.trace import StatusCode

from collector.harness.llm import ProviderError
from ledger import conventions as c
from ledger import queries as q
from tests.telemetry.helpers import Traced, by_name, rows

LOOPS = {
    # scenario: (shape, tool the trip lands on: nudge, halt)
    "looping": ("repeat", "search_kb", "search_kb"),
    "cycle": ("cycle", "read_file", "write_file"),
    "stall": ("stall", "edit_file", "edit_file"),
}


def events(t: Traced, name: str) -> list[tuple[str, dict]]:
    """(span name, event attributes) of every event called ``name``, in time order."""
    found = [(e.timestamp, s.name, dict(e.attributes or {})) for s in t.spans() for e in s.events if e.name == name]
    return [(span, attrs) for _, span, attrs in sorted(found, key=lambda x: x[0])]


@pytest.mark.parametrize("scenario", sorted(LOOPS))
def test_each_loop_shape_is_an_event_on_the_tripping_tool_call_and_counted(
    traced: Callable[..., Traced], scenario: str
) -> None:
    shape, nudged_tool, halted_tool = LOOPS[scenario]
    t = traced()
    result = t.run(scenario)
    assert result.stop_cause == "loop_detected"
    trips = events(t, c.EVENT_LOOP_TRIP)
    assert trips == [
        (f"execute_tool {nudged_tool}", {"shape": shape, "action": "nudge", "tool": nudged_tool}),
        (f"execute_tool {halted_tool}", {"shape": shape, "action": "halt", "tool": halted_tool}),
    ]
    root = by_name(t.spans(), "invoke_agent")[0]
    assert root.status.status_code is StatusCode.ERROR
    assert root.attributes[c.ERROR_TYPE] == "loop_detected"
    assert root.attributes[c.STOP_CAUSE] == "loop_detected"
    t.close()
    with t.open() as con:
        counted = [(r["shape"], r["trips"], r["nudges"], r["halts"]) for r in rows(con, q.loop_trips())]
        assert counted == [(shape, 2, 1, 1)]
        run = rows(con, q.runs_table())[0]
        assert (run["stop_cause"], run["loop_trips"]) == ("loop_detected", 2)


def test_step_cap_is_an_event_on_the_root_with_error_status(traced: Callable[..., Traced]) -> None:
    t = traced()
    result = t.run("soft_failure")
    assert result.stop_cause == "max_steps"
    assert events(t, c.EVENT_LOOP_TRIP) == [("invoke_agent agent", {"shape": "step_cap", "action": "halt"})]
    root = by_name(t.spans(), "invoke_agent")[0]
    assert root.status.status_code is StatusCode.ERROR and root.attributes[c.ERROR_TYPE] == "max_steps"
    # Soft failures keep their result on the span and do not turn it into an error.
    tools = by_name(t.spans(), "execute_tool")
    assert len(tools) == 6
    for span in tools:
        assert span.status.status_code is StatusCode.UNSET
        assert span.attributes[c.TOOL_SOFT_FAILURE] is True
        assert span.attributes[c.TOOL_CALL_RESULT].startswith("No tracking information found for order A-")
    t.close()
    with t.open() as con:
        assert rows(con, q.loop_trips()) == []  # the step limit is not a loop-detector trip
        summary = rows(con, q.guard_summary())[0]
        assert (summary["step_cap_rate"], summary["step_cap_halts"], summary["loop_trips"]) == (1.0, 1, 0)
        assert rows(con, q.runs_table())[0]["stop_cause"] == "max_steps"


def test_budget_warn_and_stop_are_root_events_counted_as_budget_events(traced: Callable[..., Traced]) -> None:
    t = traced()
    result = t.run("budget_burner")
    assert (result.stop_cause, len(result.steps), result.usage.total_tokens) == ("budget_exceeded", 11, 12_990)
    warn, stop = events(t, c.EVENT_BUDGET_WARN), events(t, c.EVENT_BUDGET_STOP)
    assert [span for span, _ in warn + stop] == ["invoke_agent agent", "invoke_agent agent"]
    assert stop[0][1] == {"kind": "tokens", "spent_tokens": 12_990, "limit_tokens": 12_000, "fraction": 1.0825}
    root = by_name(t.spans(), "invoke_agent")[0]
    assert root.status.status_code is StatusCode.ERROR and root.attributes[c.ERROR_TYPE] == "budget_exceeded"
    assert root.attributes[c.TOTAL_TOKENS] == 12_990
    t.close()
    with t.open() as con:
        budget = sorted((r["level"], r["kind"]) for r in rows(con, q.budget_events()))
        assert budget == [("stop", "tokens"), ("warn", "tokens")]
        assert rows(con, q.guard_summary())[0]["budget_stop_rate"] == 1.0
        tokens = con.execute(
            "SELECT sum(uncached_input_tokens + cache_write_tokens + cache_read_tokens + output_tokens), count(*) "
            "FROM charges"
        ).fetchone()
        assert tokens == (12_990, 11)


def test_retry_is_an_event_on_the_attempt_it_produced_and_a_retry_charge(traced: Callable[..., Traced]) -> None:
    t = traced()
    result = t.run("happy", faults={0: [ProviderError(429, retry_after=7), ProviderError(529)]})
    assert result.stop_cause == "completed"
    assert 7 <= t.sleeps[0] <= 7 * 1.3 and len(t.sleeps) == 2  # retry-after honoured, never early
    chats = by_name(t.spans(), "chat")
    retries = [(s.attributes[c.ATTEMPT], [dict(e.attributes) for e in s.events]) for s in chats]
    assert [(attempt, [e["cause"] for e in evs]) for attempt, evs in retries] == [
        (1, []),
        (2, ["429"]),
        (3, ["529"]),
        (1, []),
    ]
    t.close()
    with t.open() as con:
        by_cause = {r["cause"]: r["attempts"] for r in rows(con, q.retry_charges())}
        assert by_cause == {"429": 1, "529": 1}
        retry_events = con.execute("SELECT cause FROM guard_events WHERE name = ? ORDER BY time", [c.EVENT_RETRY])
        assert [r[0] for r in retry_events.fetchall()] == ["429", "529"]


def test_handoff_is_a_root_event(traced: Callable[..., Traced]) -> None:
    t = traced()
    assert t.run("handoff").stop_cause == "handoff"
    [(span, attrs)] = events(t, c.EVENT_HANDOFF)
    assert span == "invoke_agent agent" and attrs["tool"] == "handoff_to_human" and "finance" in attrs["reason"]
    root = by_name(t.spans(), "invoke_agent")[0]
    assert root.status.status_code is StatusCode.UNSET  # an outcome the model chose, not a failure
    t.close()
    with t.open() as con:
        assert con.execute("SELECT count(*) FROM guard_events WHERE name = ?", [c.EVENT_HANDOFF]).fetchone() == (1,)


@pytest.mark.parametrize("scenario", ["happy", "recovering", "cache_break", "refusal"])
def test_no_guard_event_where_no_guard_fired(traced: Callable[..., Traced], scenario: str) -> None:
    t = traced()
    t.run(scenario)
    assert [e.name for s in t.spans() for e in s.events] == []
    t.close()
    with t.open() as con:
        assert con.execute("SELECT count(*) FROM guard_events").fetchone() == (0,)
        assert rows(con, q.loop_trips()) == []


def test_a_tool_error_is_an_error_span_and_the_run_recovers(traced: Callable[..., Traced]) -> None:
    t = traced()
    assert t.run("recovering").stop_cause == "completed"
    first, second = by_name(t.spans(), "execute_tool")
    assert first.status.status_code is StatusCode.ERROR and first.attributes[c.ERROR_TYPE] == "tool_error"
    assert "YYYY-MM-DD" in first.attributes[c.TOOL_CALL_RESULT]
    assert second.status.status_code is StatusCode.UNSET and c.ERROR_TYPE not in second.attributes
    root = by_name(t.spans(), "invoke_agent")[0]
    assert root.status.status_code is StatusCode.UNSET and root.attributes[c.STOP_CAUSE] == "completed"


def test_authorization_denial_and_unknown_tool_are_events_and_errors_on_their_tool_spans(
    traced: Callable[..., Traced],
) -> None:
    from collector.demo.scripted_llm import Reply, ScriptedLLM
    from collector.harness import Decision, Runtime, Tool, run_agent

    def policy(view):  # type: ignore[no-untyped-def]
        if not view.tool_results():
            return Reply.use(("delete_user", {"user": "bob"}), ("lookup_parcel", {"id": "12345"}))
        return Reply.answer("done")

    delete = Tool(
        {"name": "delete_user", "description": "x", "input_schema": {"type": "object", "properties": {}}},
        lambda user: "deleted",
    )
    t = traced()
    run_agent(
        ScriptedLLM(policy),
        "clean up",
        [delete],
        observer=t.observer,
        authorize=lambda name, args, tenant: Decision(False, "writes need approval"),
        runtime=Runtime.seeded(1, sleep=t.sleeps),
    )
    tools = {s.name: s for s in by_name(t.spans(), "execute_tool")}
    denied, unknown = tools["execute_tool delete_user"], tools["execute_tool lookup_parcel"]
    assert denied.attributes[c.ERROR_TYPE] == "authorization_denied" and denied.attributes[c.TOOL_DENIED] is True
    assert [e.name for e in denied.events] == [c.EVENT_AUTHORIZATION_DENIED]
    assert unknown.attributes[c.ERROR_TYPE] == "unknown_tool"
    assert {denied.status.status_code, unknown.status.status_code} == {StatusCode.ERROR}
