"""Realistic synthetic workloads: the real harness, scripted models, simulated time.

``simulate(runs, seed=...)`` plays a deterministic mix through
:func:`collector.harness.run_agent` with :class:`ScriptedLLM` models:

* five tenants on three tiers; tasks routed to claude-opus-5, claude-sonnet-5 or
  claude-haiku-4-5 by tier and task;
* the seeds' stories in proportion (PTO look-ups with parallel tools, the
  recovering date error, refund hand-offs, shipping soft failures, refusals,
  max_tokens cut-offs, budget burners), loops of all three shapes (repeat,
  cycle, stall), research runs whose page count has a long tail and whose
  tools call a summarizer model through ``accounted`` (a second call site);
* prompt caching as production sees it: prompts of a few thousand tokens
  (``collector.demo.prompts``), so multi-turn runs read most of their input back
  from the cache; and cache trouble: evicted caches mid-run, a deployment with
  the time in its system prompt, another that reorders its tools mid-run, short
  prompts below a model's minimum, and one tenant whose deployment never sets
  ``cache_control`` (hit rate 0);
* 429/529 retry storms clustered in time (retry-after honoured, exponential
  backoff with jitter), a few of them exhausting the retries.

Nothing sleeps for real: each run has a :class:`VirtualClock`; model latency,
tool latency and retry waits advance it, so a run's spans carry realistic
durations while a thousand runs take seconds. Runs start over a window that
ends now (one day by default). Everything a run does is a function of
``(seed, run index)``, its trace and span ids included (``collector.demo.run_ids``),
so the same seed gives the same workload with any number of workers, and a
seed played twice into one ledger is stored and charged once; only the
wall-clock anchor moves.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from collector.demo.prompts import RESEARCH_SYSTEM
from collector.demo.run_ids import ToolBranches, run_ids
from collector.demo.scenarios import SCENARIOS, build
from collector.demo.scripted_llm import PolicyView, Reply, ScriptedLLM
from collector.demo.simulated_time import TimedLLM, VirtualClock, fraction, timed_tool
from collector.harness import AgentConfig, AgentResult, FanOut, Observer, Tool, accounted, run_agent
from collector.harness.llm import LLM, LLMResponse, ProviderError

__all__ = [
    "MODELS",
    "TENANTS",
    "RunPlan",
    "SimulationSummary",
    "execute",
    "now_ns",
    "plan_run",
    "research_tools",
    "simulate",
]

OPUS, SONNET, HAIKU = "claude-opus-5", "claude-sonnet-5", "claude-haiku-4-5"
MODELS = (OPUS, SONNET, HAIKU)
# (tenant, share of traffic, tier)
TENANTS = (
    ("acme", 0.30, "enterprise"),
    ("globex", 0.25, "pro"),
    ("initech", 0.20, "pro"),
    ("umbrella", 0.15, "free"),  # its deployment never sets cache_control: no prompt caching at all
    ("hooli", 0.10, "free"),
)
# Task kinds and their share of runs. The harness's named scenarios plus "research".
MIX = {
    "happy": 22,
    "recovering": 8,
    "cache_break": 3,
    "research": 14,
    "handoff": 8,
    "soft_failure": 6,
    "looping": 5,
    "budget_burner": 5,
    "cycle": 3,
    "stall": 3,
    "refusal": 3,
    "max_tokens": 3,
    "policy_research": 18,
    "clock_in_prompt": 2,
    "tools_reordered": 2,
    "triage": 3,
}
# Which agent runs which task: (agent name, version, prompt version).
AGENTS = {
    "cycle": ("coding-agent", "1.1.0", "code-v3"),
    "stall": ("coding-agent", "1.1.0", "code-v3"),
    "soft_failure": ("support-agent", "1.4.0", "support-v7"),
    "research": ("research-agent", "0.9.0", "research-v2"),
    "triage": ("it-triage", "0.4.0", "triage-v2"),
}
HR_AGENT = ("hr-assistant", "2.3.0", "hr-v14")
TOOL_SCHEMA_VERSION = "tools-2026-09"
# Seconds per output token, by model (the rest of the latency model is shared).
OUTPUT_SPEED = {OPUS: 0.020, SONNET: 0.012, HAIKU: 0.005}
STORMS = ((0.18, 0.03), (0.52, 0.04), (0.81, 0.025))  # (start, length) as fractions of the run sequence


def now_ns() -> int:
    """Where a simulation's window ends by default (one name, so a test can fix the clock)."""
    return time.time_ns()


def _output_speed(model: str) -> float:
    return OUTPUT_SPEED.get(model, 0.012)


