"""From a span to a normalized model call: who was called, with which tokens.

Three attribute families reach the ledger, and each has had several spellings:

* OpenTelemetry GenAI conventions, current (``gen_ai.provider.name``,
  ``gen_ai.usage.input_tokens``, ``gen_ai.usage.cache_read.input_tokens``,
  ``gen_ai.usage.cache_creation.input_tokens`` and its newer spelling
  ``gen_ai.usage.cache_write.input_tokens``) and deprecated (``gen_ai.system``,
  ``gen_ai.usage.prompt_tokens`` / ``completion_tokens``,
  ``gen_ai.usage.cache_read_input_tokens`` / ``cache_creation_input_tokens``,
  and OpenLLMetry's older ``llm.usage.*`` and ``llm.request.type``).
* OpenInference (``openinference.span.kind = LLM``, ``llm.model_name``,
  ``llm.provider``, ``llm.token_count.prompt`` / ``completion`` and
  ``llm.token_count.prompt_details.cache_read`` / ``cache_write``).
* turnledger's own spans, which follow the current GenAI conventions.

Instrumentations also disagree on what "input tokens" means:

* Anthropic's API reports ``input_tokens`` EXCLUDING cache reads and writes.
* OpenAI's ``prompt_tokens`` INCLUDES cached tokens.
* The current OTel GenAI conventions say ``gen_ai.usage.input_tokens`` SHOULD
  include cache read and cache creation tokens; some instrumentations copy the
  provider's raw number instead.

Cache writes have two TTLs, billed apart (5 minutes at 1.25x input, 1 hour at
2x). The anthropic SDK's own spans and turnledger's carry the split beside the
total (``anthropic.usage.cache_creation.ephemeral_5m_input_tokens`` /
``…_1h_input_tokens``); none of the three PyPI instrumentations records it
(openinference-instrumentation-anthropic 3.1 says so in ``_get_token_counts``;
opentelemetry-instrumentation-anthropic 0.62 and -genai-anthropic 1.3b0 read
only the total). A source without the split keeps every write at the 5-minute
rate; ``ledger.terms.split_cache_writes`` says how an inconsistent split is read.

So the convention is decided per source: by instrumentation scope (name and
version) where we know it (``SCOPE_CONVENTIONS``), by attribute family
otherwise. A reported input count smaller than the cache tokens it is supposed
to include can only be an excluding count, which catches instrumentations we
have not met yet.

Captured content arrives as JSON attributes (``gen_ai.input.messages``,
``gen_ai.system_instructions``, ``gen_ai.tool.definitions``, turnledger's
``turnledger.request.body``, OpenInference's ``input.value``), as flattened
attributes (OpenInference ``llm.input_messages.N.…`` and ``llm.tools.N.…``,
OpenLLMetry's legacy ``gen_ai.prompt.N.…`` and ``llm.request.functions.N.…``),
or as span events (``gen_ai.client.inference.operation.details``, and the
older per-message ``gen_ai.{system,user,assistant,tool}.message`` events).
``captured_payload`` rebuilds one request payload from whichever is present;
ingest stores it (redacted) in the content store.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from . import conventions as c
from . import framework_usage, model_names
from .limits import MAX_ATTEMPT, MAX_TOKENS
from .pricing import TokenCounts
from .spans import SpanRecord
from .terms import split_cache_writes

__all__ = [
    "INCOMPLETE_TERMS",
    "INFERRED",
    "REPORTED",
    "SCOPE_CONVENTIONS",
    "UNKNOWN",
    "ModelCall",
    "ScopeConvention",
    "input_includes_cache",
    "is_model_call",
    "model_call",
    "response_ids",
    "tenant_of",
]

# The usage_terms of a copy whose usage is part of the call's: it reports usage (containment joins it,
# ledger.dedup), yet any other copy of the call is charged before it, even one reporting none.
INCOMPLETE_TERMS = -1
MODEL_CALL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion"})
INCLUDES_CACHE = "includes_cache"
EXCLUDES_CACHE = "excludes_cache"
# How a charge's usage was known, term by term (kept on the charge; "unknown" is flagged with its
# largest possible error in USD, never priced as if known):
REPORTED = "reported"  # the source gave it
INFERRED = "inferred"  # derived by a documented rule: cache writes without a TTL split are 5-minute ones
UNKNOWN = "unknown"  # the source gave no cache terms at all for a prompt that may have used the cache


# --- per-instrumentation input-token conventions ---------------------------------------
@dataclass(frozen=True, slots=True)
class ScopeConvention:
    """Whether one instrumentation's input count includes cache tokens, for a range of its versions."""

    scope: str  # instrumentation scope name, as on the span
    includes_cache: bool
    since: tuple[int, ...] = ()  # first version this holds for (inclusive); () = all earlier
    until: tuple[int, ...] = ()  # first version it no longer holds for; () = all later
    source: str = ""  # where this was checked

    def applies(self, scope: str, version: tuple[int, ...] | None) -> bool:
        if scope != self.scope:
            return False
        if version is None:
            return not self.since  # an unknown version only matches an open-ended rule
        return (not self.since or version >= self.since) and (not self.until or version < self.until)


