"""Span attribute and event names turnledger reads and writes.

OpenTelemetry GenAI names come from the semantic-conventions package so that a
rename upstream is one dependency bump, not a grep. Names that the conventions do
not cover (tenant, call-site label, attempt number, guard events, the captured
request) live under the ``turnledger.`` prefix and are defined only here.

Model-call convention: every *attempt* of a model call is its own ``chat {model}``
span. Attempts of one logical call share ``turnledger.call.id``; the attempt
number and the cause of the retry that led to it are attributes. One span, one
charge row: that is what makes retry charges visible and ingest idempotent.
"""

from __future__ import annotations

from opentelemetry.semconv._incubating.attributes import deployment_attributes as _deployment
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as _gen_ai
from opentelemetry.semconv.attributes import error_attributes as _error

__all__ = [
    "AGENT_NAME",
    "AGENT_STOP_REASON",
    "AGENT_VERSION",
    "ATTEMPT",
    "CACHE_CREATION_1H_INPUT_TOKENS",
    "CACHE_CREATION_5M_INPUT_TOKENS",
    "CACHE_CREATION_INPUT_TOKENS",
    "CACHE_READ_INPUT_TOKENS",
    "CALL_ID",
    "CALL_SITE",
    "CAPTURE_MODE",
    "CONVERSATION_ID",
    "COST_USD",
    "DEPLOYMENT_ENVIRONMENT",
    "DEPLOYMENT_ENVIRONMENT_NAME",
    "ERROR_TYPE",
    "EVENT_AUTHORIZATION_APPROVED",
    "EVENT_AUTHORIZATION_DENIED",
    "EVENT_BUDGET_STOP",
    "EVENT_BUDGET_WARN",
    "EVENT_HANDOFF",
    "EVENT_KEY_ACTION",
    "EVENT_KEY_CAUSE",
    "EVENT_KEY_SHAPE",
    "EVENT_KEY_TOOL",
    "EVENT_LOOP_TRIP",
    "EVENT_OFFLOAD",
    "EVENT_RETRY",
    "FINISH_REASONS",
    "GUARD_EVENTS",
    "INPUT_MESSAGES",
    "INPUT_TOKENS",
    "OPERATION_NAME",
    "OUTPUT_MESSAGES",
    "OUTPUT_TOKENS",
    "PROMPT_VERSION",
    "PROVIDER_NAME",
    "REASONING_OUTPUT_TOKENS",
    "REQUEST_BODY",
    "REQUEST_MAX_TOKENS",
    "REQUEST_MODEL",
    "RESPONSE_ID",
    "RESPONSE_MODEL",
    "RETRY_CAUSE",
    "SERVICE_NAME",
    "SERVICE_VERSION",
    "STEP",
    "STEPS",
    "STOP_CAUSE",
    "STOP_DETAIL",
    "SYSTEM_INSTRUCTIONS",
    "TENANT",
    "TIME_TO_FIRST_CHUNK",
    "TOOL_CALLS",
    "TOOL_CALL_ARGUMENTS",
    "TOOL_CALL_ID",
    "TOOL_CALL_RESULT",
    "TOOL_DEFINITIONS",
    "TOOL_DENIED",
    "TOOL_NAME",
    "TOOL_OFFLOADED_TO",
    "TOOL_RESULT_LENGTH",
    "TOOL_SCHEMA_VERSION",
    "TOOL_SOFT_FAILURE",
    "TOOL_TYPE",
    "TOTAL_TOKENS",
]

# --- OpenTelemetry GenAI semantic conventions ---------------------------------
OPERATION_NAME = _gen_ai.GEN_AI_OPERATION_NAME
PROVIDER_NAME = _gen_ai.GEN_AI_PROVIDER_NAME
REQUEST_MODEL = _gen_ai.GEN_AI_REQUEST_MODEL
RESPONSE_MODEL = _gen_ai.GEN_AI_RESPONSE_MODEL
INPUT_TOKENS = _gen_ai.GEN_AI_USAGE_INPUT_TOKENS
OUTPUT_TOKENS = _gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS
CACHE_CREATION_INPUT_TOKENS = _gen_ai.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS
CACHE_READ_INPUT_TOKENS = _gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS
REASONING_OUTPUT_TOKENS = _gen_ai.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS
FINISH_REASONS = _gen_ai.GEN_AI_RESPONSE_FINISH_REASONS
CONVERSATION_ID = _gen_ai.GEN_AI_CONVERSATION_ID
AGENT_NAME = _gen_ai.GEN_AI_AGENT_NAME
AGENT_VERSION = _gen_ai.GEN_AI_AGENT_VERSION
TOOL_NAME = _gen_ai.GEN_AI_TOOL_NAME
INPUT_MESSAGES = _gen_ai.GEN_AI_INPUT_MESSAGES
OUTPUT_MESSAGES = _gen_ai.GEN_AI_OUTPUT_MESSAGES  # what the model answered (ours: provider-native blocks)
SYSTEM_INSTRUCTIONS = _gen_ai.GEN_AI_SYSTEM_INSTRUCTIONS
TOOL_DEFINITIONS = _gen_ai.GEN_AI_TOOL_DEFINITIONS
ERROR_TYPE = _error.ERROR_TYPE
TIME_TO_FIRST_CHUNK = _gen_ai.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK  # seconds, on a streamed call's span
# The TTL split of the cache writes above (Anthropic bills 1-hour writes at 2x input, 5-minute
# ones at 1.25x). The GenAI conventions have no name for it (semconv 0.66b2); these are the
# anthropic SDK's own span attributes (anthropic/_tracing.py), which our spans use too.
CACHE_CREATION_5M_INPUT_TOKENS = "anthropic.usage.cache_creation.ephemeral_5m_input_tokens"
CACHE_CREATION_1H_INPUT_TOKENS = "anthropic.usage.cache_creation.ephemeral_1h_input_tokens"
SERVICE_NAME = "service.name"
SERVICE_VERSION = "service.version"