# --- research: the long tail and a second call site ----------------------------------------
SUMMARY_SYSTEM = "Summarize the page in three sentences for a research assistant. Keep figures and dates."
_FETCH_DEF = {
    "name": "fetch_page",
    "description": "Fetch a web page and return a short summary of it.",
    "input_schema": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
}


def _page(url: str) -> str:
    rng = random.Random(url)
    words = ["latency", "budget", "cache", "tokens", "tenant", "retry", "policy", "model", "invoice", "quota"]
    paragraphs = []
    for p in range(rng.randint(6, 24)):
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(20, 60)))
        paragraphs.append(f"{p + 1}. {sentence.capitalize()}.")
    return f"Page {url}\n\n" + "\n".join(paragraphs)


def _summary(view: PolicyView) -> Reply:
    first = view.user_texts()[0] if view.user_texts() else ""
    return Reply.answer(f"Summary: {first.splitlines()[0]} covers {len(first)} characters on cost and caching.")


def research_tools(clock: VirtualClock, summarizer_model: str = HAIKU) -> tuple[Tool, ...]:
    """``fetch_page``: fetches (simulated) and summarizes the page with a model call made
    inside the tool, accounted under the ``summarizer`` call site."""
    summarizer = TimedLLM(
        ScriptedLLM(_summary, model=summarizer_model, cache=False),
        clock,
        base_s=0.2,
        per_output_token_s=_output_speed(summarizer_model),
    )

    @accounted("summarizer", model=summarizer_model)
    def summarize(text: str) -> LLMResponse:
        return summarizer.complete(SUMMARY_SYSTEM, [{"role": "user", "content": text}], [], 400)

    def fetch_page(url: str) -> str:
        clock.sleep(0.1 + 0.6 * fraction("fetch", url))
        return summarize(_page(url)).text

    return (Tool(_FETCH_DEF, fetch_page),)


def _research_policy(topic: str, pages: int, fanout: int) -> Callable[[PolicyView], Reply]:
    def policy(view: PolicyView) -> Reply:
        done = len(view.tool_results())
        if done >= pages:
            return Reply.answer(f"Across {done} sources on {topic}: caching halves the cost of long runs [1][2].")
        calls = [
            ("fetch_page", {"url": f"https://kb.example.com/{topic}/{done + j}"})
            for j in range(min(fanout, pages - done))
        ]
        return Reply.use(*calls, text=f"Reading {len(calls)} more source(s) on {topic}.")

    return policy


# --- the plan of one run -------------------------------------------------------------------
@dataclass(frozen=True)
class RunPlan:
    """Everything that decides one simulated run; a function of (seed, index)."""

    index: int
    seed: int
    tenant: str
    tier: str
    kind: str  # a scenario name or "research"
    model: str
    start_ns: int
    faults: dict[int, tuple[tuple[int | None, float | None], ...]] = field(default_factory=dict)
    pages: int = 0  # research only
    fanout: int = 1
    cache: bool = True
    prompt_version: str = ""
    warm_cache: bool = False  # the deployment's stable prefix is still cached from an earlier run


def _pick(rng: random.Random, weighted: Mapping[str, float]) -> str:
    return rng.choices(list(weighted), weights=list(weighted.values()))[0]


def _route(rng: random.Random, tier: str, kind: str) -> str:
    """The router: cheap tasks to haiku, hard ones up a tier, and the tier caps the model."""
    if kind in ("handoff", "refusal", "triage"):
        return HAIKU
    if tier == "enterprise":
        return OPUS if kind in ("research", "happy", "recovering", "cycle", "stall") or rng.random() < 0.3 else SONNET
    if tier == "pro":
        return OPUS if kind == "research" and rng.random() < 0.3 else SONNET
    return SONNET if kind == "research" else HAIKU


def _in_storm(position: float) -> bool:
    return any(start <= position < start + length for start, length in STORMS)


def _faults(rng: random.Random, position: float) -> dict[int, tuple[tuple[int | None, float | None], ...]]:
    """Infrastructure failures keyed by the call they hit: (status or None, retry-after)."""
    storm = _in_storm(position)
    if not (rng.random() < (0.6 if storm else 0.03)):
        return {}
    call = rng.randrange(0, 3)
    if storm and rng.random() < 0.06:  # retries run out: the run ends with stop cause "error"
        return {call: ((529, None),) * 5}
    if rng.random() < 0.5:
        wait = float(rng.choice((2, 5, 7, 12, 20)))
        return {call: ((429, wait),) * rng.randint(1, 3)}
    if rng.random() < 0.8:
        return {call: ((529, None),) * rng.randint(1, 4)}
    return {call: ((None, None),)}  # a dropped connection