# Checked against each package's code (the usage extraction) and, for the
# current versions, by running it around the anthropic SDK (tests/server).
SCOPE_CONVENTIONS: tuple[ScopeConvention, ...] = (
    ScopeConvention(
        "opentelemetry.instrumentation.genai.anthropic",
        True,
        source="opentelemetry-instrumentation-genai-anthropic 1.x: input = input + cache_creation + cache_read",
    ),
    ScopeConvention(
        "opentelemetry.instrumentation.anthropic",
        True,
        source="OpenLLMetry opentelemetry-instrumentation-anthropic >= 0.33 sums prompt + cache_read + "
        "cache_creation; earlier versions report no cache counts, so the question does not arise",
    ),
    ScopeConvention(
        "openinference.instrumentation.anthropic",
        True,
        source="openinference-instrumentation-anthropic: llm.token_count.prompt = input + cache_creation + "
        "cache_read since cache counts were added (0.1.17); before, no cache counts",
    ),
    ScopeConvention("turnledger.harness", True, source="turnledger's own spans follow the current GenAI conventions"),
    ScopeConvention(
        "com.anthropic.claude_code.events",  # ledger.claude_code.EVENTS_SCOPE: its api_request events
        False,
        source="Claude Code 2.1.197 api_request: input_tokens is the API's usage.input_tokens, beside "
        "cache_read_tokens and cache_creation_tokens",
    ),
    ScopeConvention(
        "pydantic-ai",
        True,
        source="pydantic-ai 1.x/2.x: gen_ai.usage.input_tokens is RequestUsage.input_tokens, cache reads and writes "
        "included (gen_ai.usage.details.input_tokens is Anthropic's raw, excluding count)",
    ),
    ScopeConvention(
        framework_usage.LITELLM_SCOPE,
        True,
        source="LiteLLM integrations/opentelemetry.py: gen_ai.usage.input_tokens = usage.prompt_tokens, cache "
        "included (its raw_gen_ai_request span is read by ledger.framework_usage, excluding)",
    ),
    ScopeConvention(
        "openinference.instrumentation.langchain",
        True,
        source="OpenInference langchain: llm.token_count.prompt = usage_metadata.input_tokens, LangChain's total input",
    ),
    ScopeConvention(
        "opentelemetry.instrumentation.langchain",
        True,
        source="OpenLLMetry langchain 0.62: gen_ai.usage.input_tokens = usage_metadata.input_tokens (total input)",
    ),
)


def _version(text: str) -> tuple[int, ...] | None:
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", text or "")
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def input_includes_cache(scope_name: str, scope_version: str = "") -> bool | None:
    """What ``SCOPE_CONVENTIONS`` says about this instrumentation, or None if it does not know it."""
    return _scope_rule(scope_name, scope_version, SCOPE_CONVENTIONS)


@lru_cache(maxsize=1024)  # one lookup per (scope, version, rule set), not per span
def _scope_rule(scope_name: str, scope_version: str, rules: tuple[ScopeConvention, ...]) -> bool | None:
    version = _version(scope_version)
    for rule in rules:
        if rule.applies(scope_name, version):
            return rule.includes_cache
    return None


