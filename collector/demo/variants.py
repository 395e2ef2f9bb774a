"""A prompt rollout to compare: two prompt versions of one agent serving side by side.

``rollout(runs_per_version, ...)`` plays the HR assistant's everyday tasks
through the real harness, alternating the baseline prompt and a candidate,
so both versions serve the same traffic over the same hours (the seeds: compare
a canary against the baseline serving concurrently, never against yesterday).
The candidate's knobs say how it differs:

* ``prompt_growth``: its system prompt carries that many times the baseline's
  words (a longer prompt: every call costs more; caching is off so the price
  follows the prompt's length, not which prefix happened to be cached);
* ``error_rate`` per version: that share of its runs meet a model outage that
  outlasts every retry (stop cause ``error``), spread evenly over its runs so
  the shares are exact.

The k-th run of each version gets the same task and tenant (matched traffic: only the
version differs), and everything is a function of the seed, like ``simulate``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

from collector.demo.scenarios import HR_SYSTEM, build
from collector.demo.simulated_time import TimedLLM, VirtualClock, fraction, timed_tool
from collector.harness import AgentResult, Observer, run_agent
from collector.harness.llm import ProviderError

__all__ = ["TASKS", "Variant", "rollout"]

# The everyday mix of the HR assistant (scenario -> weight): look-ups, a recovered error, a hand-off.
TASKS = {"happy": 5, "recovering": 3, "cache_break": 1, "handoff": 1}
AGENT, AGENT_VERSION, MODEL = "hr-assistant", "2.3.0", "claude-sonnet-5"
_STYLE = (
    " Before answering, restate the question in one sentence, list the documents you will rely on, and say "
    "which of them is the most recent; then answer, then add a short note on what would change the answer."
)
_OUTAGE = (ProviderError(529, retry_after=None),) * 5  # more 529s than the harness retries


@dataclass(frozen=True)
class Variant:
    """One prompt version: its name, how much longer its system prompt is, its share of failing runs."""

    prompt_version: str
    prompt_growth: float = 1.0
    error_rate: float = 0.0

    def system(self) -> str:
        """The baseline prompt, then style guidance repeated until it carries ``prompt_growth`` times the words."""
        extra = round((self.prompt_growth - 1.0) * len(HR_SYSTEM))
        repeats = (_STYLE * (1 + extra // len(_STYLE)))[:extra]
        return HR_SYSTEM + repeats

    def fails(self, k: int) -> bool:
        """Whether this version's ``k``-th run meets the outage: exactly ``error_rate`` of its runs, evenly spread."""
        return int((k + 1) * self.error_rate) > int(k * self.error_rate)


def _plans(variants: tuple[Variant, Variant], runs_per_version: int) -> Iterator[tuple[int, Variant, int]]:
    """(run index, variant, that variant's own run number), the two versions interleaved."""
    for k in range(runs_per_version):
        for side, variant in enumerate(variants):
            yield 2 * k + side, variant, k


def rollout(
    runs_per_version: int,
    baseline: Variant,
    candidate: Variant,
    *,
    seed: int = 0,
    observer: Observer | None = None,
    start_ns: int,
    spacing_s: float = 60.0,
    tasks: Mapping[str, int] = TASKS,
) -> list[AgentResult]:
    """Play ``runs_per_version`` runs of each version, one every ``spacing_s`` seconds from ``start_ns``."""
    results = []
    for index, variant, k in _plans((baseline, candidate), runs_per_version):
        rng = random.Random(f"{seed}:{k}")  # both versions see the same traffic, task for task
        kind = rng.choices(list(tasks), weights=list(tasks.values()))[0]
        clock = VirtualClock(start_ns + int(index * spacing_s * 1e9))
        faults = {0: list(_OUTAGE)} if variant.fails(k) else {}  # the first call: every task makes one
        built = build(kind, model=MODEL, cache=False, faults=faults)
        config = replace(
            built.options.pop("config"),
            agent_name=AGENT,
            agent_version=AGENT_VERSION,
            prompt_version=variant.prompt_version,
        )
        options = {**built.options, "system": variant.system(), "config": config}
        results.append(
            run_agent(
                TimedLLM(built.llm, clock),
                built.task,
                tuple(timed_tool(t, clock) for t in built.tools),
                tenant=rng.choice(("acme", "globex", "initech")),
                observer=observer,
                runtime=clock.runtime(int(fraction("rollout", seed, index) * 2**32)),
                **options,
            )
        )
    return results
