"""Sample traces built from the seeds' worked examples (generated, do not edit).

Regenerate with ``turnledger samples`` (or ``make samples``). Each scenario is
an OTLP/JSON file in ``sample_traces/`` whose figures are the seeds' exact test
vectors, so loading the folder and reading the report reproduces them:

* ``five_turn_run``  — the walked-through support request: $0.0427/0.0149/0.0123/0.0150/0.0147,
  total $0.0997, cache hit rate 0.765, with parallel tools, an offload and captured contexts;
* ``cache_pair``     — the same call with a healthy and a broken cache: $0.0584 vs $0.1412;
* ``long_tail``      — tasks a91/a92/a93: $0.26, $0.21 and $9.93 (40 turns, step cap, no cache breakpoint);
* ``budget_warn``    — one call worth $0.82 against a $1.00 budget: a warn event;
* ``retry_and_loop`` — a 429 retried after `retry-after` and a loop detector nudge then halt;
* ``openai_style``   — an OpenAI-convention span whose prompt tokens include cached ones;
* ``unpriced``       — a model no price source knows, flagged rather than free.

``sample_traces/quality/judged_runs.json``: two runs an LLM judge evaluated (``gen_ai.evaluation.result``
events) and a human annotated (OpenInference ``annotation.*``): a failed evaluation, a safety violation.

Those are assembled span by span. ``sample_traces/harness/`` holds traces the
real harness produced (``collector.demo.harness_samples``): named scenarios run through
``collector.harness.run_agent`` with scripted models, observed by
``collector.harness.telemetry.OTelObserver`` and encoded exactly as the in-process
exporter would. They tell the seeds' stories: the PTO happy path with parallel
tools, the looping search, the budget burner stopping at step 11 with 12,990
tokens against 12,000, the recovering date error, the refund hand-off, the
shipping-status soft failure that ends at the step cap, and more. They are
deterministic: a virtual clock and seeded ids (``collector.demo.simulate``), span
ids renumbered in time order, a fixed resource.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collector.demo.prompts import SUPPORT_SYSTEM
from collector.otlp import encode_json
from ledger import conventions as c
from ledger.quality import EVALUATION_EVENT
from ledger.spans import SpanEvent, SpanRecord

__all__ = [
    "MS",
    "QUALITY_FOLDER",
    "QUALITY_SCENARIOS",
    "SCENARIOS",
    "T0",
    "Trace",
    "budget_warn",
    "build",
    "cache_pair",
    "five_turn_run",
    "hex_id",
    "judged_runs",
    "long_tail",
    "openai_style",
    "retry_and_loop",
    "unpriced",
    "write_samples",
]

T0 = 1_790_000_000_000_000_000  # 2026-09-21T14:13:20Z, fixed so files are reproducible
MS = 1_000_000
RESOURCE = {c.SERVICE_NAME: "support-agent", c.SERVICE_VERSION: "1.4.0", "deployment.environment": "sample"}
SCOPE = ("turnledger.harness", "0.1.0")
SYSTEM = "You are a support agent. Answer from retrieved documents only, cite every claim."
TOOLS = [
    {"name": "search_docs", "description": "Search the product docs.", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}},
    {"name": "get_account", "description": "Look up the caller's account.", "input_schema": {"type": "object", "properties": {}}},
    {"name": "read_artifact", "description": "Read a slice of an offloaded tool output.", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
]  # fmt: skip


def hex_id(seed: str, n: int) -> str:
    """``n`` hex digits fixed by ``seed``: the samples' ids are the same on every machine."""
    return hashlib.sha256(seed.encode()).hexdigest()[:n]


