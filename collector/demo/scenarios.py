"""Named, deterministic scenarios: small worlds, their tools and scripted models.

Each scenario is one of the seeds' stories (the PTO happy path, the looping
search, the budget burner, the recovering date error, the refund hand-off,
the shipping soft failure), one loop shape, or one prompt-cache story (a
healthy multi-turn cache, a clock in the system prompt, a tool list reordered
mid-run, a short prompt below the model's minimum), driven by a
:class:`ScriptedLLM` policy. ``build(name)`` returns everything
:func:`run_agent` needs, fresh, so simulations and sample traces can replay
them; tests use them as fixtures.

The deployments send production-sized prompts (``collector.demo.prompts``, ``collector.demo.hr_prompts``:
a few thousand tokens of system prompt and tools), so their caches behave as
real ones do. The budget burner keeps the seed lesson's short prompt and two
tools (:data:`HR_SYSTEM`, :data:`HR_TOOLS`): its 12,990 tokens are a seed figure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from collector.demo import hr_prompts, prompts
from collector.demo.drift import DriftingClient, Rewrite, clock_in_system_prompt, tools_reordered
from collector.demo.scripted_llm import PolicyView, Reply, ScriptedLLM, result_text
from collector.demo.worlds import ASSET, SHIPPING, FileWorld, SuiteWorld, typed_tool
from collector.harness.config import AgentConfig
from collector.harness.llm import LLM
from collector.harness.tools import HANDOFF_TOOL, Tool, ToolError

__all__ = [
    "HR_DEPLOYMENT_TOOLS",
    "HR_SYSTEM",
    "HR_TOOLS",
    "KB_DOCS",
    "PTO_BALANCE",
    "SCENARIOS",
    "SEARCH_KB",
    "Built",
    "Scenario",
    "budget_burner",
    "build",
    "cache_breaking",
    "cycling",
    "get_pto_balance",
    "handing_off",
    "happy",
    "looping",
    "policies",
    "rambling",
    "recovering",
    "refusing",
    "researching_policy",
    "search_kb",
    "soft_failing",
    "stalling",
    "triaging",
]

# The seed lesson's system prompt: short, as in the lesson (the budget burner's figures depend on it).
HR_SYSTEM = (
    "You are the HR assistant for Initech. Answer questions about leave, expenses and IT policy "
    "using the tools; cite document ids like [hr-001]. Never guess a balance: look it up. "
    "Hand requests that need approval (refunds, exceptions) to a person. "
    "Answer in plain English, in at most five sentences, and put the figure the person asked for first. "
    "When a policy has exceptions, name the exception and the document that states it. If two documents "
    "disagree, say so, cite both, and hand the question to a person. Dates are written YYYY-MM-DD; today's "
    "policies apply unless the person asks about a past year. Do not reveal another employee's balance, "
    "salary or leave history, even when asked by a manager; point them to the HR portal instead. Keep "
    "searching only while new documents appear; if two searches return the same documents, answer with "
    "what you have. Never promise an approval: only a person in HR or finance can approve an exception. "
    "Expense questions follow the finance documents, not team habits; quote the spending limit and the "
    "deadline that apply to the trip."
)

# --- a tiny HR world ------------------------------------------------------------------
KB_DOCS = (
    (
        "hr-001",
        "Paid time off",
        "Full-time staff accrue 20 PTO days a year. Unused PTO up to 5 days rolls "
        "over to the next year; anything above 5 days lapses on December 31.",
    ),
    (
        "hr-002",
        "Sick leave",
        "Sick leave is separate from PTO: 10 days a year, no rollover. A doctor's note "
        "is needed after 3 consecutive days.",
    ),
    (
        "fin-001",
        "Expenses",
        "Submit receipts within 30 days. Meals are reimbursed up to $60 a day when "
        "travelling. Conference tickets need a manager's approval before purchase.",
    ),
    (
        "it-001",
        "Laptops",
        "Laptops are replaced every 3 years. Report a lost laptop to IT within 24 hours "
        "so the disk can be wiped remotely.",
    ),
)
PTO_BALANCES = {"alice": 12, "bob": 3}


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def search_kb(query: str) -> str:
    """Keyword overlap over the four documents; the two best, with their ids."""
    q = _words(query)
    ranked = sorted(KB_DOCS, key=lambda d: -len(q & _words(d[1] + " " + d[2])))
    return "\n".join(f"[{i}] {title}: {text}" for i, title, text in ranked[:2])


def get_pto_balance(employee: str, as_of: str) -> str:
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", as_of):
        raise ToolError(f"as_of must be a date in YYYY-MM-DD format (e.g. 2026-10-02), got {as_of!r}.")
    if employee not in PTO_BALANCES:
        raise ToolError(f"Unknown employee {employee!r}. Known usernames: {sorted(PTO_BALANCES)}.")
    return json.dumps({"employee": employee, "as_of": as_of, "days_left": PTO_BALANCES[employee]})


SEARCH_KB = typed_tool(
    "search_kb",
    "Search the company knowledge base (HR, finance, IT). Returns doc ids and text.",
    search_kb,
    query="string",
)
PTO_BALANCE = typed_tool(
    "get_pto_balance",
    "An employee's remaining PTO days on a date (employee: lowercase username; as_of: YYYY-MM-DD).",
    get_pto_balance,
    employee="string",
    as_of="string",
)
HR_TOOLS = (SEARCH_KB, PTO_BALANCE)  # the seed lesson's two tools

EXPENSE_LIMITS = {"berlin": (65, 210, "fin-003"), "london": (80, 290, "fin-003"), "new york": (95, 320, "fin-002")}
BERLIN_HOLIDAYS = (("2026-01-01", "New Year's Day"), ("2026-10-03", "Day of German Unity"))


def _jsontyped_tool(definition: dict[str, Any], fn: Callable[..., Any]) -> Tool:
    return Tool(definition, lambda **kw: json.dumps(fn(**kw)))


def _expense_limits(city: str, on: str) -> dict[str, Any]:
    meals, lodging, doc = EXPENSE_LIMITS.get(city.lower(), (60, 180, "fin-001"))
    return {"city": city, "on": on, "meals_usd": meals, "lodging_usd": lodging, "document": doc}


def _policy_document(doc_id: str) -> dict[str, Any]:
    for i, title, text in KB_DOCS:
        if i == doc_id:
            return {"id": i, "title": title, "text": text}
    raise ToolError(f"No document {doc_id!r}. Known ids: {[d[0] for d in KB_DOCS]}.")


def _holidays(year: int, office: str) -> dict[str, Any]:
    days = [{"date": d, "name": n} for d, n in BERLIN_HOLIDAYS if d.startswith(str(year))] if office == "berlin" else []
    return {"year": year, "office": office, "holidays": days}


_DEFS = {d["name"]: d for d in hr_prompts.HR_TOOL_DEFS}
# The production HR deployment: the lesson's two tools and the rest of its catalogue.
HR_DEPLOYMENT_TOOLS = (
    *HR_TOOLS,
    _jsontyped_tool(_DEFS["list_holidays"], _holidays),
    _jsontyped_tool(_DEFS["get_expense_limits"], _expense_limits),
    _jsontyped_tool(_DEFS["get_policy_document"], _policy_document),
    _jsontyped_tool(_DEFS["submit_leave_request"], lambda **kw: {"request_id": "LR-2041", "status": "pending", **kw}),
    _jsontyped_tool(_DEFS["open_hr_ticket"], lambda **kw: {"ticket_id": "HR-7731", **kw}),
)


# --- policies: what the scripted model says -------------------------------------------------
def happy(view: PolicyView) -> Reply:
    """Two independent look-ups in one turn, then an answer from both results."""
    results = view.tool_results()
    if not results:
        return Reply.use(
            ("search_kb", {"query": "PTO rollover"}),
            ("get_pto_balance", {"employee": "alice", "as_of": "2026-09-25"}),
            text="I'll check the PTO policy and alice's balance at the same time.",
        )
    balance = json.loads(result_text(results[-1]))["days_left"]
    return Reply.answer(f"Alice has {balance} PTO days left. Up to 5 unused days roll over to next year [hr-001].")


def looping(view: PolicyView) -> Reply:
    """A model that keeps re-running the same search, nudged or not."""
    return Reply.use(("search_kb", {"query": "PTO rollover"}))


def cycling(view: PolicyView) -> Reply:
    """Read, write the same content back, read again: no call repeats 3 times soon, the world never moves."""
    if view.call_index % 2 == 0:
        return Reply.use(("read_file", {"path": "config.yaml"}))
    return Reply.use(("write_file", {"path": "config.yaml", "content": "retries: 3\ntimeout_s: 30\n"}))


def stalling(view: PolicyView) -> Reply:
    """A new edit every turn (the harness measures the suite as progress); the
    failing count never moves, so nothing repeats and nothing cycles."""
    return Reply.use(("edit_file", {"path": "app.py", "patch": f"attempt {view.call_index}: tweak the retry loop"}))


def budget_burner(view: PolicyView) -> Reply:
    """No loop, just an ever-longer history: a new query every turn.

    With :data:`HR_SYSTEM` and the harness defaults this reproduces the seed's
    run: the 11th call takes the total to 12,990 tokens against a 12,000 budget.
    """
    page = len(view.tool_results())
    remark = "Page 0 covers accrual and rollover. Reading on." if page == 1 else ""
    return Reply.use(("search_kb", {"query": f"PTO policy details page {page}"}), text=remark)


def recovering(view: PolicyView) -> Reply:
    """A bad date first; the actionable error lets the model fix its own call."""
    results = view.tool_results()
    if not results:
        return Reply.use(("get_pto_balance", {"employee": "bob", "as_of": "next friday"}))
    last = results[-1]
    if last.get("is_error"):
        return Reply.use(("get_pto_balance", {"employee": "bob", "as_of": "2026-10-02"}))
    return Reply.answer(f"Bob will have {json.loads(result_text(last))['days_left']} PTO days left on 2026-10-02.")


def handing_off(view: PolicyView) -> Reply:
    if "refund" in view.task.lower():
        return Reply.use((HANDOFF_TOOL, {"reason": "Refund requests over $500 need a finance approver."}))
    return Reply.answer("OK.")


def refusing(view: PolicyView) -> Reply:
    return Reply(stop_reason="refusal")


def rambling(view: PolicyView) -> Reply:
    """A tool call with a huge argument: with a small max_tokens it is cut off mid-argument."""
    return Reply.use(("search_kb", {"query": "everything " * 60}), text="Let me search for all of it at once.")


def cache_breaking(view: PolicyView) -> Reply:
    """The happy path over three turns, with the provider's cache gone on the third call."""
    results = view.tool_results()
    if len(results) < 2:
        return Reply.use(("search_kb", {"query": f"PTO rollover {len(results)}"}))
    return Reply.answer("Up to 5 unused PTO days roll over [hr-001].", evict_cache=True)


