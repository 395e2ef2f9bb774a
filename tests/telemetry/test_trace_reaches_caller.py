"""The trace reaches the caller: a run's result carries its trace id, and either id opens the run.

A user's complaint arrives with what the caller was given (the trace id, or the
run id, which is the spans' ``gen_ai.conversation.id``); ``turnledger context``
and the run explorer's query find the run from either. Authorization decisions
on gated (write) tools are guard events both ways: approvals as well as denials.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from collector.cli import main
from ledger import conventions as c
from ledger import queries as q
from tests.telemetry.helpers import Traced, by_name, rows


def test_a_run_returns_its_trace_id_and_context_opens_it_by_trace_or_run_id(
    traced: Callable[..., Traced], capsys: pytest.CaptureFixture[str]
) -> None:
    t = traced()
    result = t.run("happy")
    t.close()
    root = by_name(t.spans(), "invoke_agent")[0]
    assert result.trace_id == format(root.context.trace_id, "032x")
    assert result.report()["trace_id"] == result.trace_id
    assert root.attributes[c.CONVERSATION_ID] == result.run_id
    with t.open() as con:
        assert q.records(con, q.run_summary(result.trace_id))[0]["conversation_id"] == result.run_id
        for ident in (result.run_id, result.run_id.upper()):  # the run explorer's lookup
            assert [r["trace_id"] for r in rows(con, q.find_runs(trace_id=ident))] == [result.trace_id]
    listings = []
    for ident in (result.trace_id, result.trace_id[:10], result.run_id):
        assert main(["context", ident, "--db", str(t.db)]) == 0, ident
        listings.append(capsys.readouterr().out)
    assert listings[0].startswith(f"run {result.trace_id}: ") and "\nturn 1: " in listings[0]
    assert listings[0] == listings[1] == listings[2]


def test_a_conversation_with_several_runs_asks_for_the_trace_id(
    traced: Callable[..., Traced], capsys: pytest.CaptureFixture[str]
) -> None:
    t = traced()
    first, second = t.run("happy", run_id="conv-42"), t.run("happy", run_id="conv-42", seed=8)
    t.close()
    assert first.trace_id != second.trace_id
    assert main(["context", "conv-42", "--db", str(t.db)]) == 2
    err = capsys.readouterr().err
    assert "conversation 'conv-42' has several runs" in err
    assert first.trace_id in err and second.trace_id in err


def test_without_telemetry_the_trace_id_is_none(traced: Callable[..., Traced]) -> None:
    from collector.demo.scenarios import build
    from collector.harness import Runtime, run_agent

    b = build("happy")
    result = run_agent(b.llm, b.task, b.tools, runtime=Runtime.seeded(1), **b.options)
    assert result.ok and result.trace_id is None


def test_approvals_of_gated_tools_are_guard_events_like_denials(traced: Callable[..., Traced]) -> None:
    from collector.demo.scripted_llm import Reply, ScriptedLLM
    from collector.harness import AllowList, Runtime, Tool, run_agent

    def policy(view):  # type: ignore[no-untyped-def]
        if not view.tool_results():
            return Reply.use(
                ("delete_user", {"user": "bob", "confirmed": True}),
                ("delete_user", {"user": "eve"}),
                ("lookup_user", {"user": "bob"}),
            )
        return Reply.answer("done")

    def tool(name: str) -> Tool:
        return Tool(
            {"name": name, "description": "x", "input_schema": {"type": "object", "properties": {}}},
            lambda user, confirmed=False: "ok",
        )

    t = traced()
    run_agent(
        ScriptedLLM(policy),
        "clean up",
        [tool("delete_user"), tool("lookup_user")],
        tenant="acme",
        observer=t.observer,
        authorize=AllowList(read_only=["lookup_user"], write=["delete_user"]),
        runtime=Runtime.seeded(1, sleep=t.sleeps),
    )
    t.close()
    with t.open() as con:
        decisions = con.execute(
            "SELECT name, tool, json_extract_string(attributes, '$.by') FROM guard_events ORDER BY name"
        ).fetchall()
    assert decisions == [  # the read-only look-up needed no approval, so records none
        (c.EVENT_AUTHORIZATION_APPROVED, "delete_user", "allow-list"),
        (c.EVENT_AUTHORIZATION_DENIED, "delete_user", "allow-list"),
    ]