# --- turnledger's own names -----------------------------------------------------
TENANT = "turnledger.tenant"
CALL_SITE = "turnledger.call_site"  # label of the code path that made a model call
CALL_ID = "turnledger.call.id"  # shared by all attempts of one logical call
ATTEMPT = "turnledger.attempt"  # 1-based
RETRY_CAUSE = "turnledger.retry.cause"  # why this attempt exists: "429", "529", "connection"
COST_USD = "turnledger.cost.usd"  # producer's estimate; the ledger re-prices
PROMPT_VERSION = "turnledger.prompt.version"
TOOL_SCHEMA_VERSION = "turnledger.tool_schema.version"
STOP_CAUSE = "turnledger.stop_cause"  # on the root span
STOP_DETAIL = "turnledger.stop_detail"
AGENT_STOP_REASON = "agent.stop_reason"  # a generic agent's own word for why it stopped (seed 004)
STEPS = "turnledger.steps"
TOOL_CALLS = "turnledger.tool_calls"
TOOL_SOFT_FAILURE = "turnledger.tool.soft_failure"  # tool ran and said "not found"
# Exact request payload of one model call, JSON, already redacted by the producer.
# Ingest moves it into the content store and removes it from the span attributes.
REQUEST_BODY = "turnledger.request.body"

# Guard decisions are span events with these names.
EVENT_LOOP_TRIP = "turnledger.loop_detector.trip"  # shape, action, tool
EVENT_BUDGET_WARN = "turnledger.budget.warn"
EVENT_BUDGET_STOP = "turnledger.budget.stop"
EVENT_RETRY = "turnledger.retry"  # cause, wait_s, attempt
EVENT_OFFLOAD = "turnledger.offload"
EVENT_AUTHORIZATION_DENIED = "turnledger.authorization.denied"
EVENT_AUTHORIZATION_APPROVED = "turnledger.authorization.approved"  # a gated (write) call allowed
EVENT_HANDOFF = "turnledger.handoff"
GUARD_EVENTS = frozenset(
    {
        EVENT_LOOP_TRIP,
        EVENT_BUDGET_WARN,
        EVENT_BUDGET_STOP,
        EVENT_RETRY,
        EVENT_OFFLOAD,
        EVENT_AUTHORIZATION_DENIED,
        EVENT_AUTHORIZATION_APPROVED,
        EVENT_HANDOFF,
    }
)

# --- added with collector.harness.telemetry (the harness's spans) --------------------------------
REQUEST_MAX_TOKENS = _gen_ai.GEN_AI_REQUEST_MAX_TOKENS
RESPONSE_ID = _gen_ai.GEN_AI_RESPONSE_ID
TOOL_CALL_ID = _gen_ai.GEN_AI_TOOL_CALL_ID
TOOL_CALL_ARGUMENTS = _gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS  # JSON, redacted and truncated by the producer
TOOL_CALL_RESULT = _gen_ai.GEN_AI_TOOL_CALL_RESULT  # redacted and truncated by the producer
TOOL_TYPE = _gen_ai.GEN_AI_TOOL_TYPE
DEPLOYMENT_ENVIRONMENT_NAME = _deployment.DEPLOYMENT_ENVIRONMENT_NAME  # resource, current name
DEPLOYMENT_ENVIRONMENT = "deployment.environment"  # resource, the older name many backends still read
VARIANT = "turnledger.variant"  # a free experiment label, on the root span or the resource
STEP = "turnledger.step"  # 0-based loop step a model call or tool call belongs to
TOTAL_TOKENS = "turnledger.usage.total_tokens"  # on the root: all four terms of every attempt
TOOL_RESULT_LENGTH = "turnledger.tool.result.length"  # characters before truncation
TOOL_OFFLOADED_TO = "turnledger.tool.offloaded_to"  # artifact path of an offloaded result
TOOL_DENIED = "turnledger.tool.denied"  # stopped by the authorization gate, never ran
CAPTURE_MODE = "turnledger.capture.mode"  # on the root: off, redacted or full
# Keys of guard-event attributes that the ledger lifts into columns.
EVENT_KEY_SHAPE = "shape"  # loop trip: repeat, cycle, stall, step_cap
EVENT_KEY_ACTION = "action"  # loop trip: nudge, halt
EVENT_KEY_TOOL = "tool"
EVENT_KEY_CAUSE = "cause"  # retry: "429", "529", "connection"