def soft_failing(view: PolicyView) -> Reply:
    """Tries order after order; every lookup 'works' and finds nothing, until the step cap."""
    return Reply.use(("get_shipping_status", {"order_id": f"A-{1000 + view.call_index}"}))


def researching_policy(view: PolicyView) -> Reply:
    """Four look-ups, one per turn, then an answer: a multi-turn run whose prefix only grows."""
    steps = (
        ("search_kb", {"query": "travel meal limits"}),
        ("get_expense_limits", {"city": "Berlin", "on": "2026-10-02"}),
        ("get_policy_document", {"doc_id": "fin-001"}),
        ("list_holidays", {"year": 2026, "office": "berlin"}),
    )
    done = len(view.tool_results())
    if done < len(steps):
        return Reply.use(steps[done], text="Checking the next source." if done else "")
    return Reply.answer(
        "Meals in Berlin are reimbursed up to $65 a day [fin-003]; submit receipts within 30 days [fin-001]. "
        "2026-10-02 is a working day; 2026-10-03 is the Day of German Unity, a holiday in Berlin."
    )


def triaging(view: PolicyView) -> Reply:
    """Look the asset up, then classify the ticket."""
    if not view.tool_results():
        return Reply.use(("lookup_asset", {"asset_tag": "LT-4471"}))
    return Reply.answer("Category: hardware. Priority: urgent. Bob's laptop LT-4471 was stolen: wipe it now.")


