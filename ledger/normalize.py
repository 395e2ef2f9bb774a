"""From a span to a normalized model call: who was called, with which tokens.

Instrumentations disagree on what "input tokens" means:

* Anthropic's API reports ``input_tokens`` EXCLUDING cache reads and writes.
* OpenAI's ``prompt_tokens`` INCLUDES cached tokens.
* The current OTel GenAI conventions say ``gen_ai.usage.input_tokens`` SHOULD
  include cache read and cache creation tokens; some instrumentations copy the
  provider's raw number instead.

So the convention is decided per source: by instrumentation scope where we know
it, by attribute family otherwise. A reported input count smaller than the
cache tokens it is supposed to include can only be an excluding count, which
catches instrumentations we have not met yet.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import conventions as c
from .pricing import TokenCounts
from .spans import SpanRecord

__all__ = ["CONTENT_ATTRIBUTES", "OPENINFERENCE_MESSAGE", "ModelCall", "captured_payload", "is_model_call", "model_call", "tenant_of"]

MODEL_CALL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion"})
INCLUDES_CACHE = "includes_cache"
EXCLUDES_CACHE = "excludes_cache"

# Instrumentation scopes whose input-token attribute is the provider's raw
# Anthropic number (cache excluded) even under the current attribute names.
RAW_ANTHROPIC_SCOPES = frozenset(
    {
        "opentelemetry.instrumentation.anthropic",  # OpenLLMetry / Traceloop
    }
)

# --- attribute families, in order of preference -----------------------------------
_OPENINFERENCE_PROMPT = "llm.token_count.prompt"
_OPENINFERENCE_COMPLETION = "llm.token_count.completion"
_OPENINFERENCE_CACHE_READ = "llm.token_count.prompt_details.cache_read"
_OPENINFERENCE_CACHE_WRITE = "llm.token_count.prompt_details.cache_write"
_OPENINFERENCE_REASONING = "llm.token_count.completion_details.reasoning"
_OPENINFERENCE_KIND = "openinference.span.kind"
_DEPRECATED_PROMPT = "gen_ai.usage.prompt_tokens"
_DEPRECATED_COMPLETION = "gen_ai.usage.completion_tokens"
_LEGACY_CACHE_READ = ("gen_ai.usage.cache_read_input_tokens", "gen_ai.usage.cache_read.input_tokens")
_LEGACY_CACHE_WRITE = ("gen_ai.usage.cache_creation_input_tokens", "gen_ai.usage.cache_creation.input_tokens")
_MODEL_KEYS = (c.RESPONSE_MODEL, c.REQUEST_MODEL, "llm.model_name", "gen_ai.response.model")
_PROVIDER_KEYS = (c.PROVIDER_NAME, "gen_ai.system", "llm.provider", "llm.system")
# Attributes that carry captured content: moved to the content store at ingest.
CONTENT_ATTRIBUTES = (c.REQUEST_BODY, c.INPUT_MESSAGES, c.SYSTEM_INSTRUCTIONS, c.TOOL_DEFINITIONS)
OPENINFERENCE_MESSAGE = re.compile(r"^llm\.input_messages\.(\d+)\.message\.(role|content)$")
_TENANT_KEYS = (c.TENANT, "tenant.id", "tenant", "enduser.tenant", "session.tenant")


@dataclass(frozen=True, slots=True)
class ModelCall:
    provider: str
    model: str
    tokens: TokenCounts
    convention: str  # how the input count was read, kept on the charge for audits
    call_id: str
    attempt: int
    retry_cause: str
    call_site: str
    finish_reason: str


def _first(attrs: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for k in keys:
        v = attrs.get(k)
        if v not in (None, ""):
            return v
    return None


def _int(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


def tenant_of(span: SpanRecord) -> str | None:
    for source in (span.attributes, span.resource):
        v = _first(source, _TENANT_KEYS)
        if v is not None:
            return str(v)
    return None


def is_model_call(span: SpanRecord) -> bool:
    attrs = span.attributes
    op = attrs.get(c.OPERATION_NAME)
    if op is not None:
        return op in MODEL_CALL_OPERATIONS
    kind = attrs.get(_OPENINFERENCE_KIND)
    if kind is not None:
        return str(kind).upper() == "LLM"
    return any(k in attrs for k in (c.INPUT_TOKENS, _DEPRECATED_PROMPT, _OPENINFERENCE_PROMPT)) and bool(
        _first(attrs, _MODEL_KEYS)
    )


def _tokens(span: SpanRecord) -> tuple[TokenCounts, str]:
    a = span.attributes
    cache_read = _int(_first(a, _LEGACY_CACHE_READ) or a.get(_OPENINFERENCE_CACHE_READ))
    cache_write = _int(_first(a, _LEGACY_CACHE_WRITE) or a.get(_OPENINFERENCE_CACHE_WRITE))
    reasoning = _int(a.get(c.REASONING_OUTPUT_TOKENS) or a.get(_OPENINFERENCE_REASONING))
    if c.INPUT_TOKENS in a:
        reported_in, out = _int(a.get(c.INPUT_TOKENS)), _int(a.get(c.OUTPUT_TOKENS))
        includes = span.scope_name not in RAW_ANTHROPIC_SCOPES
    elif _DEPRECATED_PROMPT in a:
        reported_in, out = _int(a.get(_DEPRECATED_PROMPT)), _int(a.get(_DEPRECATED_COMPLETION))
        # The old names mirrored OpenAI's prompt_tokens (cache included), except
        # where an Anthropic instrumentation copied Anthropic's raw number.
        includes = span.scope_name not in RAW_ANTHROPIC_SCOPES
    else:
        reported_in, out = _int(a.get(_OPENINFERENCE_PROMPT)), _int(a.get(_OPENINFERENCE_COMPLETION))
        includes = True  # OpenInference's prompt count is the total prompt
    if includes and reported_in < cache_read + cache_write:
        includes = False  # cannot include more than it counts: an excluding source
    uncached = reported_in - cache_read - cache_write if includes else reported_in
    return (
        TokenCounts(uncached, cache_write, cache_read, out, reasoning),
        INCLUDES_CACHE if includes else EXCLUDES_CACHE,
    )


def model_call(span: SpanRecord) -> ModelCall | None:
    """The normalized model call a span records, or None when it is not one."""
    if not is_model_call(span):
        return None
    a = span.attributes
    tokens, convention = _tokens(span)
    finish = a.get(c.FINISH_REASONS) or a.get("llm.finish_reason") or ""
    if isinstance(finish, (list, tuple)):
        finish = ",".join(str(f) for f in finish)
    return ModelCall(
        provider=str(_first(a, _PROVIDER_KEYS) or _first(span.resource, _PROVIDER_KEYS) or "").lower(),
        model=str(_first(a, _MODEL_KEYS) or ""),
        tokens=tokens,
        convention=convention,
        call_id=str(a.get(c.CALL_ID) or span.span_id),
        attempt=_int(a.get(c.ATTEMPT)) or 1,
        retry_cause=str(a.get(c.RETRY_CAUSE) or ""),
        call_site=str(a.get(c.CALL_SITE) or "agent"),
        finish_reason=str(finish),
    )


def _json_value(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return raw


def captured_payload(span: SpanRecord) -> dict[str, Any] | None:
    """The request payload a span carries: ours verbatim, or rebuilt from GenAI/OpenInference content."""
    a = span.attributes
    if c.REQUEST_BODY in a:
        body = _json_value(a[c.REQUEST_BODY])
        return body if isinstance(body, dict) else {"body": body}
    payload: dict[str, Any] = {}
    if c.SYSTEM_INSTRUCTIONS in a:
        payload["system"] = _json_value(a[c.SYSTEM_INSTRUCTIONS])
    if c.TOOL_DEFINITIONS in a:
        payload["tools"] = _json_value(a[c.TOOL_DEFINITIONS])
    if c.INPUT_MESSAGES in a:
        payload["messages"] = _json_value(a[c.INPUT_MESSAGES])
    else:
        found: dict[int, dict[str, Any]] = {}
        for key, value in a.items():
            m = OPENINFERENCE_MESSAGE.match(key)
            if m:
                found.setdefault(int(m.group(1)), {})[m.group(2)] = value
        if found:
            payload["messages"] = [found[i] for i in sorted(found)]
    return payload or None