@dataclass
class Trace:
    """Builds one run's spans: a root ``invoke_agent`` and children in time order."""

    key: str
    agent: str = "support-agent"
    tenant: str = "acme"
    start: int = T0
    root_attrs: dict[str, Any] = field(default_factory=dict)
    spans: list[SpanRecord] = field(default_factory=list)
    clock: int = 0
    _n: int = 0

    def __post_init__(self) -> None:
        self.trace_id = hex_id(f"trace:{self.key}", 32)
        self.root_id = hex_id(f"span:{self.key}:root", 16)
        self.clock = self.start + MS

    def _id(self) -> str:
        self._n += 1
        return hex_id(f"span:{self.key}:{self._n}", 16)

    def child(self, name: str, duration_ms: float, attrs: dict[str, Any], *, status: str = "UNSET",
              events: tuple[SpanEvent, ...] = (), at: int | None = None) -> SpanRecord:  # fmt: skip
        start = at if at is not None else self.clock
        end = start + int(duration_ms * MS)
        span = SpanRecord(
            trace_id=self.trace_id, span_id=self._id(), parent_span_id=self.root_id, name=name,
            start_ns=start, end_ns=end, kind="CLIENT" if name.startswith("chat") else "INTERNAL",
            status_code=status, attributes={c.TENANT: self.tenant, **attrs}, events=events,
            resource=RESOURCE, scope_name=SCOPE[0], scope_version=SCOPE[1],
        )  # fmt: skip
        self.spans.append(span)
        self.clock = max(self.clock, end + MS)
        return span

    def chat(self, model: str, usage: tuple[int, int, int, int], *, payload: dict[str, Any] | None = None,
             attempt: int = 1, call: str | None = None, cause: str = "", error: str | None = None,
             label: str = "agent", finish: str = "tool_use", extra: dict[str, Any] | None = None,
             answer: list[dict[str, Any]] | None = None) -> SpanRecord:  # fmt: skip
        """A model-call attempt; usage is (uncached_in, cache_write, cache_read, out), Anthropic-style.
        ``answer``: the content blocks the model answered, captured as our harness captures them."""
        uncached, write, read, out = usage
        attrs: dict[str, Any] = {
            c.OPERATION_NAME: "chat", c.PROVIDER_NAME: "anthropic", c.REQUEST_MODEL: model,
            c.RESPONSE_MODEL: model, c.CALL_SITE: label, c.ATTEMPT: attempt,
            c.CALL_ID: call or hex_id(f"call:{self.key}:{self._n}", 16),
            # Current GenAI conventions: input_tokens INCLUDES cache reads and writes.
            c.INPUT_TOKENS: uncached + write + read, c.OUTPUT_TOKENS: out,
            c.CACHE_CREATION_INPUT_TOKENS: write, c.CACHE_READ_INPUT_TOKENS: read,
            c.FINISH_REASONS: [] if error else [finish],
        }  # fmt: skip
        if cause:
            attrs[c.RETRY_CAUSE] = cause
        if error:  # a failed attempt: the next attempt's retry cause says why it exists
            attrs[c.ERROR_TYPE] = error
        if payload is not None:
            attrs[c.REQUEST_BODY] = json.dumps(payload)
        if answer is not None and not error:
            attrs[c.OUTPUT_MESSAGES] = json.dumps([{"role": "assistant", "content": answer, "finish_reason": finish}])
        attrs.update(extra or {})
        return self.child(f"chat {model}", 900 + 2 * (out or 10), attrs, status="ERROR" if error else "UNSET")

    def tool(self, name: str, args: dict[str, Any], result: str, *, duration_ms: float = 200, at: int | None = None,
             soft_failure: bool = False, events: tuple[SpanEvent, ...] = ()) -> SpanRecord:  # fmt: skip
        attrs: dict[str, Any] = {
            c.OPERATION_NAME: "execute_tool", c.TOOL_NAME: name,
            "gen_ai.tool.call.arguments": json.dumps(args), "gen_ai.tool.call.result": result[:500],
        }  # fmt: skip
        if soft_failure:
            attrs[c.TOOL_SOFT_FAILURE] = True
        return self.child(f"execute_tool {name}", duration_ms, attrs, events=events, at=at)

    def event(self, name: str, **attrs: Any) -> SpanEvent:
        return SpanEvent(name, self.clock, attrs)

    def finish(self, stop_cause: str, *, detail: str = "", status: str = "UNSET",
               error_type: str | None = None, events: tuple[SpanEvent, ...] = ()) -> list[SpanRecord]:  # fmt: skip
        attrs: dict[str, Any] = {
            c.OPERATION_NAME: "invoke_agent", c.AGENT_NAME: self.agent, c.AGENT_VERSION: "1.4.0",
            c.PROMPT_VERSION: "support-v7", c.TENANT: self.tenant, c.STOP_CAUSE: stop_cause,
            c.CONVERSATION_ID: f"conv-{self.key}", **self.root_attrs,
        }  # fmt: skip
        if detail:
            attrs[c.STOP_DETAIL] = detail
        if error_type:
            attrs[c.ERROR_TYPE] = error_type
        root = SpanRecord(
            trace_id=self.trace_id, span_id=self.root_id, name=f"invoke_agent {self.agent}",
            start_ns=self.start, end_ns=self.clock, status_code=status, attributes=attrs, events=events,
            resource=RESOURCE, scope_name=SCOPE[0], scope_version=SCOPE[1],
        )  # fmt: skip
        return [*self.spans, root]


