"""Usage that agent frameworks report in shapes of their own, read into the GenAI names ``ledger.normalize`` reads.

Each framework below puts (part of) a call's usage somewhere the attribute
families of ``ledger.normalize`` do not reach; ``overlay`` returns the missing
counts under GenAI names (values as sent: ``normalize`` validates every count),
with how the input count is meant when the shape says so. Checked against each
framework's code:

* **LiteLLM** (``litellm/integrations/opentelemetry.py``): its ``litellm_request``
  span (scope ``litellm``) gives ``gen_ai.usage.input_tokens`` = ``prompt_tokens``,
  which includes the cache, and the cache terms only inside
  ``metadata.usage_object``, the usage dict as Python's ``repr`` (read with
  ``ast.literal_eval``, never ``eval``). Its child ``raw_gen_ai_request`` carries
  the provider's raw answer as ``llm.<provider>.<field>``: ``.usage`` (a repr,
  in the provider's semantics: Anthropic's ``input_tokens`` excludes the
  cache), ``.id``, ``.model``. Given an application's span as parent, LiteLLM
  writes its ``litellm_request`` attributes onto THAT span, each call over the
  last (``stamped_by_litellm``): such a span is not a call; the raw spans are.
* **LangChain under OpenInference** (``openinference.instrumentation.langchain``):
  ``llm.token_count.prompt`` is LangChain's ``input_tokens`` (cache included), but
  current ``langchain-anthropic`` reports a write as ``input_token_details``
  ``cache_creation`` 0 beside ``ephemeral_5m_input_tokens`` /
  ``ephemeral_1h_input_tokens``, which only the LLMResult JSON in ``output.value``
  keeps (``generations[0][0].message.kwargs.usage_metadata``), with the
  provider's response id (``….response_metadata.id``, or ``llm_output.id``).
* **Claude Code** (``claude_code.llm_request`` spans, beta traces): its own
  names, in Anthropic's semantics: ``input_tokens`` (excluding the cache),
  ``output_tokens``, ``cache_read_tokens``, ``cache_creation_tokens``, ``model``,
  ``request_id``. Since 2.1.3xx it adds the GenAI names too (input including the
  cache), which are read first.

pydantic-ai's ``gen_ai.usage.details.*`` names are plain attributes, so they are
among ``normalize``'s key lists instead.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from . import conventions as c
from .captured import json_value
from .spans import SpanRecord

__all__ = [
    "CLAUDE_CODE_REQUEST_SPAN",
    "LITELLM_RAW_SPAN",
    "LITELLM_SCOPE",
    "is_framework_call",
    "nested_response_id",
    "overlay",
    "stamped_by_litellm",
]

LITELLM_SCOPE = "litellm"  # its tracer's default name (LITELLM_TRACER_NAME)
LITELLM_USAGE = "metadata.usage_object"
LITELLM_RAW_SPAN = "raw_gen_ai_request"
CLAUDE_CODE_REQUEST_SPAN = "claude_code.llm_request"
OPENINFERENCE_LANGCHAIN = "openinference.instrumentation.langchain"
_OUTPUT_VALUE = "output.value"
# A repr longer than any usage object is not one: literal_eval's cost follows the text.
_MAX_REPR_CHARS = 8_192


def stamped_by_litellm(span: SpanRecord) -> bool:
    """A span LiteLLM wrote its call attributes onto that is not its own (an application's parent span)."""
    return LITELLM_USAGE in span.attributes and span.scope_name != LITELLM_SCOPE


def _raw_usage_key(span: SpanRecord) -> str | None:
    """``llm.<provider>.usage`` on LiteLLM's raw-request span, or None."""
    if span.name != LITELLM_RAW_SPAN:
        return None
    for key in span.attributes:
        if key.startswith("llm.") and key.endswith(".usage") and key.count(".") == 2:
            return key
    return None


def is_framework_call(span: SpanRecord) -> bool:
    """A model call that only its framework's own names say is one."""
    return span.name == CLAUDE_CODE_REQUEST_SPAN or _raw_usage_key(span) is not None


def _literal(text: Any) -> dict[str, Any] | None:
    """A dict sent as Python's repr (or JSON), or None when it is not one."""
    if isinstance(text, dict):
        return text
    if not isinstance(text, str) or len(text) > _MAX_REPR_CHARS:
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        value = json_value(text)  # JSON's null/true/false are not Python literals
    return value if isinstance(value, dict) else None


def _get(d: Any, *path: str | int) -> Any:
    for step in path:
        if isinstance(step, int):
            if not isinstance(d, list) or len(d) <= step:
                return None
        elif not isinstance(d, dict):
            return None
        d = d[step] if isinstance(step, int) else d.get(step)
    return d


def _present(pairs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in pairs.items() if v is not None}


def overlay(span: SpanRecord) -> tuple[dict[str, Any], bool | None] | None:
    """The usage this span's framework reports under its own names, as GenAI attributes, and whether
    its input count includes the cache (None: as ``normalize`` decides); None when it reports none."""
    a = span.attributes
    if LITELLM_USAGE in a:
        return _litellm(a)
    raw = _raw_usage_key(span)
    if raw is not None:
        return _litellm_raw(a, raw)
    if span.name == CLAUDE_CODE_REQUEST_SPAN and c.INPUT_TOKENS not in a:
        return _claude_code(a)
    if span.scope_name == OPENINFERENCE_LANGCHAIN and _OUTPUT_VALUE in a:
        return _langchain(a)
    return None


def _split(details: Any) -> dict[str, Any]:
    return _present({
        c.CACHE_CREATION_5M_INPUT_TOKENS: _get(details, "ephemeral_5m_input_tokens"),
        c.CACHE_CREATION_1H_INPUT_TOKENS: _get(details, "ephemeral_1h_input_tokens"),
    })  # fmt: skip


def _litellm(a: Mapping[str, Any]) -> tuple[dict[str, Any], bool | None] | None:
    usage = _literal(a[LITELLM_USAGE])
    if usage is None:
        return None
    prompt = usage.get("prompt_tokens_details")
    read = usage.get("cache_read_input_tokens")
    write = usage.get("cache_creation_input_tokens")
    out = _present({
        c.INPUT_TOKENS: usage.get("prompt_tokens"), c.OUTPUT_TOKENS: usage.get("completion_tokens"),
        c.CACHE_READ_INPUT_TOKENS: _get(prompt, "cached_tokens") if read is None else read,
        c.CACHE_CREATION_INPUT_TOKENS: _get(prompt, "cache_creation_tokens") if write is None else write,
        **_split(_get(prompt, "cache_creation_token_details")),
    })  # fmt: skip
    return {k: v for k, v in out.items() if k not in a}, True  # prompt_tokens includes the cache


def _litellm_raw(a: Mapping[str, Any], usage_key: str) -> tuple[dict[str, Any], bool | None] | None:
    usage = _literal(a[usage_key])
    if usage is None:
        return None
    prefix = usage_key[: -len("usage")]
    provider = prefix[len("llm.") : -1]
    out = _present({
        c.OPERATION_NAME: "chat", c.PROVIDER_NAME: provider, c.RESPONSE_MODEL: a.get(f"{prefix}model"),
        c.INPUT_TOKENS: usage.get("input_tokens"), c.OUTPUT_TOKENS: usage.get("output_tokens"),
        c.CACHE_READ_INPUT_TOKENS: usage.get("cache_read_input_tokens"),
        c.CACHE_CREATION_INPUT_TOKENS: usage.get("cache_creation_input_tokens"),
        **_split(usage.get("cache_creation")),
    })  # fmt: skip
    # The provider's raw usage: Anthropic's input_tokens excludes the cache; OpenAI's prompt_tokens
    # (the keys differ, so they are not read here) would include it.
    return out, False


def _claude_code(a: Mapping[str, Any]) -> tuple[dict[str, Any], bool | None]:
    out = _present({
        c.PROVIDER_NAME: a.get("gen_ai.system") or "anthropic", c.REQUEST_MODEL: a.get("model"),
        c.INPUT_TOKENS: a.get("input_tokens"), c.OUTPUT_TOKENS: a.get("output_tokens"),
        c.CACHE_READ_INPUT_TOKENS: a.get("cache_read_tokens"),
        c.CACHE_CREATION_INPUT_TOKENS: a.get("cache_creation_tokens"),
    })  # fmt: skip
    return out, False  # Anthropic's semantics: input excludes the cache


def _generation_message(output: Any) -> Any:
    return _get(output, "generations", 0, 0, "message", "kwargs")


def _langchain(a: Mapping[str, Any]) -> tuple[dict[str, Any], bool | None] | None:
    details = _get(_generation_message(json_value(a[_OUTPUT_VALUE])), "usage_metadata", "input_token_details")
    if not isinstance(details, dict):
        return None
    split = _split(details)
    counts = [details.get("cache_creation", 0), *split.values()]
    if not split or not all(type(n) is int for n in counts):
        return None  # no TTL split to add (or counts normalize will flag from the flat attributes)
    # cache_creation is 0 beside the split in current langchain-anthropic, the same total in others
    write = max(counts[0], sum(counts[1:]))
    return {"llm.token_count.prompt_details.cache_write": write, **split}, None


def nested_response_id(span: SpanRecord) -> str:
    """The provider's response id where a framework nests it ("" if none): LiteLLM's raw span's
    ``llm.<provider>.id``; the LLMResult or message JSON in OpenInference's ``output.value``."""
    a = span.attributes
    raw = _raw_usage_key(span)
    if raw is not None:
        found = a.get(f"{raw[: -len('usage')]}id")
        return found if isinstance(found, str) else ""
    if _OUTPUT_VALUE not in a:
        return ""
    output = json_value(a[_OUTPUT_VALUE])
    for found in (
        _get(output, "id"),  # the SDK's message (openinference-instrumentation-anthropic)
        _get(_generation_message(output), "response_metadata", "id"),  # LangChain's LLMResult
        _get(output, "llm_output", "id"),
    ):
        if isinstance(found, str) and found:
            return found
    return ""