def plan_run(seed: int, index: int, runs: int, start_ns: int, spread_ns: int) -> RunPlan:
    """The plan of run ``index`` of ``runs``, started within ``spread_ns`` after ``start_ns``."""
    rng = random.Random(f"{seed}:{index}")
    tenant, _, tier = rng.choices(TENANTS, weights=[t[1] for t in TENANTS])[0]
    kind = _pick(rng, MIX)
    model = _route(rng, tier, kind)
    position = index / max(runs, 1)
    slot = spread_ns / max(runs, 1)
    start = start_ns + int(index * slot + rng.random() * slot * 0.9)
    pages = fanout = 0
    if kind == "research":
        pages = min(40, 1 + int(rng.lognormvariate(1.1, 0.8)))  # a long tail of page counts
        fanout = rng.choice((1, 1, 2, 3))
    agent = AGENTS.get(kind, HR_AGENT)
    prompt = agent[2] if position < 0.6 else agent[2][:-1] + str(int(agent[2][-1]) + 1)  # a rollout at 60%
    return RunPlan(
        index=index,
        seed=seed,
        tenant=tenant,
        tier=tier,
        kind=kind,
        model=model,
        start_ns=start,
        faults=_faults(rng, position),
        pages=pages,
        fanout=fanout,
        cache=tenant != "umbrella",
        prompt_version=prompt,
    )


CACHE_TTL_NS = 5 * 60 * 10**9  # the default prompt-cache lifetime, renewed by every read


def _prefix_of(kind: str) -> tuple[Any, ...]:
    """What a run of ``kind`` sends before its messages: tasks of one deployment share it."""
    scenario = SCENARIOS.get(kind)
    if scenario is None:  # research
        return (RESEARCH_SYSTEM, kind)
    return (scenario.system, scenario.world or tuple(t.name for t in scenario.tools))


def _with_warm_caches(plans: list[RunPlan]) -> list[RunPlan]:
    """Mark the runs that send the same tools and system prompt to the same model as a run started
    shortly before: the provider (whose cache serves the whole organization) still holds them.
    Decided from the plans alone, so it does not depend on which worker runs what when."""
    last: dict[tuple[Any, ...], int] = {}
    out = []
    for plan in sorted(plans, key=lambda p: p.start_ns):
        stable = plan.cache and (plan.kind not in SCENARIOS or SCENARIOS[plan.kind].drift is None)
        key = (_prefix_of(plan.kind), plan.model, plan.prompt_version)
        warm = stable and key in last and plan.start_ns - last[key] < CACHE_TTL_NS
        if stable:
            last[key] = plan.start_ns
        out.append(replace(plan, warm_cache=warm))
    return sorted(out, key=lambda p: p.index)


def _errors(faults: Mapping[int, Sequence[tuple[int | None, float | None]]]) -> dict[int, list[BaseException]]:
    return {k: [ProviderError(status, retry_after=wait) for status, wait in v] for k, v in faults.items()}


def execute(plan: RunPlan, observer: Observer | None = None) -> AgentResult:
    """Run one plan on the calling thread (the run's clock belongs to it)."""
    clock = VirtualClock(plan.start_ns)
    run_seed = int(fraction("run", plan.seed, plan.index) * 2**32)
    agent, version, _ = AGENTS.get(plan.kind, HR_AGENT)
    options: dict[str, Any]
    if plan.kind == "research":
        topic = f"topic-{plan.index % 97}"
        llm: LLM = ScriptedLLM(
            _research_policy(topic, plan.pages, plan.fanout),
            model=plan.model,
            cache=plan.cache,
            faults=_errors(plan.faults),
            warm_cache=plan.warm_cache,
        )
        tools: tuple[Tool, ...] = research_tools(clock)
        big = plan.tier == "enterprise"
        config = AgentConfig(max_steps=40 if big else 12, max_total_tokens=400_000 if big else 50_000)
        task = f"Research {topic}: what drives the cost of long agent runs?"
        options = {"system": RESEARCH_SYSTEM, "config": config}
    else:
        built = build(
            plan.kind,
            model=plan.model,
            clock_ns=clock.clock_ns,
            cache=plan.cache,
            faults=_errors(plan.faults),
            warm_cache=plan.warm_cache,
        )
        llm, task = built.llm, built.task
        tools = tuple(timed_tool(t, clock) for t in built.tools)
        options = dict(built.options)
        config = options.pop("config")
    options["config"] = replace(
        config,
        agent_name=agent,
        agent_version=version,
        prompt_version=plan.prompt_version,
        tool_schema_version=TOOL_SCHEMA_VERSION,
    )
    with run_ids(plan.seed, plan.index):  # the run's span ids, when the provider uses RunIds
        return run_agent(
            TimedLLM(llm, clock, per_output_token_s=_output_speed(llm.model)),
            task,
            tools,
            tenant=plan.tenant,
            observer=FanOut([ToolBranches(), observer]) if observer is not None else None,
            runtime=clock.runtime(run_seed),
            **options,
        )


