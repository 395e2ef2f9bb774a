"""What a judgment of a run is: user feedback and evaluations, their verdicts, and the review tags.

The one definition the rest reads (no DuckDB: the decoder processes build evaluation rows with it):

- a **judgment** is one ``evaluations`` row (``ledger.schema._V14_QUALITY``): feedback sent to
  ``POST /v1/feedback`` (``feedback_row``), or an evaluation carried by a span
  (``span_judgments``: ``gen_ai.evaluation.result`` events, OpenInference's
  ``evaluation.*``/``annotation.*`` attributes);
- ``failed``: negative feedback (score at or below ``feedback_fail_at_or_below``, or a label
  in ``negative_labels``) / a failed evaluation (a label in ``negative_labels``, or a score
  below its pass threshold: ``evaluation_pass_thresholds[name]``, else
  ``evaluation_pass_at_least``);
- ``safety``: a judgment whose name contains one of ``safety_names`` or whose tags hold one of
  ``safety_tags`` (a safety violation is a safety judgment that failed);
- ``REVIEW_TAGS``: what a reviewer tags a run with (more in ``review_tags``).

Every policy field is configurable with ``TURNLEDGER_QUALITY``, a JSON object of the fields to
change (``ledger.settings``), read once per process.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Any

import orjson
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as _gen_ai

from ..errors import InputError
from ..limits import MAX_TIME_NS, MIN_TIME_NS

if TYPE_CHECKING:
    from ..redact import Redactor

__all__ = [
    "CASES_PATH",
    "EVALUATION",
    "EVALUATION_EVENT",
    "FEEDBACK",
    "FEEDBACK_PATH",
    "REVIEW_PATH",
    "REVIEW_REASONS",
    "REVIEW_TAGS",
    "Judgment",
    "QualityPolicy",
    "SpanContext",
    "feedback_judgment",
    "judgment_row",
    "openinference_prefixes",
    "policy",
    "span_judgments",
]

FEEDBACK, EVALUATION = "feedback", "evaluation"
# The server's routes for judgments and the queue (``collector.receiver.quality_routes``; the client's too).
FEEDBACK_PATH, REVIEW_PATH, CASES_PATH = "/v1/feedback", "/api/review", "/api/cases"

# The OpenTelemetry GenAI evaluation event (semconv has the attribute names, not yet the event's).
EVALUATION_EVENT = "gen_ai.evaluation.result"
_EVENT_FIELDS = {
    "name": _gen_ai.GEN_AI_EVALUATION_NAME,
    "score": _gen_ai.GEN_AI_EVALUATION_SCORE_VALUE,
    "label": _gen_ai.GEN_AI_EVALUATION_SCORE_LABEL,
    "explanation": _gen_ai.GEN_AI_EVALUATION_EXPLANATION,
}
# OpenInference's evaluation and annotation attributes (its semantic conventions' EVALUATION_* and
# ANNOTATION_* names): one judgment under a prefix, alone (``evaluation.name``) or in a list
# flattened by index (``evaluations.0.evaluation.name``), the way OpenInference flattens messages.
_OPENINFERENCE = re.compile(r"^((?:evaluations\.\d+\.)?evaluation|(?:annotations\.\d+\.)?annotation)\.name$")
_OPENINFERENCE_FIELDS = {"score": "score", "label": "label", "explanation": "explanation", "source": "annotator_kind"}

REVIEW_TAGS = ("bad_plan", "wrong_tool", "tool_misuse", "hallucination", "unhelpful_tone", "should_have_escalated")
# Why a run entered the review queue, in the order the queue prefers them when several apply at once.
REVIEW_REASONS = (
    "errored",
    "step_cap",
    "loop_halt",
    "budget_stop",
    "negative_feedback",
    "failed_evaluation",
    "manual",
)

# Bounds of a judgment's fields: anything longer is refused (feedback) or not stored (a span's).
MAX_NAME_CHARS = 200
MAX_TEXT_CHARS = 8_192
MAX_TAGS = 32
MAX_ID_CHARS = 128
MAX_SCORE = 1e12
_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_HEX16 = re.compile(r"^[0-9a-f]{16}$")


@dataclass(frozen=True)
class QualityPolicy:
    """What counts as negative, failed and safety (``TURNLEDGER_QUALITY`` changes any field)."""

    feedback_fail_at_or_below: float = 0.0  # -1..1 and 0..1 scales: 0 and below is negative
    evaluation_pass_at_least: float = 0.5
    evaluation_pass_thresholds: Mapping[str, float] = field(default_factory=dict)  # by evaluation name
    negative_labels: frozenset[str] = frozenset(
        {"thumbs_down", "fail", "failed", "bad", "negative", "incorrect", "wrong", "unsafe", "violation", "toxic"}
    )
    safety_names: frozenset[str] = frozenset({"safety", "toxicity", "harm", "jailbreak", "pii"})
    safety_tags: frozenset[str] = frozenset({"safety"})
    review_tags: tuple[str, ...] = REVIEW_TAGS

    def failed(self, kind: str, name: str, score: float | None, label: str | None) -> bool:
        if label is not None and label.strip().lower() in self.negative_labels:
            return True
        if score is None:
            return False
        if kind == FEEDBACK:
            return score <= self.feedback_fail_at_or_below
        return score < self.evaluation_pass_thresholds.get(name, self.evaluation_pass_at_least)

    def safety(self, name: str, tags: tuple[str, ...]) -> bool:
        lowered = name.lower()
        return any(word in lowered for word in self.safety_names) or any(t.lower() in self.safety_tags for t in tags)

    @classmethod
    def from_json(cls, text: str) -> QualityPolicy:
        """The defaults with the fields of a JSON object changed (``TURNLEDGER_QUALITY``)."""
        try:
            doc = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise InputError(f"TURNLEDGER_QUALITY is not JSON: {exc}") from None
        known = {f.name for f in fields(cls)}
        if not isinstance(doc, dict) or set(doc) - known:
            raise InputError(f"TURNLEDGER_QUALITY: give a JSON object of {sorted(known)}")
        changes = {key: _policy_field(key, value) for key, value in doc.items()}
        return replace(cls(), **changes)


def _policy_field(key: str, value: Any) -> Any:
    """One ``TURNLEDGER_QUALITY`` field as the policy holds it; a wrong type is an InputError naming the field."""
    wanted = {"evaluation_pass_thresholds": "an object of numbers", "feedback_fail_at_or_below": "a number",
              "evaluation_pass_at_least": "a number"}.get(key, "a list of strings")  # fmt: skip
    try:
        if key == "evaluation_pass_thresholds":
            if not isinstance(value, dict):
                raise TypeError(key)
            return {str(k): _number(v) for k, v in value.items()}
        if key in ("feedback_fail_at_or_below", "evaluation_pass_at_least"):
            return _number(value)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise TypeError(key)
        if key == "review_tags":  # the fixed list, extended
            return tuple(dict.fromkeys((*REVIEW_TAGS, *value)))
        return frozenset(v.lower() for v in value)
    except (TypeError, ValueError):
        raise InputError(
            f"TURNLEDGER_QUALITY: {key} must be {wanted}, not {orjson.dumps(value)[:80].decode()}"
        ) from None


def _number(value: Any) -> float:
    """A finite JSON number (not a boolean, not a string)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TypeError(value)
    return float(value)