# --- attribute families, in order of preference -----------------------------------
_DEPRECATED_PROMPT = ("gen_ai.usage.prompt_tokens", "llm.usage.prompt_tokens")
_DEPRECATED_COMPLETION = ("gen_ai.usage.completion_tokens", "llm.usage.completion_tokens")
_OPENINFERENCE_PROMPT = "llm.token_count.prompt"
_OPENINFERENCE_COMPLETION = "llm.token_count.completion"
_OPENINFERENCE_KIND = "openinference.span.kind"
_CACHE_READ = (
    c.CACHE_READ_INPUT_TOKENS,  # gen_ai.usage.cache_read.input_tokens
    "gen_ai.usage.cache_read_input_tokens",  # deprecated spelling (OpenLLMetry < 0.4x)
    "llm.token_count.prompt_details.cache_read",
    "llm.token_count.prompt_details.cache_input",  # OpenInference: "prompt tokens that were cached"
    # pydantic-ai's details namespace (its usage object's fields and the provider's own names); 1.x
    # sends only these, 2.x the GenAI names above too (pydantic_ai/usage.py: opentelemetry_attributes)
    "gen_ai.usage.details.cache_read_tokens",
    "gen_ai.usage.details.cache_read_input_tokens",
)
_CACHE_WRITE = (
    c.CACHE_CREATION_INPUT_TOKENS,  # gen_ai.usage.cache_creation.input_tokens
    "gen_ai.usage.cache_write.input_tokens",  # newer spelling (opentelemetry-util-genai)
    "gen_ai.usage.cache_creation_input_tokens",  # deprecated spelling
    "llm.token_count.prompt_details.cache_write",
    "gen_ai.usage.details.cache_write_tokens",  # pydantic-ai, as for reads above
    "gen_ai.usage.details.cache_creation_input_tokens",
)
# The TTL split of the writes above (the SDK's names; our spans use them too). The total keeps
# meaning every write: an including source added the total, not the split, to its input count.
# pydantic-ai keeps Anthropic's split only in its details namespace.
_CACHE_WRITE_1H = (c.CACHE_CREATION_1H_INPUT_TOKENS, "gen_ai.usage.details.ephemeral_1h_input_tokens")
_CACHE_WRITE_5M = (c.CACHE_CREATION_5M_INPUT_TOKENS, "gen_ai.usage.details.ephemeral_5m_input_tokens")
_REASONING = (
    c.REASONING_OUTPUT_TOKENS,
    "llm.token_count.completion_details.reasoning",
    "gen_ai.usage.reasoning_tokens",
)
_MODEL_KEYS = (
    c.RESPONSE_MODEL,
    c.REQUEST_MODEL,
    "llm.model_name",
    "llm.response.model_name",
    "llm.request.model_name",
    "llm.response.model",
    "llm.request.model",
)
_PROVIDER_KEYS = (c.PROVIDER_NAME, "gen_ai.system", "llm.provider", "llm.system", "llm.vendor")
_FINISH_KEYS = (c.FINISH_REASONS, "llm.finish_reason", "gen_ai.completion.0.finish_reason", "llm.response.stop_reason")
# Every family's name for the input count, and for the output count.
_TOKEN_KEYS = (c.INPUT_TOKENS, *_DEPRECATED_PROMPT, _OPENINFERENCE_PROMPT)
_OUTPUT_KEYS = (c.OUTPUT_TOKENS, *_DEPRECATED_COMPLETION, _OPENINFERENCE_COMPLETION)
# One-key families, as the tuples _count reads.
_INPUT, _OUTPUT = (c.INPUT_TOKENS,), (c.OUTPUT_TOKENS,)
_OPENINFERENCE_PROMPT_KEYS, _OPENINFERENCE_COMPLETION_KEYS = (_OPENINFERENCE_PROMPT,), (_OPENINFERENCE_COMPLETION,)
_LEGACY_REQUEST_TYPE = "llm.request.type"  # OpenLLMetry before gen_ai.operation.name