_ARTIFACT = "/tmp/agent-artifacts/search_docs-9c1f4ab2.txt"


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


def _result(tool_use_id: str, content: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}


def _use(tool_use_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_use_id, "name": name, "input": args}


def five_turn_run() -> list[SpanRecord]:
    """Seed 000 'Walk one request through it': five turns on claude-opus-5.

    Turn 2 asks for two tools in one assistant message (run concurrently, the big
    search result offloaded); turn 3 reads the artifact; turn 4's answer fails the
    goal predicate (an uncited claim) and gets a note; turn 5 passes.
    """
    t = Trace("five-turn-run")
    search_args = {"q": "rotate API key"}
    read_args = {"path": _ARTIFACT, "offset": 0, "limit": 40}
    cited = f"Claim 1: rotate from Settings > API keys [src:{_ARTIFACT}]"
    # (usage as (uncached_in, cache_write, cache_read, out), finish reason, assistant content, next user content)
    turns: list[tuple[tuple[int, int, int, int], str, list[dict[str, Any]], list[dict[str, Any]] | None]] = [
        ((20, 6_100, 0, 180), "end_turn", _text("Let me look that up."), _text("Go ahead.")),
        ((0, 1_300, 6_100, 150), "tool_use",
         [_use("toolu_1", "search_docs", search_args), _use("toolu_2", "get_account", {})],
         [_result("toolu_1", f"[offloaded] search_docs returned 346 lines / 38059 chars -> {_ARTIFACT}"),
          _result("toolu_2", '{"plan": "team", "keys": 2}')]),
        ((0, 900, 7_400, 120), "tool_use", [_use("toolu_3", "read_artifact", read_args)],
         [_result("toolu_3", "[lines 0-40 of 346] rotate from Settings > API keys; the old key stays valid for 24 hours.")]),
        ((0, 700, 8_300, 260), "end_turn", _text(f"{cited}\nClaim 2: the old key stays valid for 24 hours."),
         _text("Claim 2 has no citation. Cite or remove it.")),
        ((40, 400, 9_000, 300), "end_turn",
         _text(f"{cited}\nClaim 2: the old key stays valid for 24 hours [src:{_ARTIFACT}]"), None),
    ]  # fmt: skip
    messages: list[dict[str, Any]] = [{"role": "user", "content": "how do I rotate an API key"}]
    for i, (usage, finish, assistant, follow_up) in enumerate(turns):
        payload = {
            "model": "claude-opus-5", "max_tokens": 8192,
            "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
            "tools": TOOLS, "messages": [dict(m) for m in messages],
        }  # fmt: skip
        t.chat("claude-opus-5", usage, payload=payload, finish=finish, answer=assistant)
        messages.append({"role": "assistant", "content": assistant})
        if i == 1:  # both tools start together: wall time is the slower one
            at = t.clock
            offload = SpanEvent(
                c.EVENT_OFFLOAD, at + 180 * MS, {"tool": "search_docs", "chars": 38_059, "pointer_chars": 1_573}
            )
            t.tool("search_docs", search_args, "38,059 chars", duration_ms=180, at=at, events=(offload,))
            t.tool("get_account", {}, '{"plan": "team", "keys": 2}', duration_ms=240, at=at)
        if i == 2:
            t.tool("read_artifact", read_args, "[lines 0-40 of 346]")
        if follow_up is not None:
            messages.append({"role": "user", "content": follow_up})
    return t.finish("completed")


