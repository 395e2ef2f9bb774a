"""A span is a billed call only if it shows something was billed (#43 item 1).

Frameworks wrap a model call in spans of their own kind LLM, and some trace the free token-counting
endpoint (``messages.count_tokens``) like a call. Such spans carry neither usage nor the provider's
response id: charging them adds $0 calls that inflate turns and call counts (CrewAI's 6 extra calls).
A failed attempt (ERROR status) is still an attempt of a call: the error figures count it.
"""

from __future__ import annotations

import string

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.ingest import ingest
from ledger.spans import SpanRecord
from ledger.store import open_ledger

T0 = 1_790_000_000_000_000_000
MODEL = "claude-sonnet-4-6"
# The ways a span says "I am a model call" without saying what was billed.
_CALL_MARKERS = (
    {"gen_ai.operation.name": "chat"},
    {"gen_ai.operation.name": "text_completion"},
    {"openinference.span.kind": "LLM"},
    {"llm.request.type": "chat"},
)
_MODEL_KEYS = ("gen_ai.request.model", "gen_ai.response.model", "llm.model_name")
_OTHER = st.dictionaries(  # attributes that are neither usage nor a response id
    st.sampled_from(["gen_ai.request.max_tokens", "llm.invocation_parameters", "http.response.status_code",
                     "gen_ai.request.temperature", "input.value", "gen_ai.provider.name", "llm.system"]),
    st.one_of(st.integers(0, 10_000), st.text(string.ascii_letters + " {}:\"", max_size=30)),
    max_size=4,
)  # fmt: skip


def _charges(spans: list[SpanRecord]) -> int:
    con = open_ledger(":memory:")
    ingest(con, spans)
    return int(con.execute("SELECT count(*) FROM charges").fetchone()[0])


def _span(attrs: dict[str, object], *, status: str = "UNSET", name: str = f"chat {MODEL}") -> SpanRecord:
    return SpanRecord("a" * 32, "b" * 16, name, T0, T0 + 10**9, "", "CLIENT", status_code=status, attributes=attrs)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(_CALL_MARKERS), st.sampled_from(_MODEL_KEYS), _OTHER, st.sampled_from(["UNSET", "OK"]))
def test_a_span_without_usage_or_response_id_is_never_a_charge(
    marker: dict[str, object], model_key: str, other: dict[str, object], status: str
) -> None:
    assert _charges([_span({**other, **marker, model_key: MODEL}, status=status)]) == 0


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(_CALL_MARKERS), _OTHER)
def test_the_same_span_with_a_response_id_or_usage_or_failed_is_one(
    marker: dict[str, object], other: dict[str, object]
) -> None:
    base = {**other, **marker, "gen_ai.request.model": MODEL}
    assert _charges([_span({**base, "gen_ai.response.id": "msg_01abc"})]) == 1
    assert _charges([_span({**base, "gen_ai.usage.output_tokens": 5})]) == 1
    assert _charges([_span(base, status="ERROR")]) == 1  # a failed attempt: the error figures count it


def test_token_counting_is_free_whatever_it_reports() -> None:
    counted = {"gen_ai.operation.name": "chat", "gen_ai.request.model": MODEL, "gen_ai.usage.input_tokens": 1_234}
    assert _charges([_span(counted, name="anthropic.messages.count_tokens")]) == 0
    assert _charges([_span({**counted, "gen_ai.operation.name": "count_tokens"}, name="call")]) == 0
    assert _charges([_span(counted)]) == 1
