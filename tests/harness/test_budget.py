"""Budget: four-term arithmetic, the 80% note sent once (never into system),
the hard stop as a partial report, and the seed's budget burner."""

from __future__ import annotations

from decimal import Decimal

from collector.demo.scenarios import build
from collector.demo.scripted_llm import PolicyView, Reply, ScriptedLLM
from collector.harness import (
    WRAP_UP_NOTE,
    AgentConfig,
    Budget,
    InMemoryObserver,
    Price,
    Tool,
    accounted,
    run_agent,
)
from collector.harness.llm import Usage
from ledger import conventions as c

OPUS = Price.of(5, 25)
NOTE_START = WRAP_UP_NOTE.split("{")[0]


def test_cost_has_four_terms_with_cache_multipliers() -> None:
    # Seed 000 ex. 3: .65 + .025 + .125 + .02 = $0.82. Pricing cache reads at the
    # full input rate would give $1.00 and trip the hard stop of a $1 budget.
    usage = Usage(
        input_tokens=130_000, output_tokens=1_000, cache_creation_input_tokens=20_000, cache_read_input_tokens=40_000
    )
    assert OPUS.cost(usage) == Decimal("0.82")


def test_the_five_turn_run_prices_to_the_seed_figures() -> None:
    turns = [
        (20, 6_100, 0, 180),
        (0, 1_300, 6_100, 150),
        (0, 900, 7_400, 120),
        (0, 700, 8_300, 260),
        (40, 400, 9_000, 300),
    ]
    costs = [OPUS.cost(Usage(i, o, w, r)) for i, w, r, o in turns]
    assert [round(x, 4) for x in costs] == [Decimal(v) for v in ("0.0427", "0.0149", "0.0123", "0.0150", "0.0147")]
    assert round(sum(costs), 4) == Decimal("0.0997")


def test_warning_fires_once_at_80_percent() -> None:
    budget = Budget(max_tokens=None, max_usd=Decimal("1.00"))
    budget.charge(Usage(), Decimal("0.79"))
    assert budget.take_warning() is None
    budget.charge(Usage(), Decimal("0.03"))
    line = budget.take_warning()
    assert line is not None and line.kind == "usd" and line.fraction == 0.82
    assert budget.take_warning() is None  # not again
    assert budget.exceeded() is None
    budget.charge(Usage(), Decimal("0.18"))
    assert budget.exceeded() is not None


def test_budget_burner_stops_at_step_11_with_12990_tokens() -> None:
    # Seed 001: "11 calls in, the running total passes 12,000 tokens (12,990)".
    b = build("budget_burner")
    obs = InMemoryObserver()
    result = run_agent(b.llm, b.task, b.tools, observer=obs, **b.options)

    assert result.stop_cause == "budget_exceeded"
    assert len(result.steps) == 11
    assert result.usage.total_tokens == 12_990
    assert sum(s.usage.total_tokens for s in result.steps[:10]) < 12_000
    assert result.detail == "12,990 tokens >= budget 12,000"
    # Input grows with the re-sent history, every single step.
    prompts = [s.usage.prompt_tokens for s in result.steps]
    assert prompts == sorted(prompts) and len(set(prompts)) == len(prompts)
    stops = obs.events_named(c.EVENT_BUDGET_STOP)
    assert [(e.attributes["kind"], e.attributes["spent_tokens"]) for e in stops] == [("tokens", 12_990)]


def test_hard_stop_returns_a_partial_report_not_an_exception() -> None:
    b = build("budget_burner")
    result = run_agent(b.llm, b.task, b.tools, **b.options)
    report = result.report()
    assert report["ok"] is False and result.partial
    assert report["stop_cause"] == "budget_exceeded"
    assert "budget ran out" in report["missing"] and "search_kb" in report["missing"]
    assert report["final_text"] == result.steps[-1].text
    assert report["tokens"] == 12_990


def test_wrap_up_note_is_sent_once_in_a_user_message_never_in_system() -> None:
    b = build("budget_burner")
    obs = InMemoryObserver()
    result = run_agent(b.llm, b.task, b.tools, observer=obs, **b.options)

    assert len(obs.events_named(c.EVENT_BUDGET_WARN)) == 1
    notes = [
        (m["role"], blk["text"])
        for m in result.transcript
        if isinstance(m["content"], list)
        for blk in m["content"]
        if blk.get("type") == "text" and blk["text"].startswith(NOTE_START)
    ]
    assert len(notes) == 1 and notes[0][0] == "user"
    # The system prompt is byte-identical on every call: the cached prefix survives the note.
    systems = {repr(a.request["system"]) for a in obs.started_attempts}
    assert len(systems) == 1 and NOTE_START not in systems.pop()
    # The note rides in the same user message as that turn's tool results.
    carrier = next(
        m
        for m in result.transcript
        if m["role"] == "user"
        and isinstance(m["content"], list)
        and any(blk.get("text", "").startswith(NOTE_START) for blk in m["content"])
    )
    assert carrier["content"][0]["type"] == "tool_result"


def test_dollar_budget_stops_the_run() -> None:
    b = build("budget_burner")
    cfg = AgentConfig(max_steps=50, max_total_tokens=None, max_cost_usd=Decimal("0.02"))
    obs = InMemoryObserver()
    result = run_agent(b.llm, b.task, b.tools, config=cfg, observer=obs, system=b.options["system"])
    assert result.stop_cause == "budget_exceeded"
    assert result.cost_usd >= Decimal("0.02") > result.cost_usd - result.steps[-1].cost_usd
    assert [e.attributes["kind"] for e in obs.events_named(c.EVENT_BUDGET_STOP)] == ["usd"]


def test_per_model_attribution_adds_up_across_models() -> None:
    # The agent runs on Opus; a tool summarizes with Haiku through `accounted`.
    haiku = ScriptedLLM(lambda v: Reply.answer("PTO: 20 days a year, 5 roll over."), model="claude-haiku-4-5")

    def summarize_policy(topic: str) -> str:
        reply = accounted("summarizer")(haiku.complete)("Summarize.", [{"role": "user", "content": topic}], [], 64)
        return reply.text

    tool = Tool(
        {
            "name": "summarize_policy",
            "description": "Summarize a policy.",
            "input_schema": {"type": "object", "properties": {"topic": {"type": "string"}}},
        },
        summarize_policy,
    )

    def policy(view: PolicyView) -> Reply:
        if not view.tool_results():
            return Reply.use(("summarize_policy", {"topic": "PTO"}))
        return Reply.answer("20 days a year; 5 roll over.")

    result = run_agent(ScriptedLLM(policy), "Summarize the PTO policy.", [tool])
    by_model = result.by_model()
    assert set(by_model) == {"claude-opus-5", "claude-haiku-4-5"}
    assert sum(by_model.values()) == result.cost_usd
    assert by_model["claude-opus-5"] > by_model["claude-haiku-4-5"]  # the expensive model is the agent's
    assert sum(result.by_label().values()) == result.cost_usd
    assert set(result.by_label()) == {"agent", "summarizer"}
