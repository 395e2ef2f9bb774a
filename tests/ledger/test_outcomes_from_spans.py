"""Outcomes and loops of runs our harness did not make, read from their spans (issue #27 items 1–2).

Seed 004's generic agent, written with the OpenTelemetry SDK as the seed writes it (no guard events):
its good run answers after find_order and get_shipping_status; its bad run calls
get_shipping_status with the order id as the tracking number twice in a row, hallucinates
lookup_parcel (an ERROR tool span), calls get_shipping_status a third time and hits its step cap
(root ERROR, ``error.type = step_cap_exhausted``, ``agent.stop_reason = step_cap``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from collector.otlp import decode_protobuf
from ledger.ingest import ingest
from ledger.report import build_report
from ledger.spans import SpanEvent
from ledger.store import open_ledger

NOT_FOUND = "No shipment found for 12345."


def _agent(steps: list[tuple[str, dict[str, Any], str, bool]], final: str, *, stop: dict[str, Any]) -> bytes:
    """One run of seed 004's agent as OTLP protobuf: a chat span before each tool span, and a last chat."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("solaris-support")
    chat = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic",
            "gen_ai.request.model": "claude-sonnet-4-5", "gen_ai.usage.input_tokens": 74,
            "gen_ai.usage.output_tokens": 40}  # fmt: skip
    with tracer.start_as_current_span(
        "invoke_agent solaris-support",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "solaris-support"},
    ) as root:
        for tool, arguments, result, error in steps:
            with tracer.start_as_current_span("chat claude-sonnet-4-5", attributes=chat) as span:
                span.set_attribute("gen_ai.response.finish_reasons", ["tool_use"])
            with tracer.start_as_current_span(f"execute_tool {tool}") as span:
                span.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                                     "gen_ai.tool.call.arguments": json.dumps(arguments),
                                     "gen_ai.tool.call.result": result})  # fmt: skip
                if error:
                    span.set_attribute("error.type", "tool_error")
                    span.set_status(Status(StatusCode.ERROR))
        if final:
            with tracer.start_as_current_span("chat claude-sonnet-4-5", attributes=chat) as span:
                span.set_attribute("gen_ai.response.finish_reasons", [final])
        if stop.get("error.type"):
            root.set_status(Status(StatusCode.ERROR, "step cap exhausted"))
        root.set_attributes(stop)
    provider.shutdown()
    return encode_spans(exporter.get_finished_spans()).SerializeToString()


GOOD = (
    [("find_order", {"order_id": "12345"}, '{"tracking": "ZYX987"}', False),
     ("get_shipping_status", {"tracking_number": "ZYX987"}, "Out for delivery, arriving today by 8pm", False)],
    "end_turn",
    {"agent.stop_reason": "answer"},
)  # fmt: skip
BAD = (
    [("get_shipping_status", {"tracking_number": "12345"}, NOT_FOUND, False),
     ("get_shipping_status", {"tracking_number": "12345"}, NOT_FOUND, False),
     ("lookup_parcel", {"id": "12345"}, "ERROR: no tool named 'lookup_parcel'.", True),
     ("get_shipping_status", {"tracking_number": "12345"}, NOT_FOUND, False)],
    "",
    {"error.type": "step_cap_exhausted", "agent.stop_reason": "step_cap"},
)  # fmt: skip


def _ledger(*runs: tuple[Any, str, dict[str, Any]]):  # type: ignore[no-untyped-def]
    con = open_ledger(":memory:")
    for steps, final, stop in runs:
        ingest(con, decode_protobuf(_agent(steps, final, stop=stop)))
    return con