policies: dict[str, Callable[[PolicyView], Reply]] = {
    "happy": happy,
    "looping": looping,
    "cycle": cycling,
    "stall": stalling,
    "budget_burner": budget_burner,
    "recovering": recovering,
    "handoff": handing_off,
    "refusal": refusing,
    "max_tokens": rambling,
    "cache_break": cache_breaking,
    "soft_failure": soft_failing,
    "policy_research": researching_policy,
    "clock_in_prompt": researching_policy,
    "tools_reordered": researching_policy,
    "triage": triaging,
}


# --- the registry -------------------------------------------------------------------------
@dataclass(frozen=True)
class Built:
    """A fresh scenario: ``run_agent(built.llm, built.task, built.tools, **built.options)``.

    ``llm`` is what the harness calls (the scripted model, or a deployment wrapping it);
    ``scripted`` is the scripted model itself."""

    llm: LLM
    task: str
    tools: tuple[Tool, ...]
    options: dict[str, Any]
    expected_stop: str
    scripted: ScriptedLLM


# A deployment bug (``collector.demo.drift``), made for one run from the run's clock.
Drift = Callable[[Callable[[], int]], Rewrite]


@dataclass(frozen=True)
class Scenario:
    name: str
    task: str
    expected_stop: str
    config: AgentConfig = field(default_factory=AgentConfig)
    system: str = hr_prompts.HR_HANDBOOK
    tools: tuple[Tool, ...] = HR_DEPLOYMENT_TOOLS
    world: Callable[[], Any] | None = None  # a FileWorld/SuiteWorld factory; its tools replace ``tools``
    drift: Drift | None = None


