"""Why a run stopped, from what any agent reports: the ``runs.stop_cause`` rule.

Our harness states its stop cause (``turnledger.stop_cause`` on the root span). Other agents say
it in their own words, so the first signal found decides, in this order:

1. ``turnledger.stop_cause`` on the root span, as given;
2. ``agent.stop_reason`` on the root span (seed 004's generic agent), by :data:`STOP_REASONS`;
3. the root span's ``error.type``, else the ``exception.type`` of its exception event (the last
   dotted part: ``langgraph.errors.GraphRecursionError``), by :data:`ERROR_STOPS`;
4. the root span's ERROR status: ``error``;
5. the finish reason of the run's last model call, by :data:`FINISH_STOPS`: a run that ends on
   ``end_turn`` completed, on ``max_tokens`` was cut off, on ``refusal`` was refused;
6. anything else: ``unknown`` (a root with no finish reason at all, a last call that asked for a
   tool nobody ran), never ``error``. A trace without its root span yet is in progress (NULL).

A step-cap stop counts as a step-cap halt whoever made it (``runs.step_cap_halts``).
"""

from __future__ import annotations

from . import conventions as c

__all__ = ["ERROR_STOPS", "FINISH_STOPS", "ROOT_STOP", "STOP_REASONS", "UNKNOWN", "stop_cause_sql", "stop_signals"]

UNKNOWN = "unknown"

# error.type / exception.type -> stop cause, per framework.
ERROR_STOPS = {
    "GraphRecursionError": "max_steps",  # LangGraph: the graph's recursion_limit (its step cap)
    "MaxTurnsExceeded": "max_steps",  # OpenAI Agents SDK: Runner's max_turns
    "UsageLimitExceeded": "budget_exceeded",  # pydantic-ai UsageLimits on tokens (request_limit: below)
    "MaxTokensReachedException": "max_tokens",  # Strands: a reply cut off at max_tokens
    "step_cap_exhausted": "max_steps",  # seed 004's generic agent
    "error_max_turns": "max_steps",  # Claude Code's result subtype for --max-turns
    "BudgetExceeded": "budget_exceeded",  # our harness's budget guard, when it raises
}
# pydantic-ai raises one exception for every usage limit; its request and tool-call limits are step caps.
STEP_LIMIT_MESSAGES = ("request_limit", "tool_calls_limit")

STOP_REASONS = {  # agent.stop_reason -> stop cause
    "step_cap": "max_steps",
    "max_steps": "max_steps",
    "answer": "completed",
    "completed": "completed",
    "budget": "budget_exceeded",
    "loop": "loop_detected",
}

FINISH_STOPS = {  # the last model call's finish reason (Anthropic, OpenAI, Gemini, Bedrock names)
    "end_turn": "completed",
    "stop": "completed",
    "stop_sequence": "completed",
    "STOP": "completed",
    "max_tokens": "max_tokens",
    "length": "max_tokens",
    "MAX_TOKENS": "max_tokens",
    "refusal": "refusal",
    "content_filter": "refusal",
    "SAFETY": "refusal",
}


def _case(value: str, mapping: dict[str, str]) -> str:
    whens = " ".join(f"WHEN '{k}' THEN '{v}'" for k, v in mapping.items())
    return f"(CASE {value} {whens} END)"


def stop_signals(alias: str) -> dict[str, str]:
    """What rules 1–4 read of a run's root span, each an SQL expression over the span row ``alias``:
    the runs rebuild selects them once per run, so each JSON path is read once (the rule over them,
    ``ROOT_STOP``, reads columns)."""

    def attr(key: str) -> str:
        return f"json_extract_string({alias}.attributes, '$.\"{key}\"')"

    def first_event(key: str) -> str:  # the first event that has it (an exception is not always event 0)
        return (
            f"list_filter(json_extract_string({alias}.events, '$[*].attributes.\"{key}\"'), lambda x: x IS NOT NULL)[1]"
        )

    message = f"coalesce({first_event('exception.message')}, {alias}.status_message, '')"
    error_type = f"regexp_extract(coalesce({attr(c.ERROR_TYPE)}, {first_event('exception.type')}), '[^.]+$')"
    return {
        "stop_stated": attr(c.STOP_CAUSE),
        "stop_by_agent": _case(attr(c.AGENT_STOP_REASON), STOP_REASONS),
        "stop_by_error": _case(error_type, ERROR_STOPS),
        "stop_step_limit": " OR ".join(f"contains({message}, '{m}')" for m in STEP_LIMIT_MESSAGES),
    }


# Rules 1–4 over ``stop_signals``' columns and the root's status: NULL when the root says nothing.
ROOT_STOP = """CASE
        WHEN stop_stated IS NOT NULL THEN stop_stated
        WHEN stop_by_agent IS NOT NULL THEN stop_by_agent
        WHEN stop_by_error = 'budget_exceeded' AND stop_step_limit THEN 'max_steps'
        WHEN stop_by_error IS NOT NULL THEN stop_by_error
        WHEN status_code = 'ERROR' THEN 'error'
    END"""


def stop_cause_sql(root: str, root_stop: str, last_finish: str) -> str:
    """The stop cause of a run: NULL without its ``root`` span yet (an SQL condition that it is
    there), else the root's ``root_stop`` (``ROOT_STOP``), else rules 5 and 6 over ``last_finish``,
    the finish reason of the run's last model call (the first of several, comma-separated)."""
    finish = f"split_part({last_finish}, ',', 1)"
    return f"CASE WHEN {root} THEN coalesce({root_stop}, {_case(finish, FINISH_STOPS)}, '{UNKNOWN}') END"