def _run(con, tool: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """The run whose first tool call was ``tool``."""
    row = con.execute(
        "SELECT r.* FROM runs r WHERE (SELECT arg_min(tool, start_time) FROM spans s WHERE s.trace_id = r.trace_id"
        " AND s.operation = 'execute_tool') = ?",
        [tool],
    ).fetchdf()
    return row.to_dict("records")[0]


def test_seed_004_bad_run_is_a_step_cap_stop_with_a_repeat_and_its_soft_failures():
    con = _ledger(GOOD, BAD)
    bad, good = _run(con, "get_shipping_status"), _run(con, "find_order")
    assert (bad["stop_cause"], bad["step_cap_halts"], bad["loop_trips"]) == ("max_steps", 1, 1)
    assert bad["soft_failures"] == 4  # three "No shipment found", one ERROR tool span
    trips = con.execute(
        "SELECT shape, action, tool, attributes->>'calls' FROM guard_events WHERE trace_id = ?", [bad["trace_id"]]
    ).fetchall()
    assert trips == [("repeat", "detected", "get_shipping_status", "3")]
    assert (good["stop_cause"], good["step_cap_halts"], good["loop_trips"], good["soft_failures"]) == (
        "completed", 0, 0, 0,
    )  # fmt: skip


def test_the_detected_trips_feed_the_report_and_are_rebuilt_not_added_when_the_run_grows():
    con = _ledger(GOOD, BAD)
    bad = _run(con, "get_shipping_status")
    # the same spans sent again (an exporter's retry): the run is rebuilt, its trip not doubled
    ingest(con, decode_protobuf(_agent(*BAD[:2], stop=BAD[2])))
    report = build_report(con)
    assert report["loop_trips"]["trips"] == 1 + 1  # two bad runs now, one trip each
    assert con.execute("SELECT count(*) FROM guard_events WHERE trace_id = ?", [bad["trace_id"]]).fetchone() == (1,)
    assert report["step_cap_halts"] == 2


@pytest.mark.parametrize(
    ("calls", "shape"),
    [
        (["a1", "a1"], "repeat"),
        (["a1", "b1", "a1"], "cycle"),
        (["a1", "b1", "c1"], None),
        ([f"t{i}" for i in range(7)], "stall"),  # seven different calls, every one "not found"
        ([f"t{i}" for i in range(6)], None),  # six: within the stall allowance
    ],
)
def test_loop_shapes_from_tool_calls(calls: list[str], shape: str | None):
    # "a1": tool a with argument 1; tool t's calls all answer "not found"
    steps = [(name[0], {"q": name[1:]}, NOT_FOUND if name[0] == "t" else "ok", False) for name in calls]
    con = _ledger((steps, "end_turn", {}))
    shapes = [s for (s,) in con.execute("SELECT shape FROM guard_events WHERE action = 'detected'").fetchall()]
    assert shapes == ([shape] if shape else [])


def test_arguments_equal_as_json_values_are_the_same_call():
    steps = [("search", {"q": "x", "page": 1}, "ok", False), ("search", {"page": 1, "q": "x"}, "ok", False)]
    con = _ledger((steps, "end_turn", {}))
    assert con.execute("SELECT shape FROM guard_events").fetchall() == [("repeat",)]


def test_a_run_that_reported_its_own_trips_is_not_detected_again():
    con = _ledger(BAD)
    trace_id = con.execute("SELECT trace_id FROM runs").fetchone()[0]
    con.execute("DELETE FROM guard_events")
    con.execute(
        "INSERT INTO guard_events (trace_id, span_id, seq, name, time, shape, action) "
        "SELECT trace_id, root_span_id, 0, 'turnledger.loop_detector.trip', started_at, 'repeat', 'nudge' FROM runs"
    )
    ingest(con, decode_protobuf(_agent(*BAD[:2], stop=BAD[2])))
    assert con.execute("SELECT action FROM guard_events WHERE trace_id = ?", [trace_id]).fetchall() == [("nudge",)]


@pytest.mark.parametrize(
    ("stop", "final", "cause"),
    [
        ({"error.type": "GraphRecursionError"}, "tool_use", "max_steps"),  # LangGraph's recursion limit
        ({"error.type": "agents.exceptions.MaxTurnsExceeded"}, "tool_use", "max_steps"),  # OpenAI Agents SDK
        ({"error.type": "UsageLimitExceeded"}, "tool_use", "budget_exceeded"),  # pydantic-ai token limit
        ({}, "max_tokens", "max_tokens"),
        ({}, "refusal", "refusal"),
        ({}, "end_turn", "completed"),
        ({}, "tool_use", "unknown"),  # a last call asking for a tool nobody ran
        ({"error.type": "SomethingElse"}, "end_turn", "error"),  # root ERROR, type in no table
    ],
)
def test_stop_cause_from_error_types_and_the_last_finish_reason(stop: dict[str, Any], final: str, cause: str):
    con = _ledger(([("find_order", {"order_id": "1"}, "ok", False)], final, stop))
    assert con.execute("SELECT stop_cause FROM runs").fetchone() == (cause,)


@pytest.mark.parametrize(
    ("message", "cause", "halts"),
    [
        ("The next request would exceed the request_limit of 3", "max_steps", 1),
        ("The next tool call would exceed the tool_calls_limit of 5", "max_steps", 1),
        ("Exceeded the total_tokens_limit of 100 (total_tokens=141)", "budget_exceeded", 0),
    ],
)
def test_pydantic_ais_request_and_tool_call_limits_are_step_caps(message: str, cause: str, halts: int):
    """pydantic-ai raises UsageLimitExceeded for every limit: its exception's message tells a step cap."""
    spans = decode_protobuf(_agent([("find_order", {"order_id": "1"}, "ok", False)], "tool_use",
                                   stop={"error.type": "UsageLimitExceeded"}))  # fmt: skip
    root = next(s for s in spans if not s.parent_span_id)
    exception = {"exception.type": "pydantic_ai.exceptions.UsageLimitExceeded", "exception.message": message}
    root.events = (*root.events, SpanEvent("exception", root.end_ns, exception))
    con = open_ledger(":memory:")
    ingest(con, spans)
    assert con.execute("SELECT stop_cause, step_cap_halts FROM runs").fetchone() == (cause, halts)


@pytest.mark.parametrize(("key", "value"), [("http.request.resend_count", 1), ("attempt", 2)])
def test_a_call_its_sdk_or_agent_says_was_retried_counts_as_one_retry(key: str, value: int):
    """The anthropic SDK's own span after one 429 carries http.request.resend_count=1; Claude Code says attempt=2."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("anthropic")
    with tracer.start_as_current_span("invoke_agent a"):
        for extra in ({}, {key: value}):
            with tracer.start_as_current_span("chat claude-sonnet-4-5") as span:
                span.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic",
                                     "gen_ai.request.model": "claude-sonnet-4-5", "gen_ai.usage.input_tokens": 10,
                                     "gen_ai.usage.output_tokens": 5, **extra})  # fmt: skip
    provider.shutdown()
    con = open_ledger(":memory:")
    ingest(con, decode_protobuf(encode_spans(exporter.get_finished_spans()).SerializeToString()))
    assert con.execute("SELECT retry_attempts, model_calls FROM runs").fetchone() == (1, 2)
    assert build_report(con)["retries"]["attempts"] == 1