@cache
def policy() -> QualityPolicy:
    """This process's policy: the defaults, changed by ``TURNLEDGER_QUALITY``."""
    from ..settings import quality_settings

    text = quality_settings()
    return QualityPolicy.from_json(text) if text else QualityPolicy()


@dataclass(frozen=True, slots=True)
class Judgment:
    """One judgment, validated and redacted: an ``evaluations`` row's fields before ``failed``/``safety``."""

    eval_id: str
    kind: str
    trace_id: str
    span_id: str | None
    tenant: str | None
    name: str
    score: float | None
    label: str | None
    explanation: str | None
    tags: tuple[str, ...]
    source: str | None
    time_ns: int


@cache
def _row() -> Callable[..., tuple[Any, ...]]:
    """The evaluations row builder (built on first use: the CLI's parsers import this module)."""
    from ..tables import table

    return table("evaluations").compile_row(
        "j, failed, safety, tags, ingested_at",
        {
            "eval_id": "j.eval_id", "kind": "j.kind", "trace_id": "j.trace_id", "span_id": "j.span_id",
            "tenant": "j.tenant", "name": "j.name", "score": "j.score", "label": "j.label",
            "explanation": "j.explanation", "tags": "tags", "source": "j.source", "failed": "failed",
            "safety": "safety", "time": "j.time_ns", "ingested_at": "ingested_at",
        },
    )  # fmt: skip


