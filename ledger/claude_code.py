"""Claude Code's own telemetry (``CLAUDE_CODE_ENABLE_TELEMETRY=1``): its events, read as spans.

Claude Code sends no model-call spans by default; it sends OTLP **log** records under the
scope ``com.anthropic.claude_code.events``, body ``claude_code.<event>``, with the event's
name in ``event.name``, a per-process ``event.sequence``, ``session.id``, ``prompt.id`` and
the user and organization it runs for (``user.id``, ``user.email``, ``user.account_uuid``,
``organization.id``). Checked against the CLI itself (2.1.197, its ``Jc`` event emitter) and
its documentation (code.claude.com/docs/en/monitoring-usage).

* ``api_request`` (one per billed request) becomes a model-call span ``chat {model}``. Its
  counts are the Anthropic API's: ``input_tokens`` EXCLUDES the cache, beside
  ``cache_read_tokens`` and ``cache_creation_tokens`` (so ``normalize.SCOPE_CONVENTIONS``
  lists the scope as excluding). Its ``request_id`` is the API's request id, kept as
  ``anthropic.request.id`` and, as Claude Code's beta ``claude_code.llm_request`` span does, as
  ``gen_ai.response.id``: the key ``ledger.billed`` joins copies of one call by.
  Its ``cost_usd`` is Claude Code's own estimate: kept as ``turnledger.cost.usd`` beside our
  price for a cross-check, never instead of it.
* ``tool_result`` becomes an ``execute_tool {tool}`` span (a failed one with ERROR status).
* Every other event (``user_prompt``, ``api_error``, ``tool_decision``, …) becomes a plain span
  named by its body, so the run's timeline shows it; none is charged.

A **run** is one prompt's work: the trace of the span the record was emitted in when Claude
Code's beta tracing gives one (``CLAUDE_CODE_ENHANCED_TELEMETRY_BETA=1``), else a trace id
derived from ``session.id`` and ``prompt.id``; the session is the run's conversation id
(``gen_ai.conversation.id``), and ``organization.id`` its tenant unless the resource names one.
Each span id is derived from the record itself (session, sequence, timestamp, name), so an
exporter's retry of the same records stores nothing twice.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from . import conventions as c
from .spans import SpanRecord

if TYPE_CHECKING:
    from .log_events import LogEvent

__all__ = ["AGENT_NAME", "EVENTS_SCOPE", "is_event", "span_of"]

EVENTS_SCOPE = "com.anthropic.claude_code.events"
AGENT_NAME = "claude-code"
_BODY_PREFIX = "claude_code."
_MS = 1_000_000

# Claude Code's attribute names (the CLI's own spelling).
SESSION_ID = "session.id"
PROMPT_ID = "prompt.id"
EVENT_NAME = "event.name"
EVENT_SEQUENCE = "event.sequence"
EVENT_TIMESTAMP = "event.timestamp"
ORGANIZATION_ID = "organization.id"
MODEL = "model"
INPUT_TOKENS = "input_tokens"  # the API's input_tokens: cache reads and writes not included
OUTPUT_TOKENS = "output_tokens"
CACHE_READ_TOKENS = "cache_read_tokens"
CACHE_CREATION_TOKENS = "cache_creation_tokens"
COST_USD = "cost_usd"
DURATION_MS = "duration_ms"
REQUEST_ID = "request_id"
TOOL_NAME = "tool_name"
TOOL_SUCCESS = "success"
_ANTHROPIC_REQUEST_ID = "anthropic.request.id"  # what ledger.billed joins copies of one request by
# A tenant the sender set itself (the resource, OTEL_RESOURCE_ATTRIBUTES) wins over the organization.
_TENANT_KEYS = (c.TENANT, "tenant.id", "tenant")


def is_event(event: LogEvent) -> bool:
    """Is this log record one of Claude Code's events?"""
    if event.scope_name == EVENTS_SCOPE:
        return True
    body = event.body
    return isinstance(body, str) and body.startswith(_BODY_PREFIX) and EVENT_NAME in event.attributes