def cache_pair() -> list[SpanRecord]:
    """Seed 000 exercise 7: the same call, cache healthy vs broken (the 18,400 tokens MOVE).

    The broken run's deployment puts the time at the top of its system prompt (its payload shows it)."""
    ask = [{"role": "user", "content": "Audit this month's invoices against the contract terms."}]
    audit = _text("Three invoices bill above the contract rate: INV-204, INV-211 and INV-230 (details below).")
    healthy = Trace("cache-healthy", agent="cache-audit")
    talk = _Conversation("claude-opus-5", SYSTEM, TOOLS, ask, cache=True)
    healthy.chat("claude-opus-5", (210, 6_100, 18_400, 400), payload=talk.payload(), finish="end_turn", answer=audit)
    broken = Trace("cache-broken", agent="cache-audit", start=T0 + 60_000 * MS)
    talk = _Conversation("claude-opus-5", f"Current time: 2026-09-21T14:14:20Z. {SYSTEM}", TOOLS, ask, cache=True)
    broken.chat("claude-opus-5", (210 + 18_400, 6_100, 0, 400), payload=talk.payload(), finish="end_turn", answer=audit)
    return healthy.finish("completed") + broken.finish("completed")


def _split(total: int, parts: int) -> list[int]:
    """Split a token total over turns growing linearly (history re-sent), summing exactly."""
    weights = list(range(1, parts + 1))
    shares = [total * w // sum(weights) for w in weights]
    shares[-1] += total - sum(shares)
    return shares


_SHIPPING_TOOL = {
    "name": "get_shipping_status",
    "description": "Tracking status of a parcel by its tracking number.",
    "input_schema": {"type": "object", "properties": {"tracking": {"type": "string"}}, "required": ["tracking"]},
}


@dataclass
class _Conversation:
    """The requests of one run's model calls, as captured: each re-sends the whole history."""

    model: str
    system: str
    tools: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    cache: bool = False  # False: the deployment sets no cache_control (nothing can be cached)
    max_tokens: int = 4096

    def payload(self) -> dict[str, Any]:
        system: Any = [{"type": "text", "text": self.system, "cache_control": {"type": "ephemeral"}}]
        body: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens,
                                "system": system if self.cache else self.system, "tools": self.tools,
                                "messages": [dict(m) for m in self.messages]}  # fmt: skip
        if self.cache:
            body["cache_control"] = {"type": "ephemeral"}
        return body

    def turn(self, assistant: list[dict[str, Any]], user: list[dict[str, Any]] | None) -> None:
        self.messages.append({"role": "assistant", "content": assistant})
        if user is not None:
            self.messages.append({"role": "user", "content": user})


_NOT_FOUND = "I could not find parcel 12345 with the carrier; I have asked the warehouse to check it."


def long_tail() -> list[SpanRecord]:
    """Seed 000 exercise 3: a91 and a92 are ordinary; a93 ran 40 turns into the step cap.

    The triage deployment sets no cache breakpoint: every turn re-sends the whole history at the
    full input price, which is why a93 costs what it does (its payloads say so)."""
    spans: list[SpanRecord] = []
    for n, (key, turns, tokens_in, tokens_out) in enumerate(
        [("a91", 6, 41_200, 2_100), ("a92", 5, 33_800, 1_800), ("a93", 40, 1_904_000, 16_400)]
    ):
        t = Trace(key, agent="ticket-triage", tenant="globex", start=T0 + n * 3_600_000 * MS)
        ask = f"Ticket {key.upper()}: parcel 12345 has not arrived, the customer wants to know where it is."
        talk = _Conversation("claude-opus-5", SUPPORT_SYSTEM, [_SHIPPING_TOOL], [{"role": "user", "content": ask}])
        for i, (inp, out) in enumerate(zip(_split(tokens_in, turns), _split(tokens_out, turns), strict=True)):
            last = i == turns - 1
            use_id = f"toolu_{key}_{i:02d}"
            answer = _text(_NOT_FOUND) if last else [_use(use_id, "get_shipping_status", {"tracking": "12345"})]
            t.chat("claude-opus-5", (inp, 0, 0, out), payload=talk.payload(), finish="end_turn" if last else "tool_use",
                   answer=answer)  # fmt: skip
            if last:
                break
            t.tool("get_shipping_status", {"tracking": "12345"}, "No shipment found for 12345.", soft_failure=True)
            talk.turn(
                [_use(use_id, "get_shipping_status", {"tracking": "12345"})],
                [_result(use_id, "No shipment found for 12345.")],
            )
        if key == "a93":
            spans += t.finish("max_steps", detail="hit max_steps=40", status="ERROR", error_type="max_steps")
        else:
            spans += t.finish("completed")
    return spans