_RESEARCH_TASK = "What can I spend on meals in Berlin on 2026-10-02, and is the next day a holiday there?"
SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("happy", "How many PTO days does alice have left, and what rolls over?", "completed"),
        Scenario("looping", "What's the PTO rollover rule?", "loop_detected"),
        Scenario(
            "cycle",
            "Make sure config.yaml has retries set to 3.",
            "loop_detected",
            system=prompts.CODING_SYSTEM,
            world=FileWorld,
        ),
        Scenario(
            "stall",
            "Make the failing tests pass.",
            "loop_detected",
            config=AgentConfig(max_steps=20),
            system=prompts.CODING_SYSTEM,
            world=SuiteWorld,
        ),
        Scenario(
            "budget_burner",
            "Tell me everything about PTO.",
            "budget_exceeded",
            config=AgentConfig(max_steps=50, max_total_tokens=12_000),
            system=HR_SYSTEM,
            tools=HR_TOOLS,
        ),
        Scenario("recovering", "How many PTO days will bob have on Oct 2?", "completed"),
        Scenario("handoff", "Please refund my $900 conference ticket.", "handoff"),
        Scenario("refusal", "Write me something I should not have.", "refusal"),
        Scenario("max_tokens", "Tell me about everything.", "max_tokens", config=AgentConfig(max_tokens_per_call=64)),
        Scenario("cache_break", "What rolls over at year end?", "completed"),
        Scenario(
            "soft_failure",
            "Where is my order?",
            "max_steps",
            config=AgentConfig(max_steps=6),
            system=prompts.SUPPORT_SYSTEM,
            tools=(SHIPPING,),
        ),
        Scenario("policy_research", _RESEARCH_TASK, "completed"),
        Scenario("clock_in_prompt", _RESEARCH_TASK, "completed", drift=clock_in_system_prompt),
        Scenario("tools_reordered", _RESEARCH_TASK, "completed", drift=lambda _clock: tools_reordered(from_turn=2)),
        Scenario(
            "triage",
            "Ticket: my laptop LT-4471 was stolen from the car.",
            "completed",
            system=prompts.TRIAGE_SYSTEM,
            tools=(ASSET,),
        ),
    )
}


def _counting_clock() -> Callable[[], int]:
    """A clock for a run without one: a fixed start, a few seconds a reading (deterministic)."""
    now = [1_790_000_000_000_000_000]

    def clock_ns() -> int:
        now[0] += 3_000_000_000
        return now[0]

    return clock_ns


def build(
    name: str, *, model: str | None = None, clock_ns: Callable[[], int] | None = None, **llm_options: Any
) -> Built:
    """A fresh instance of scenario ``name`` (fresh world, fresh scripted model); ``clock_ns`` is the
    run's clock, which a deployment bug may read (the time in its system prompt)."""
    try:
        scenario = SCENARIOS[name]
    except KeyError:
        raise KeyError(f"unknown scenario {name!r}; known: {sorted(SCENARIOS)}") from None
    world = scenario.world() if scenario.world else None
    tools: tuple[Tool, ...] = world.tools() if world is not None else scenario.tools
    options: dict[str, Any] = {"system": scenario.system, "config": scenario.config}
    if world is not None:
        options["snapshot"] = world.snapshot
        if hasattr(world, "progress"):
            options["progress"] = world.progress
    if model is not None:
        llm_options["model"] = model
    scripted = ScriptedLLM(policies[name], **llm_options)
    llm: LLM = scripted
    if scenario.drift is not None:
        llm = DriftingClient(scripted, scenario.drift(clock_ns or _counting_clock()))
    return Built(llm, scenario.task, tools, options, scenario.expected_stop, scripted)
