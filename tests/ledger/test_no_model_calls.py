"""A run whose source traced its tools but no model call is named, never shown as a $0 run (#43 item 1).

CrewAI under OpenInference's documented setup exports the crew, agent, task and tool spans and no LLM
span: the model's spend never reaches the ledger. ``report`` lists such runs by the scopes that sent
them and says what adds the model calls.
"""

from __future__ import annotations

from ledger.ingest import ingest
from ledger.report import build_report, format_report
from ledger.spans import SpanRecord
from ledger.store import open_ledger

T0 = 1_790_000_000_000_000_000
S = 10**9
CREWAI = "openinference.instrumentation.crewai"


def _crew_run(trace: str, tools: int, start: int = T0) -> list[SpanRecord]:
    root = SpanRecord(trace, "1" * 16, "Crew.kickoff", start, start + 60 * S, "", "INTERNAL", scope_name=CREWAI,
                      attributes={"openinference.span.kind": "CHAIN"})  # fmt: skip
    return [root] + [
        SpanRecord(
            trace,
            f"{i + 2:016x}",
            "search",
            start + i * S,
            start + i * S + S // 2,
            "1" * 16,
            "INTERNAL",
            scope_name=CREWAI,
            attributes={"openinference.span.kind": "TOOL", "tool.name": "search"},
        )
        for i in range(tools)
    ]


def _priced_run(trace: str) -> list[SpanRecord]:
    call = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "claude-sonnet-4-6",
            "gen_ai.provider.name": "anthropic", "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 10}  # fmt: skip
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
    return [
        SpanRecord(trace, "1" * 16, "agent", T0, T0 + 9 * S, "", "INTERNAL", scope_name="my-agent"),
        SpanRecord(trace, "2" * 16, "chat", T0, T0 + S, "1" * 16, "CLIENT", attributes=call, scope_name="my-agent"),
        SpanRecord(trace, "3" * 16, "search", T0 + 2 * S, T0 + 3 * S, "1" * 16, attributes=tool, scope_name="my-agent"),
    ]


def test_runs_with_tools_and_no_model_call_are_listed_by_their_source() -> None:
    con = open_ledger(":memory:")
    ingest(con, _crew_run("a" * 32, 3) + _crew_run("b" * 32, 2, T0 + 100 * S) + _priced_run("c" * 32))
    report = build_report(con)
    assert report["runs_without_model_calls"] == [
        {"scopes": CREWAI, "runs": 2, "tool_calls": 5, "last_trace_id": "b" * 32}
    ]
    text = format_report(report)
    assert "NO MODEL CALLS REPORTED" in text and f"{CREWAI}: 2 runs, 5 tool calls" in text
    assert "Trace the model client too" in text


def test_a_ledger_whose_runs_all_report_model_calls_lists_none() -> None:
    con = open_ledger(":memory:")
    ingest(con, _priced_run("c" * 32))
    report = build_report(con)
    assert report["runs_without_model_calls"] == [] and "NO MODEL CALLS" not in format_report(report)
