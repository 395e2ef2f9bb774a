"""No call site goes unaccounted: every model call of a run is one charge row, wherever it was made.

The run has a known shape: the loop's own calls, plus model calls made inside
tools through ``accounted`` (decorator and context manager, one of them
retried), so the ledger must hold exactly that many charges, each under its
label, and the per-label attribution must add up to the run's total.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from opentelemetry.trace import StatusCode

from collector.demo.scripted_llm import PolicyView, Reply, ScriptedLLM
from collector.harness import Runtime, Tool, accounted, run_agent
from collector.harness.llm import ProviderError
from ledger import conventions as c
from ledger import queries as q
from tests.telemetry.helpers import Traced, by_name, rows


def _loop_policy(view: PolicyView) -> Reply:
    done = len(view.tool_results())
    if done == 0:  # two tools in one turn: both make model calls, concurrently
        return Reply.use(("summarize", {"doc": "handbook"}), ("classify", {"text": "refund please"}))
    if done == 2:
        return Reply.use(("summarize", {"doc": "policy"}))
    return Reply.answer("All done.")


def _summary(view: PolicyView) -> Reply:
    return Reply.answer("A short summary.")


def _label(view: PolicyView) -> Reply:
    return Reply.answer("billing")


def build_tools() -> tuple[list[Tool], dict[str, ScriptedLLM]]:
    summarizer = ScriptedLLM(_summary, model="claude-haiku-4-5", cache=False)
    # The classifier's first call fails once with a 529: a retried accounted call, two attempts.
    classifier = ScriptedLLM(_label, model="claude-sonnet-5", cache=False, faults={0: [ProviderError(529)]})

    @accounted("summarizer", model="claude-haiku-4-5")
    def summarize_text(text: str) -> Any:
        return summarizer.complete("Summarize.", [{"role": "user", "content": text}], [], 200)

    def summarize(doc: str) -> str:
        return summarize_text(f"The {doc} says many things. " * 20).text

    def classify_once(text: str) -> str:
        with accounted("classifier", model="claude-sonnet-5") as call:
            return str(call.record(classifier.complete("Label it.", [{"role": "user", "content": text}], [], 50)).text)

    def classify(text: str) -> str:
        try:
            return classify_once(text)
        except ProviderError:  # retried by hand: each `with accounted(...)` block is one attempt, one charge
            return classify_once(text)

    def tool(name: str, fn: Any, prop: str) -> Tool:
        schema = {"type": "object", "properties": {prop: {"type": "string"}}, "required": [prop]}
        return Tool({"name": name, "description": name, "input_schema": schema}, fn)

    return [tool("summarize", summarize, "doc"), tool("classify", classify, "text")], {
        "summarizer": summarizer,
        "classifier": classifier,
    }


def test_every_model_call_is_one_charge_and_labels_sum_to_the_total(traced: Callable[..., Traced]) -> None:
    tools, models = build_tools()
    loop = ScriptedLLM(_loop_policy, model="claude-opus-5")
    t = traced()
    result = run_agent(
        loop, "Tidy the inbox.", tools, tenant="acme", observer=t.observer, runtime=Runtime.seeded(3, sleep=t.sleeps)
    )
    assert result.stop_cause == "completed"
    # Known shape: 3 loop calls, 2 summarizer calls, 2 classifier attempts (one failed).
    expected = {"agent": 3, "summarizer": 2, "classifier": 2}
    assert (loop.calls, models["summarizer"].calls, models["classifier"].calls) == (3, 2, 1)
    assert len(result.charges) == sum(expected.values()) == 7

    # Calls made inside a tool are children of that tool's span.
    spans = t.spans()
    tool_spans = {s.context.span_id: s.name for s in by_name(spans, "execute_tool")}
    for span in by_name(spans, "chat"):
        site = span.attributes[c.CALL_SITE]
        parent = tool_spans.get(span.parent.span_id) if span.parent else None
        if site == "agent":
            assert parent is None and span.parent is not None  # the root
        else:
            assert parent == ("execute_tool summarize" if site == "summarizer" else "execute_tool classify")
    failed = [s for s in by_name(spans, "chat") if s.status.status_code is StatusCode.ERROR]
    assert [(s.attributes[c.CALL_SITE], s.attributes[c.ERROR_TYPE]) for s in failed] == [("classifier", "529")]

    t.close()
    with t.open() as con:
        assert con.execute("SELECT count(*) FROM charges").fetchone() == (7,)
        by_label = {r["call_site"]: r for r in q.records(con, q.call_site_attribution())}
        assert {k: v["calls"] for k, v in by_label.items()} == expected
        run_total = con.execute("SELECT usd_total FROM runs").fetchone()[0]
        labels_total = sum((v["usd_total"] for v in by_label.values()), Decimal(0))
        assert labels_total == run_total > 0
        assert abs(sum(v["share"] for v in by_label.values()) - 1) < 1e-9
        run = rows(con, q.runs_table())[0]
        assert (run["turns"], run["tool_calls"]) == (3, 3)