def _name(event: LogEvent) -> str:
    name = event.attributes.get(EVENT_NAME) or event.event_name
    if not name and isinstance(event.body, str):
        name = event.body.removeprefix(_BODY_PREFIX)
    return str(name or "")


def _hex(n: int, *parts: object) -> str:
    """A stable id from ``parts`` (hex, ``n`` digits, never all zeros in practice)."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:n]


def _ms(value: Any) -> int | None:
    """A duration in ms as Claude Code sends it (a number, or its decimal text), in ns; None if unreadable."""
    try:
        ms = float(value)
    except (TypeError, ValueError):
        return None
    return int(ms * _MS) if 0 <= ms < 10**12 else None


def span_of(event: LogEvent) -> SpanRecord:
    """The span one Claude Code event becomes (see the module docstring)."""
    a = event.attributes
    name = _name(event)
    session, prompt = str(a.get(SESSION_ID) or ""), str(a.get(PROMPT_ID) or "")
    trace_id = event.trace_id or _hex(32, "claude_code.run", session, prompt)
    span_id = _hex(16, "claude_code.event", session, prompt, name, a.get(EVENT_SEQUENCE), a.get(EVENT_TIMESTAMP),
                   event.time_ns, event.observed_ns)  # fmt: skip
    end = event.time_ns or event.observed_ns
    duration = _ms(a.get(DURATION_MS)) or 0
    start = end - duration if duration <= end else end
    attributes: dict[str, Any] = {**a, c.AGENT_NAME: AGENT_NAME}
    if session:
        attributes[c.CONVERSATION_ID] = session
    org = a.get(ORGANIZATION_ID)
    if org and not any(k in a or k in event.resource for k in _TENANT_KEYS):
        attributes[c.TENANT] = org
    status = "UNSET"
    if name == "api_request":
        model = a.get(MODEL)
        span_name = f"chat {model}" if model else "chat"
        attributes.update({c.OPERATION_NAME: "chat", c.PROVIDER_NAME: "anthropic"})
        # Copied as sent: normalize reads (and, if they are no counts, flags) them like any span's.
        for ours, theirs in (
            (c.REQUEST_MODEL, MODEL), (c.INPUT_TOKENS, INPUT_TOKENS), (c.OUTPUT_TOKENS, OUTPUT_TOKENS),
            (c.CACHE_READ_INPUT_TOKENS, CACHE_READ_TOKENS), (c.CACHE_CREATION_INPUT_TOKENS, CACHE_CREATION_TOKENS),
            (c.COST_USD, COST_USD), (_ANTHROPIC_REQUEST_ID, REQUEST_ID),
        ):  # fmt: skip
            if theirs in a:
                attributes[ours] = a[theirs]
        if REQUEST_ID in a and c.RESPONSE_ID not in a:
            # Claude Code's own beta llm_request span reports the call under gen_ai.response.id = request_id:
            # the same key here makes the two copies of one call one billed call (ledger.billed).
            attributes[c.RESPONSE_ID] = a[REQUEST_ID]
        kind = "CLIENT"
    elif name == "tool_result":
        tool = a.get(TOOL_NAME)
        span_name = f"execute_tool {tool}" if tool else "execute_tool"
        attributes[c.OPERATION_NAME] = "execute_tool"
        if tool is not None:
            attributes[c.TOOL_NAME] = tool
        if str(a.get(TOOL_SUCCESS)).lower() == "false":
            status = "ERROR"
        kind = "INTERNAL"
    else:
        span_name = event.body if isinstance(event.body, str) and event.body else f"{_BODY_PREFIX}{name or 'event'}"
        kind = "INTERNAL"
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        name=span_name,
        start_ns=start,
        end_ns=end,
        parent_span_id=event.span_id if event.trace_id else "",
        kind=kind,
        status_code=status,
        attributes=attributes,
        resource=event.resource,
        scope_name=event.scope_name or EVENTS_SCOPE,
        scope_version=event.scope_version,
        problem=event.problem,
    )