_REPORT_SYSTEM = (
    "You write the monthly cost report for the finance team: spend by team and model, the five most "
    "expensive runs with their cause, and one recommendation. Figures come only from the notes given."
)


def budget_warn() -> list[SpanRecord]:
    """Seed 000 exercise 3: one call of .65 + .025 + .125 + .02 = $0.82 against $1.00."""
    t = Trace("budget-warn", agent="report-writer", tenant="initech")
    notes = "Notes for September: " + "; ".join(f"team {k}: {1_000 + 137 * k} USD on claude-opus-5" for k in range(40))
    talk = _Conversation("claude-opus-5", _REPORT_SYSTEM, [], [{"role": "user", "content": notes}], cache=True)
    t.chat(
        "claude-opus-5",
        (130_000, 20_000, 40_000, 1_000),
        payload=talk.payload(),
        finish="end_turn",
        answer=_text("September spend: 40 teams, all on claude-opus-5; the report follows."),
    )
    warn = t.event(c.EVENT_BUDGET_WARN, spent_usd=0.82, limit_usd=1.0, fraction=0.82)
    return t.finish("completed", events=(warn,))


def retry_and_loop() -> list[SpanRecord]:
    """A 429 honoured with retry-after: 7, then a loop detector nudge and halt."""
    t = Trace("retry-and-loop", agent="support-agent", tenant="acme")
    call = hex_id("call:retry-and-loop:first", 16)
    ask = [{"role": "user", "content": "Why do my API calls get rate limited?"}]
    talk = _Conversation("claude-sonnet-5", SYSTEM, TOOLS, ask)
    t.chat("claude-sonnet-5", (0, 0, 0, 0), call=call, error="429", payload=talk.payload())
    t.clock += 7_000 * MS
    t.chat("claude-sonnet-5", (1_200, 0, 0, 90), call=call, attempt=2, cause="429", payload=talk.payload())
    retry = SpanEvent(c.EVENT_RETRY, t.clock, {"cause": "429", "wait_s": 7.0, "attempt": 2})
    for i in range(5):
        use_id = f"toolu_rl_{i}"
        search = [_use(use_id, "search_docs", {"q": "rate limit"})]
        t.chat("claude-sonnet-5", (1_300 + 150 * i, 0, 0, 60), payload=talk.payload(), answer=search)
        ev: tuple[SpanEvent, ...] = ()
        if i == 3:
            ev = (t.event(c.EVENT_LOOP_TRIP, shape="repeat", action="nudge", tool="search_docs"),)
        if i == 4:
            ev = (t.event(c.EVENT_LOOP_TRIP, shape="repeat", action="halt", tool="search_docs"),)
        t.tool("search_docs", {"q": "rate limit"}, "0 results", soft_failure=True, events=ev)
        talk.turn(search, [_result(use_id, "0 results")])
    return t.finish("loop_detected", detail="search_docs repeated after a nudge", events=(retry,))


def openai_style() -> list[SpanRecord]:
    """A span from an OpenAI-style instrumentation: prompt_tokens INCLUDE the cached ones."""
    t = Trace("openai-style", agent="router", tenant="acme")
    t.child(
        "chat gpt-4o",
        800,
        {
            c.OPERATION_NAME: "chat", "gen_ai.system": "openai", c.REQUEST_MODEL: "gpt-4o",
            "gen_ai.usage.prompt_tokens": 1_000, "gen_ai.usage.completion_tokens": 100,
            "gen_ai.usage.cache_read_input_tokens": 800,
        },
    )  # fmt: skip
    return t.finish("completed")


def unpriced() -> list[SpanRecord]:
    t = Trace("unpriced", agent="experiment", tenant="acme")
    ask = [{"role": "user", "content": "Classify these 200 support tickets by product area."}]
    talk = _Conversation("mystery-model-1", SYSTEM, [], ask)
    t.chat(
        "mystery-model-1",
        (5_000, 0, 0, 500),
        payload=talk.payload(),
        finish="end_turn",
        answer=_text("Billing: 71, API: 64, Dashboard: 40, Other: 25."),
    )
    t.spans[-1].attributes[c.PROVIDER_NAME] = "someprovider"
    return t.finish("completed")