_TENANT_KEYS = (c.TENANT, "tenant.id", "tenant", "enduser.tenant", "session.tenant")


@dataclass(slots=True)  # not frozen: built once per model-call span at ingest (read-only)
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
    # Why the usage cannot be taken as reported ("" when it can): the unusable counts
    # are 0 and the charge is flagged invalid_usage, never a silent $0.
    invalid_usage: str = ""
    # How many usage terms the span reports (input, output, cache read, cache write,
    # reasoning, the cache-write TTL split): which copy of a billed call is charged.
    usage_terms: int = 0
    # Why the usage is a part of the call's ("" when whole): charged as sent, flagged
    # incomplete_usage, and never read as a cache break (ledger.cache_diagnosis).
    incomplete_usage: str = ""
    # REPORTED, INFERRED or UNKNOWN: how the input's split into uncached, cache read and cache write
    # tokens was known ("" for a call with no input), and how the output count was.
    cache_split: str = ""
    output_count: str = REPORTED


def _first(attrs: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for k in keys:
        v = attrs.get(k)
        if v not in (None, ""):
            return v
    return None


def _int(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError, OverflowError):  # OverflowError: int(inf)
        return 0


def _attempt(value: Any) -> int:
    """The attempt number; unreadable or outside [1, MAX_ATTEMPT] reads as the first (it is not usage)."""
    n = _int(value)
    return n if 1 <= n <= MAX_ATTEMPT else 1


# Who else says a call was retried: the HTTP semantic conventions' resend count on the anthropic and
# openai SDKs' own spans (1 = sent twice), and Claude Code's 1-based ``attempt``.
_RESEND_COUNT = "http.request.resend_count"
_CLAUDE_CODE_ATTEMPT = "attempt"


def _attempt_of(a: Mapping[str, Any]) -> tuple[int, str]:
    """The call's attempt number and, for a retry no harness explained, its cause."""
    if c.ATTEMPT in a:
        return _attempt(a.get(c.ATTEMPT)), str(a.get(c.RETRY_CAUSE) or "")
    resends = _int(a.get(_RESEND_COUNT))
    if resends >= 1:
        return _attempt(resends + 1), "resent by the HTTP client (http.request.resend_count)"
    attempt = _attempt(a.get(_CLAUDE_CODE_ATTEMPT))
    return attempt, ("retried by the agent (attempt)" if attempt > 1 else "")


def _count(attrs: Mapping[str, Any], keys: tuple[str, ...], bad: list[str]) -> int | None:
    """The first token count present under ``keys``: an integer in [0, MAX_TOKENS]; None if none is present.

    Anything else (negative, fractional, NaN, not a number, past the ceiling)
    is not guessed: it counts 0 and its key is added to ``bad``, which flags the
    charge ``invalid_usage``. The hot path is one type check and one range check.
    """
    for key in keys:
        value = attrs.get(key)
        if value is None or value == "":
            continue
        if type(value) is int and 0 <= value <= MAX_TOKENS:
            return value
        n = _loose_count(value)
        if n is None:
            bad.append(f"{key} {str(value)[:40]!r} is not a token count (an integer in [0, {MAX_TOKENS}])")
            return 0
        return n
    return None


def _loose_count(value: Any) -> int | None:
    """A count sent as an integral float or as decimal text ("120"), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        n = int(value) if value.is_integer() else None  # NaN and inf are not integers
    elif isinstance(value, (int, str)):
        try:
            n = int(value)
        except ValueError:
            return None
    else:
        return None
    return n if n is not None and 0 <= n <= MAX_TOKENS else None


def tenant_of(span: SpanRecord) -> str | None:
    for source in (span.attributes, span.resource):
        v = _first(source, _TENANT_KEYS)
        if v is not None:
            return str(v)
    return None


def is_model_call(span: SpanRecord) -> bool:
    attrs = span.attributes
    if "count_tokens" in span.name.lower() or "count_tokens" in str(attrs.get(c.OPERATION_NAME, "")).lower():
        return False  # the token-counting endpoint is free, whatever usage-like count its span reports
    if framework_usage.stamped_by_litellm(span):
        return False  # LiteLLM's attributes of its latest call on an application's span: its raw spans are the calls
    op = attrs.get(c.OPERATION_NAME)
    if op is not None:
        return op in MODEL_CALL_OPERATIONS
    kind = attrs.get(_OPENINFERENCE_KIND)
    if kind is not None:
        return str(kind).upper() == "LLM"
    request_type = attrs.get(_LEGACY_REQUEST_TYPE)
    if request_type is not None:
        return str(request_type).lower() in MODEL_CALL_OPERATIONS
    if framework_usage.is_framework_call(span):
        return True
    return any(k in attrs for k in _TOKEN_KEYS) and bool(_first(attrs, _MODEL_KEYS))


def _tokens(
    span: SpanRecord, a: Mapping[str, Any], shape_includes: bool | None, bad: list[str]
) -> tuple[TokenCounts, str, int, str, str]:
    """The span's tokens by term (read from ``a``: its attributes, with its framework's own usage
    added), how its input count was read, how many usage terms it reports, and how its cache split
    and output count were known (``REPORTED``/``INFERRED``/``UNKNOWN``)."""
    read, write, reasoning = _count(a, _CACHE_READ, bad), _count(a, _CACHE_WRITE, bad), _count(a, _REASONING, bad)
    known = input_includes_cache(span.scope_name, span.scope_version) if shape_includes is None else shape_includes
    if c.INPUT_TOKENS in a:
        reported, out = _count(a, _INPUT, bad), _count(a, _OUTPUT, bad)
        includes = True if known is None else known  # the current conventions say: included
    elif _first(a, _DEPRECATED_PROMPT) is not None:
        reported, out = _count(a, _DEPRECATED_PROMPT, bad), _count(a, _DEPRECATED_COMPLETION, bad)
        # The old names mirrored OpenAI's prompt_tokens (cache included), except
        # where an instrumentation copied Anthropic's raw number.
        includes = True if known is None else known
    else:
        reported, out = _count(a, _OPENINFERENCE_PROMPT_KEYS, bad), _count(a, _OPENINFERENCE_COMPLETION_KEYS, bad)
        includes = True if known is None else known  # OpenInference's prompt count is the total prompt
    one_hour, five_minute = _first(a, _CACHE_WRITE_1H), _first(a, _CACHE_WRITE_5M)
    usage_terms = _reported_terms(a, read, write, reasoning, reported, out, one_hour, five_minute)
    counts_out = out
    cache_read, cache_write, reported_in, out = read or 0, write or 0, reported or 0, out or 0
    if includes and reported_in < cache_read + cache_write:
        includes = False  # cannot include more than it counts: an excluding source
    uncached = reported_in - cache_read - cache_write if includes else reported_in
    ttl_split = one_hour is not None or five_minute is not None
    if not ttl_split:  # no split reported: every write at the 5-minute rate
        write_5m, write_1h = cache_write, 0
    else:
        write_5m, write_1h = split_cache_writes(cache_write, _int(one_hour), _int(five_minute))
    by_term = {
        "uncached_input": uncached, "output": out, "cache_write": write_5m, "cache_read": cache_read,
        "cache_write_1h": write_1h,
    }  # fmt: skip
    if not reported_in and read is None and write is None:
        cache_split = ""  # no prompt counted: nothing to split
    elif read is None and write is None:
        cache_split = UNKNOWN
    else:
        cache_split = INFERRED if cache_write and not ttl_split else REPORTED
    told_output = counts_out is not None or _first(a, _OUTPUT_KEYS) is not None
    output_count = REPORTED if told_output or not reported_in else UNKNOWN
    convention = INCLUDES_CACHE if includes else EXCLUDES_CACHE
    return TokenCounts.of(by_term, reasoning or 0), convention, usage_terms, cache_split, output_count


def _reported_terms(a: Mapping[str, Any], *counts: Any) -> int:
    """How many usage terms a span reports, from the counts ``_tokens`` read (None: not reported).

    Input and output were read from one attribute family only; a span that gives
    them under another family's name still reports them (probed only then).
    """
    read, write, reasoning, reported, out, one_hour, five_minute = counts
    n = (read is not None) + (write is not None) + (reasoning is not None)
    n += reported is not None or _first(a, _TOKEN_KEYS) is not None
    n += out is not None or _first(a, _OUTPUT_KEYS) is not None
    return n + (one_hour is not None or five_minute is not None)


def model_call(span: SpanRecord) -> ModelCall | None:
    """The normalized model call a span records, or None when it is not one."""
    if not is_model_call(span):
        return None
    a = span.attributes
    shape = framework_usage.overlay(span)
    if shape is not None:
        a = {**a, **shape[0]}
    bad: list[str] = []
    tokens, convention, usage_terms, cache_split, output_count = _tokens(
        span, a, None if shape is None else shape[1], bad
    )
    if not usage_terms and not bad and span.status_code != "ERROR" and not any(response_ids(span)):
        # Nothing was billed that the span can show: no usage and no provider response id (token
        # counting, prompt preparation, a framework's wrapper around the call). A failed attempt
        # (ERROR) stays: it is an attempt of a call, counted in the error figures.
        return None
    incomplete = "" if bad else _incomplete(tokens)  # an unreadable count is flagged as invalid already
    if incomplete:
        usage_terms = INCOMPLETE_TERMS
    finish = _first(a, _FINISH_KEYS) or ""
    if isinstance(finish, (list, tuple)):
        finish = ",".join(str(f) for f in finish)
    attempt, retry_cause = _attempt_of(a)
    provider, model = model_names.resolve(
        str(_first(a, _PROVIDER_KEYS) or _first(span.resource, _PROVIDER_KEYS) or "").lower(),
        str(_first(a, _MODEL_KEYS) or ""),
    )
    return ModelCall(
        provider=provider,
        model=model,
        tokens=tokens,
        convention=convention,
        call_id=str(a.get(c.CALL_ID) or span.span_id),
        attempt=attempt,
        retry_cause=retry_cause,
        call_site=str(a.get(c.CALL_SITE) or "agent"),
        finish_reason=str(finish),
        invalid_usage="; ".join(bad),
        usage_terms=usage_terms,
        incomplete_usage=incomplete,
        cache_split=cache_split,
        output_count=output_count,
    )


def _incomplete(tokens: TokenCounts) -> str:
    """Why usage as reported cannot be a whole call's ("" when it can): an answer needs a prompt.

    A streamed call whose instrumentation kept only the final ``message_delta``
    (LangChain's classic shape) reports output and no input at all; charging it
    as sent would bill the output alone, and read as a cache that stopped working.
    """
    t = tokens.by_term
    if t["output"] > 0 and t["uncached_input"] + t["cache_read"] + t["cache_write"] + t["cache_write_1h"] == 0:
        return f"output {t['output']} with no input tokens: the usage of part of the call (a stream's last event)"
    return ""


# --- which billed call a model-call span reports (ledger.billed) ---------------------------------
_REQUEST_ID = "anthropic.request.id"  # the anthropic SDK's spans: the API's request-id header
# Claude Code's name for it; read on its spans only: elsewhere a "request_id" may be the
# application's (one HTTP request making several calls), which must not join them.
_CLAUDE_CODE_REQUEST_ID = "request_id"


def response_ids(span: SpanRecord) -> tuple[str, str]:
    """The provider's (response id, request id) a model-call span reports; "" where it has none.

    OpenInference records no id attribute: the response id is inside the JSON it
    keeps in ``output.value`` (``ledger.framework_usage.nested_response_id``), as
    on LiteLLM's raw-request span.
    """
    a = span.attributes
    response = a.get(c.RESPONSE_ID)
    if not response or not isinstance(response, str):
        response = framework_usage.nested_response_id(span)
    request = a.get(_REQUEST_ID)
    if request is None and span.name == framework_usage.CLAUDE_CODE_REQUEST_SPAN:
        request = a.get(_CLAUDE_CODE_REQUEST_ID)
    return response, (request if isinstance(request, str) else "")
