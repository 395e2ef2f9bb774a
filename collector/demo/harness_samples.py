"""Sample traces produced by the real harness: named scenarios run with scripted models.

Each ``HARNESS_SAMPLES`` entry runs a scenario of ``collector.demo.scenarios``
(or ``research``) through ``collector.demo.simulate.execute``, observed by
``OTelObserver`` with content capture on, on a virtual clock; span ids are
renumbered in time order, so the files are the same on every machine.
``collector.demo.samples.write_samples`` writes them to ``sample_traces/harness/``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from collector.demo.samples import MS, T0, hex_id
from ledger import conventions as c
from ledger.spans import SpanRecord

__all__ = ["HARNESS_FOLDER", "HARNESS_SAMPLES", "HarnessSample", "build_harness"]

HARNESS_FOLDER = "harness"
HARNESS_T0 = T0 + 86_400_000 * MS  # a day after the assembled samples
_BUDGET_MODEL = "claude-opus-5"  # the scripted model's token estimate includes the model name: keep the seed's


@dataclass(frozen=True)
class HarnessSample:
    """One harness run: a scenario of ``collector.demo.scenarios`` (or ``research``) and its setting."""

    scenario: str
    story: str
    model: str = "claude-sonnet-5"
    tenant: str = "initech"
    faults: dict[int, tuple[tuple[int | None, float | None], ...]] = field(default_factory=dict)
    pages: int = 0
    fanout: int = 1


HARNESS_SAMPLES: dict[str, HarnessSample] = {
    "pto_happy_path": HarnessSample(
        "happy", "Two look-ups requested in one turn run concurrently; one user message answers both."
    ),
    "looping_search": HarnessSample(
        "looping", "The same search again and again: nudged on the 4th call, halted on the 5th."
    ),
    "config_cycle": HarnessSample(
        "cycle", "Read, write back the same content, read: the world never changes (cycle).", tenant="acme"
    ),
    "stalled_tests": HarnessSample(
        "stall", "A new edit every turn, the failing count never moves (stall).", tenant="acme"
    ),
    "budget_burner": HarnessSample(
        "budget_burner",
        "An ever-longer history: the 11th call takes the run to 12,990 tokens against a 12,000 budget.",
        model=_BUDGET_MODEL,
    ),
    "recovering_date_error": HarnessSample(
        "recovering", "A bad date, an actionable is_error result, a corrected call, an answer."
    ),
    "refund_handoff": HarnessSample("handoff", "A refund needs a finance approver: handed to a person."),
    "refusal": HarnessSample("refusal", "The model declines.", model="claude-haiku-4-5"),
    "max_tokens_cutoff": HarnessSample(
        "max_tokens", "A tool call cut off mid-argument by max_tokens is never run.", model="claude-haiku-4-5"
    ),
    "cache_break": HarnessSample(
        "cache_break", "The provider's cache expired before the third call: the whole prompt is written again."
    ),
    "shipping_soft_failure": HarnessSample(
        "soft_failure",
        "Every shipping lookup runs fine and finds nothing (a soft failure) until the step cap.",
        tenant="acme",
    ),
    "retry_storm": HarnessSample(
        "happy",
        "A 429 with retry-after: 7 is waited out, then a 529 is retried with backoff: 4 attempts, 4 charges.",
        faults={0: ((429, 7.0),), 1: ((529, None),)},
    ),
    "research_with_summarizer": HarnessSample(
        "research",
        "Each fetch_page tool call summarizes its page with a second model (call site 'summarizer').",
        model="claude-opus-5",
        tenant="acme",
        pages=3,
    ),
    "healthy_cache": HarnessSample(
        "policy_research",
        "Five turns over a 4,000-token prefix: each turn reads back everything the last one cached.",
    ),
    "clock_in_system_prompt": HarnessSample(
        "clock_in_prompt",
        "The same five turns, with the current time at the top of the system prompt: every turn "
        "writes the whole prompt again and reads nothing back.",
    ),
    "reordered_tools": HarnessSample(
        "tools_reordered",
        "The same five turns; from the third on the tool list is sent sorted by name: one full re-write.",
    ),
    "below_minimum": HarnessSample(
        "triage",
        "A 550-token prompt on claude-haiku-4-5, whose minimum cacheable prefix is 4,096 tokens: the "
        "breakpoint is ignored, nothing is cached (claude-opus-5 would cache it).",
        model="claude-haiku-4-5",
    ),
}


def _renumber(spans: list[SpanRecord], key: str) -> list[SpanRecord]:
    """Ids fixed by time order, so parallel tool spans (created in thread order) get the same ids every time."""

    def order(s: SpanRecord) -> tuple[Any, ...]:
        a = s.attributes
        return (s.start_ns, s.end_ns, s.name, str(a.get(c.TOOL_CALL_ID, "")), str(a.get(c.CALL_ID, "")))

    ordered = sorted(spans, key=order)
    trace_id = hex_id(f"trace:harness:{key}", 32)
    ids = {s.span_id: hex_id(f"span:harness:{key}:{i}", 16) for i, s in enumerate(ordered)}
    return [
        replace(s, trace_id=trace_id, span_id=ids[s.span_id], parent_span_id=ids.get(s.parent_span_id, ""))
        for s in ordered
    ]


def build_harness(name: str) -> list[SpanRecord]:
    """Run harness sample ``name`` and return its spans as the ledger would receive them."""
    # Imported here: the assembled samples must not need the harness or the SDK.
    from collector.demo.simulate import AGENTS, HR_AGENT, RunPlan, execute
    from collector.harness.telemetry import (
        InMemorySpanExporter,
        OTelObserver,
        build_resource,
        span_records,
        tracer_provider,
    )

    try:
        sample = HARNESS_SAMPLES[name]
    except KeyError:
        raise KeyError(f"unknown harness sample {name!r}; known: {sorted(HARNESS_SAMPLES)}") from None
    index = list(HARNESS_SAMPLES).index(name)
    agent, version, prompt = AGENTS.get(sample.scenario, HR_AGENT)
    exporter = InMemorySpanExporter()
    resource = build_resource(agent, version, "sample", detect=False)
    provider = tracer_provider([exporter], resource=resource, batch=False)
    plan = RunPlan(
        index=index,
        seed=2026,
        tenant=sample.tenant,
        tier="enterprise",
        kind=sample.scenario,
        model=sample.model,
        start_ns=HARNESS_T0 + index * 3_600_000 * MS,
        faults=dict(sample.faults),
        pages=sample.pages,
        fanout=sample.fanout,
        prompt_version=prompt,
    )
    try:
        execute(plan, OTelObserver(provider, capture="redacted"))
        provider.force_flush()
        return _renumber(span_records(exporter.get_finished_spans()), name)
    finally:
        provider.shutdown()
