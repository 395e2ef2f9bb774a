"""Named, deterministic scenarios: small worlds, their tools and scripted models.

Each scenario is one of the seeds' stories (the PTO happy path, the looping
search, the budget burner, the recovering date error, the refund hand-off,
the shipping soft failure) or one loop shape, driven by a :class:`ScriptedLLM`
policy. ``build(name)`` returns everything :func:`run_agent` needs, fresh, so
simulations and sample traces can replay them; tests use them as fixtures.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from collector.demo.scripted_llm import PolicyView, Reply, ScriptedLLM, result_text
from collector.harness.config import AgentConfig
from collector.harness.tools import HANDOFF_TOOL, Tool, ToolError, ToolResult

__all__ = [
    "HR_SYSTEM",
    "HR_TOOLS",
    "KB_DOCS",
    "PTO_BALANCE",
    "SCENARIOS",
    "SEARCH_KB",
    "SHIPPING",
    "Built",
    "FileWorld",
    "Scenario",
    "SuiteWorld",
    "budget_burner",
    "build",
    "cache_breaking",
    "cycling",
    "get_pto_balance",
    "get_shipping_status",
    "handing_off",
    "happy",
    "looping",
    "policies",
    "rambling",
    "recovering",
    "refusing",
    "search_kb",
    "soft_failing",
    "stalling",
]

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


def _tool(name: str, description: str, fn: Callable[..., Any], **properties: str) -> Tool:
    """A tool whose arguments are all required and typed as given (``query="string"``)."""
    schema = {
        "type": "object",
        "properties": {k: {"type": v} for k, v in properties.items()},
        "required": list(properties),
    }
    return Tool({"name": name, "description": description, "input_schema": schema}, fn)


SEARCH_KB = _tool(
    "search_kb",
    "Search the company knowledge base (HR, finance, IT). Returns doc ids and text.",
    search_kb,
    query="string",
)
PTO_BALANCE = _tool(
    "get_pto_balance",
    "An employee's remaining PTO days on a date (employee: lowercase username; as_of: YYYY-MM-DD).",
    get_pto_balance,
    employee="string",
    as_of="string",
)
HR_TOOLS = (SEARCH_KB, PTO_BALANCE)


# --- worlds with state, for the cycle and stall shapes -----------------------------------
@dataclass
class FileWorld:
    """A config file an agent reads and rewrites without ever changing it."""

    files: dict[str, str] = field(default_factory=lambda: {"config.yaml": "retries: 3\ntimeout_s: 30\n"})

    def read_file(self, path: str) -> str:
        if path not in self.files:
            raise ToolError(f"No file {path!r}. Files: {sorted(self.files)}.")
        return self.files[path]

    def write_file(self, path: str, content: str) -> str:
        self.files[path] = content
        return "ok"

    def snapshot(self) -> dict[str, str]:
        return dict(self.files)

    def tools(self) -> tuple[Tool, ...]:
        return (
            _tool("read_file", "Read a file.", self.read_file, path="string"),
            _tool("write_file", "Overwrite a file.", self.write_file, path="string", content="string"),
        )


@dataclass
class SuiteWorld:
    """A test suite whose failures no edit fixes: work happens, progress does not."""

    edits: int = 0
    failing: int = 3

    def run_tests(self) -> str:
        return f"{self.failing} failed, 12 passed"

    def edit_file(self, path: str, patch: str) -> str:
        self.edits += 1
        return f"patched {path} ({len(patch)} chars)"

    def snapshot(self) -> dict[str, int]:
        return {"edits": self.edits}

    def progress(self) -> float:
        return float(15 - self.failing)

    def tools(self) -> tuple[Tool, ...]:
        return (
            _tool("run_tests", "Run the test suite.", self.run_tests),
            _tool("edit_file", "Apply a patch to a file.", self.edit_file, path="string", patch="string"),
        )


def get_shipping_status(order_id: str) -> ToolResult:
    """Every lookup runs fine and finds nothing: a soft failure, not an error."""
    return ToolResult(f"No tracking information found for order {order_id}.", soft_failure=True)


SHIPPING = _tool("get_shipping_status", "Tracking status of an order.", get_shipping_status, order_id="string")


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
}


# --- the registry -------------------------------------------------------------------------
@dataclass(frozen=True)
class Built:
    """A fresh scenario: ``run_agent(built.llm, built.task, built.tools, **built.options)``."""

    llm: ScriptedLLM
    task: str
    tools: tuple[Tool, ...]
    options: dict[str, Any]
    expected_stop: str


@dataclass(frozen=True)
class Scenario:
    name: str
    task: str
    expected_stop: str
    config: AgentConfig = field(default_factory=AgentConfig)
    system: str = HR_SYSTEM
    world: Callable[[], Any] | None = None  # a FileWorld/SuiteWorld factory


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("happy", "How many PTO days does alice have left, and what rolls over?", "completed"),
        Scenario("looping", "What's the PTO rollover rule?", "loop_detected"),
        Scenario("cycle", "Make sure config.yaml has retries set to 3.", "loop_detected", world=FileWorld),
        Scenario(
            "stall", "Make the failing tests pass.", "loop_detected", config=AgentConfig(max_steps=20), world=SuiteWorld
        ),
        Scenario(
            "budget_burner",
            "Tell me everything about PTO.",
            "budget_exceeded",
            config=AgentConfig(max_steps=50, max_total_tokens=12_000),
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
            system="You are a support agent. Track orders with the tools.",
        ),
    )
}


def build(name: str, *, model: str | None = None, **llm_options: Any) -> Built:
    """A fresh instance of scenario ``name`` (fresh world, fresh scripted model)."""
    try:
        scenario = SCENARIOS[name]
    except KeyError:
        raise KeyError(f"unknown scenario {name!r}; known: {sorted(SCENARIOS)}") from None
    world = scenario.world() if scenario.world else None
    tools: tuple[Tool, ...]
    if world is not None:
        tools = world.tools()
    elif name == "soft_failure":
        tools = (SHIPPING,)
    else:
        tools = HR_TOOLS
    options: dict[str, Any] = {"system": scenario.system, "config": scenario.config}
    if world is not None:
        options["snapshot"] = world.snapshot
        if hasattr(world, "progress"):
            options["progress"] = world.progress
    if model is not None:
        llm_options["model"] = model
    llm = ScriptedLLM(policies[name], **llm_options)
    return Built(llm, scenario.task, tools, options, scenario.expected_stop)