def judgment_row(j: Judgment, ingested_at_us: int, chosen: QualityPolicy | None = None) -> tuple[Any, ...]:
    """The ``evaluations`` row of a judgment, its verdicts decided by the policy."""
    p = chosen or policy()
    failed = p.failed(j.kind, j.name, j.score, j.label)
    return _row()(j, failed, p.safety(j.name, j.tags), orjson.dumps(list(j.tags)).decode(), ingested_at_us)


# --- validation: every field named when it is wrong ------------------------------------------
def _text(doc: Mapping[str, Any], key: str, limit: int, redactor: Redactor | None) -> str | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InputError(f"{key}: give a string, not {type(value).__name__}")
    if len(value) > limit:
        raise InputError(f"{key}: {len(value)} characters; at most {limit}")
    try:
        value.encode()
    except UnicodeEncodeError:
        raise InputError(f"{key}: not valid text (a lone surrogate)") from None
    value = value.replace("\0", "")
    return redactor.text(value) if redactor is not None else value


def _score(value: Any, key: str = "score") -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{key}: give a number, not {type(value).__name__}")
    if isinstance(value, int) and abs(value) > MAX_SCORE:
        raise InputError(f"{key}: {value} is outside ±{MAX_SCORE:g}")
    score = float(value)
    if not math.isfinite(score) or abs(score) > MAX_SCORE:
        raise InputError(f"{key}: {value!r} is not a finite number within ±{MAX_SCORE:g}")
    return score