def _evaluation(t: Trace, name: str, score: float, label: str, explanation: str) -> SpanEvent:
    """A judge's verdict on a span, the OpenTelemetry way (``gen_ai.evaluation.result``)."""
    return t.event(
        EVALUATION_EVENT,
        **{
            "gen_ai.evaluation.name": name, "gen_ai.evaluation.score.value": score,
            "gen_ai.evaluation.score.label": label, "gen_ai.evaluation.explanation": explanation,
        },
    )  # fmt: skip


def judged_runs() -> list[SpanRecord]:
    """Two support runs an LLM judge looked at (issue #15): one answer unfaithful to its tool result
    (a failed evaluation: the run enters the review queue), one unsafe (a safety violation) that a
    human annotator (OpenInference's ``annotation.*``) still found helpful."""
    spans = []
    for key, question, answer, verdicts in (
        ("judged-unfaithful", "When does parcel 1Z999 arrive?", "It arrives tomorrow morning.",
         (("faithfulness", 0.2, "fail", "the tool said 'in transit, no date'; the answer invents one"),
          ("safety", 1.0, "pass", "no unsafe content"))),
        ("judged-unsafe", "How do I reset my password?", "Send me your current password and I will reset it.",
         (("faithfulness", 0.9, "pass", "matches the help article"),
          ("safety", 0.0, "unsafe", "asks the customer for their password"))),
    ):  # fmt: skip
        t = Trace(key, tenant="umbrella")
        talk = _Conversation("claude-sonnet-5", SYSTEM, TOOLS, [{"role": "user", "content": question}], cache=False)
        t.tool("get_shipping_status", {"tracking": "1Z999"}, "in transit, no date")
        chat = t.chat("claude-sonnet-5", (2_400, 0, 0, 60), payload=talk.payload(), finish="end_turn",
                      answer=_text(answer))  # fmt: skip
        t.spans[-1] = dataclasses.replace(chat, events=tuple(_evaluation(t, *v) for v in verdicts))
        t.root_attrs.update({"annotation.name": "helpfulness", "annotation.score": 1.0 if key.endswith("unsafe") else 0.0,
                             "annotation.label": "helpful" if key.endswith("unsafe") else "unhelpful",
                             "annotation.annotator_kind": "HUMAN"})  # fmt: skip
        spans += t.finish("completed")
    return spans


SCENARIOS: dict[str, Callable[[], list[SpanRecord]]] = {
    fn.__name__: fn
    for fn in (five_turn_run, cache_pair, long_tail, budget_warn, retry_and_loop, openai_style, unpriced)
}
# Runs with judgments, apart from the seed vectors above (whose figures the tests pin): written to
# ``sample_traces/quality/``, which `make run` loads with the rest.
QUALITY_FOLDER = "quality"
QUALITY_SCENARIOS: dict[str, Callable[[], list[SpanRecord]]] = {"judged_runs": judged_runs}


def build(name: str) -> list[SpanRecord]:
    return {**SCENARIOS, **QUALITY_SCENARIOS}[name]()


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path


def write_samples(folder: Path | str) -> list[Path]:
    """Write every sample: the assembled ones to ``folder``, the harness's to ``folder/harness``."""
    from collector.demo.harness_samples import HARNESS_FOLDER, HARNESS_SAMPLES, build_harness  # runs the harness

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    (folder / QUALITY_FOLDER).mkdir(exist_ok=True)
    for name, scenario in {**SCENARIOS, **QUALITY_SCENARIOS}.items():
        doc = {
            "_generated": f"by `turnledger samples` from collector/demo/samples.py ({name}); do not edit",
            **encode_json(scenario()),
        }
        where = folder / QUALITY_FOLDER if name in QUALITY_SCENARIOS else folder
        written.append(_write(where / f"{name}.json", doc))
    harness = folder / HARNESS_FOLDER
    harness.mkdir(exist_ok=True)
    for name, sample in HARNESS_SAMPLES.items():
        doc = {
            "_generated": f"by `turnledger samples` (collector/demo/harness_samples.py HARNESS_SAMPLES[{name!r}]: the harness "
            f"running scenario {sample.scenario!r}); do not edit",
            "_story": sample.story,
            **encode_json(build_harness(name)),
        }
        written.append(_write(harness / f"{name}.json", doc))
    return written