# --- the whole workload ----------------------------------------------------------------------
@dataclass
class SimulationSummary:
    runs: int = 0
    seconds: float = 0.0
    model_calls: int = 0
    retry_attempts: int = 0
    tool_calls: int = 0
    stop_causes: Counter[str] = field(default_factory=Counter)
    models: Counter[str] = field(default_factory=Counter)
    call_sites: Counter[str] = field(default_factory=Counter)
    tenants: Counter[str] = field(default_factory=Counter)
    cost_usd: Decimal = Decimal(0)  # the harness's estimate; the ledger re-prices
    input_tokens: int = 0  # every prompt token of every attempt: uncached, cache writes and reads
    cache_read_tokens: int = 0

    @property
    def cache_hit_rate(self) -> float:
        """cache_read / (uncached_in + cache_write + cache_read), over every attempt."""
        return self.cache_read_tokens / self.input_tokens if self.input_tokens else 0.0

    @property
    def runs_per_s(self) -> float:
        return self.runs / self.seconds if self.seconds > 0 else 0.0

    def add(self, plan: RunPlan, result: AgentResult) -> None:
        self.runs += 1
        self.stop_causes[result.stop_cause] += 1
        self.tenants[plan.tenant] += 1
        self.tool_calls += result.tool_call_count
        self.cost_usd += result.cost_usd
        for ch in result.charges:
            self.model_calls += 1
            self.retry_attempts += ch.attempt > 1
            self.models[ch.model] += 1
            self.call_sites[ch.call_site] += 1
            self.input_tokens += ch.usage.prompt_tokens
            self.cache_read_tokens += ch.usage.cache_read_input_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "seconds": round(self.seconds, 3),
            "runs_per_s": round(self.runs_per_s, 1),
            "model_calls": self.model_calls,
            "retry_attempts": self.retry_attempts,
            "tool_calls": self.tool_calls,
            "stop_causes": dict(self.stop_causes.most_common()),
            "models": dict(self.models.most_common()),
            "call_sites": dict(self.call_sites.most_common()),
            "tenants": dict(self.tenants.most_common()),
            "cost_usd": str(self.cost_usd.quantize(Decimal("0.0001"))),
            "cache_hit_rate": round(self.cache_hit_rate, 4),
        }


def simulate(
    runs: int,
    *,
    seed: int = 0,
    observer: Observer | None = None,
    workers: int = 1,
    days: float = 1.0,
    end_ns: int | None = None,
    on_progress: Callable[[int], Any] | None = None,
    checkpoint: Callable[[], Any] | None = None,
    checkpoint_every: int = 250,
) -> SimulationSummary:
    """Play ``runs`` runs of the mix; runs start over the ``days`` before ``end_ns`` (default: now).

    ``on_progress(done)`` is called after each run; ``checkpoint()`` every
    ``checkpoint_every`` runs, on the calling thread (flush telemetry there:
    it is the back-pressure that keeps an exporter's queue from overflowing).
    """
    if runs < 0:
        raise ValueError(f"runs must be >= 0, got {runs!r}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers!r}")
    spread = int(days * 86_400e9)
    start = (end_ns or now_ns()) - spread
    plans = _with_warm_caches([plan_run(seed, i, runs, start, spread) for i in range(runs)])
    summary = SimulationSummary()
    t0 = time.perf_counter()

    def done(plan: RunPlan, result: AgentResult) -> None:
        summary.add(plan, result)
        if on_progress is not None:
            on_progress(summary.runs)
        if checkpoint is not None and summary.runs % checkpoint_every == 0:
            checkpoint()

    if workers == 1:
        for plan in plans:
            done(plan, execute(plan, observer))
    else:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="simulate") as pool:
            futures = {pool.submit(execute, plan, observer): plan for plan in plans}
            for future in as_completed(futures):
                done(futures[future], future.result())
    summary.seconds = time.perf_counter() - t0
    return summary


def _check_mix() -> None:
    unknown = set(MIX) - set(SCENARIOS) - {"research"}
    if unknown:  # pragma: no cover - a programming error, caught at import
        raise RuntimeError(f"simulate MIX names unknown scenarios: {sorted(unknown)}")


_check_mix()