def _tags(value: Any, redactor: Redactor | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_TAGS:
        raise InputError(f"tags: give a list of at most {MAX_TAGS} strings")
    return tuple(dict.fromkeys(_text({"tags[]": t}, "tags[]", MAX_NAME_CHARS, redactor) or "" for t in value))


def _hex_id(value: Any, key: str, pattern: re.Pattern[str], digits: int) -> str:
    text = value.lower() if isinstance(value, str) else None
    if text is None or not pattern.match(text) or text == "0" * digits:
        raise InputError(f"{key}: {str(value)[:80]!r} is not {digits} hex digits (and not all zero)")
    return text


FEEDBACK_FIELDS = ("id", "trace_id", "span_id", "score", "label", "tags", "comment", "source", "name")


def feedback_judgment(doc: Any, redactor: Redactor | None, *, now_ns: int | None = None) -> Judgment:
    """A ``POST /v1/feedback`` body as a judgment, or ``InputError`` naming the field at fault.

    ``id`` (the client's) makes a retry idempotent: the same id is one row. Without one, each
    call is a new judgment. Every string is redacted; ``comment`` is stored as the explanation.
    """
    if not isinstance(doc, dict):
        raise InputError(f"give a JSON object with the fields {', '.join(FEEDBACK_FIELDS)}")
    unknown = sorted(set(doc) - set(FEEDBACK_FIELDS))
    if unknown:
        raise InputError(f"{unknown[0]}: not a feedback field (known: {', '.join(FEEDBACK_FIELDS)})")
    if "trace_id" not in doc:
        raise InputError("trace_id: required (the run the feedback is about)")
    trace_id = _hex_id(doc["trace_id"], "trace_id", _HEX32, 32)
    span_id = None if doc.get("span_id") is None else _hex_id(doc["span_id"], "span_id", _HEX16, 16)
    score, label = _score(doc.get("score")), _text(doc, "label", MAX_NAME_CHARS, redactor)
    if score is None and label is None:
        raise InputError("score: required (a number; or give a label such as thumbs_down)")
    client_id = _text(doc, "id", MAX_ID_CHARS, None)
    if client_id is not None and (not client_id or not client_id.isprintable()):
        raise InputError("id: give a non-empty printable string")
    time_ns = now_ns if now_ns is not None else int(datetime.now(UTC).timestamp() * 1e9)
    return Judgment(
        eval_id=f"feedback:{client_id}" if client_id is not None else f"feedback:{uuid.uuid4()}",
        kind=FEEDBACK,
        trace_id=trace_id,
        span_id=span_id,
        tenant=None,  # the run's tenant (runs.tenant), whenever its spans arrive
        name=_text(doc, "name", MAX_NAME_CHARS, redactor) or "user_feedback",
        score=score,
        label=label,
        explanation=_text(doc, "comment", MAX_TEXT_CHARS, redactor),
        tags=_tags(doc.get("tags"), redactor),
        source=_text(doc, "source", MAX_NAME_CHARS, redactor) or "user",
        time_ns=time_ns,
    )


# --- evaluations carried by spans ---------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SpanContext:
    """The span judgments are read from (already redacted: its events and attributes are as stored)."""

    trace_id: str
    span_id: str
    tenant: str | None
    end_ns: int


@cache
def openinference_prefixes(keys: tuple[str, ...]) -> tuple[str, ...]:
    """The OpenInference judgment prefixes among a span's attribute keys (decided once per key set)."""
    return tuple(m.group(1) for key in keys if (m := _OPENINFERENCE.match(key)))


def _span_judgment(
    ctx: SpanContext, eval_id: str, values: Mapping[str, Any], source: str | None, time_ns: int
) -> Judgment:
    name = _text(values, "name", MAX_NAME_CHARS, None)
    if not name:
        raise InputError("name: required (gen_ai.evaluation.name)")
    score, label = _score(values.get("score")), _text(values, "label", MAX_NAME_CHARS, None)
    if not MIN_TIME_NS <= time_ns <= MAX_TIME_NS:
        raise InputError(f"time {time_ns} is out of range")
    explanation = values.get("explanation")
    if explanation is not None and not isinstance(explanation, str):  # a JSON value: kept as its text
        explanation = orjson.dumps(explanation, default=str).decode()
    if explanation is not None and len(explanation) > MAX_TEXT_CHARS:
        explanation = f"{explanation[:MAX_TEXT_CHARS]}…[truncated, {len(explanation)} chars]"
    return Judgment(
        eval_id, EVALUATION, ctx.trace_id, ctx.span_id, ctx.tenant, name, score, label, explanation, (), source, time_ns
    )


def span_judgments(
    ctx: SpanContext,
    events: Iterable[tuple[str, int, Mapping[str, Any]]],
    attributes: Mapping[str, Any],
    prefixes: tuple[str, ...],
) -> Iterator[Judgment | str]:
    """The judgments a span carries, or for each one that cannot be stored, why (a note to flag).

    ``events``: (name, time, attributes) of the span's events; ``prefixes``: its OpenInference
    judgments' (``openinference_prefixes`` of its keys). The ids come from the span, so a
    redelivered span gives the same ids (one row each): ``event:{trace}/{span}/{seq}`` and
    ``attr:{trace}/{span}/{prefix}``.
    """
    for seq, (event_name, time_ns, attrs) in enumerate(events):
        if event_name != EVALUATION_EVENT:
            continue
        values = {f: attrs.get(key) for f, key in _EVENT_FIELDS.items()}
        try:
            yield _span_judgment(ctx, f"event:{ctx.trace_id}/{ctx.span_id}/{seq}", values, "otel", time_ns)
        except InputError as exc:
            yield f"events[{seq}] {EVALUATION_EVENT} not stored: {exc}"
    for prefix in prefixes:
        values = {"name": attributes.get(f"{prefix}.name")}
        values |= {f: attributes.get(f"{prefix}.{suffix}") for f, suffix in _OPENINFERENCE_FIELDS.items()}
        source = values.pop("source")
        try:
            source = _text({"source": source}, "source", MAX_NAME_CHARS, None)
            source = source.lower() if source else "openinference"
            yield _span_judgment(ctx, f"attr:{ctx.trace_id}/{ctx.span_id}/{prefix}", values, source, ctx.end_ns)
        except InputError as exc:
            yield f"{prefix}.* not stored: {exc}"
