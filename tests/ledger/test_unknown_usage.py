"""What a source did not say is flagged with its largest possible error, never priced as if known (#43).

The OpenAI Agents SDK through LiteLLM and OpenInference reports a prompt count that includes the
cache and no split (+85% on the issue's run, unflagged): such a charge is priced as reported, as
uncached input, flagged ``unknown_usage``, and carries the most that price can be off. The expected
errors are genai-prices' own prices of the same tokens as other terms, never the ledger's pricing.
"""

from __future__ import annotations

from decimal import Decimal

from genai_prices import extract_usage
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ledger import conventions as c
from ledger import queries as q
from ledger.ingest import prepare, write
from ledger.normalize import INFERRED, REPORTED, UNKNOWN
from ledger.report import build_report, format_report
from ledger.spans import SpanRecord
from ledger.store import open_ledger

MODEL = "claude-sonnet-4-6"
TRACE = "b" * 32
T0 = 1_790_000_000_000_000_000
S = 10**9


def truth(uncached: int = 0, read: int = 0, write_5m: int = 0, write_1h: int = 0, output: int = 0) -> Decimal:
    """genai-prices' price of an Anthropic response with this usage."""
    usage = {
        "input_tokens": uncached, "output_tokens": output, "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write_5m + write_1h,
        "cache_creation": {"ephemeral_5m_input_tokens": write_5m, "ephemeral_1h_input_tokens": write_1h},
    }  # fmt: skip
    return Decimal(
        str(extract_usage({"model": MODEL, "usage": usage}, provider_id="anthropic").calc_price().total_price)
    )


def openinference_call(n: int, prompt: int, completion: int | None = 100, **extra: object) -> SpanRecord:
    """An LLM span as OpenInference writes it around LiteLLM: the prompt count includes the cache."""
    attrs: dict[str, object] = {"openinference.span.kind": "LLM", "llm.provider": "anthropic",
                                "llm.model_name": f"anthropic/{MODEL}", "llm.token_count.prompt": prompt, **extra}  # fmt: skip
    if completion is not None:
        attrs["llm.token_count.completion"] = completion
    return SpanRecord(TRACE, f"{n:016x}", "litellm.completion", T0 + n * S, T0 + n * S + S // 2, "f" * 16,
                      attributes=attrs, scope_name="openinference.instrumentation.openai_agents")  # fmt: skip


def root() -> SpanRecord:
    return SpanRecord(
        TRACE, "f" * 16, "invoke_agent demo", T0, T0 + 60 * S, attributes={c.OPERATION_NAME: "invoke_agent"}
    )


def charges(spans: list[SpanRecord]) -> list[dict[str, object]]:
    con = open_ledger(":memory:")
    write(con, [prepare([root(), *spans])])
    cur = con.execute(
        "SELECT span_id, cache_split, output_count, unknown_usage, usage_error_usd, uncached_input_tokens, "
        "usd_input + usd_output + usd_cache_write + usd_cache_read + usd_cache_write_1h AS usd FROM charges ORDER BY span_id"
    )
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def test_a_prompt_count_without_its_split_is_flagged_with_the_most_its_price_can_be_off():
    (charge,) = charges([openinference_call(1, 10_000)])
    assert (charge["cache_split"], charge["unknown_usage"]) == (UNKNOWN, True)
    assert charge["usd"] == truth(uncached=10_000, output=100)  # priced as reported: all uncached
    charged_input = truth(uncached=10_000)
    alternatives = [truth(read=10_000), truth(write_5m=10_000), truth(write_1h=10_000)]
    assert charge["usage_error_usd"] == max(abs(a - charged_input) for a in alternatives) == Decimal("0.03")


def test_a_split_the_source_gave_is_reported_and_writes_without_a_ttl_are_inferred_not_flagged():
    reported, inferred = charges(
        [
            openinference_call(1, 10_000, **{"llm.token_count.prompt_details.cache_read": 0}),
            openinference_call(2, 10_000, **{"llm.token_count.prompt_details.cache_write": 6_000}),
        ]
    )
    assert (reported["cache_split"], reported["unknown_usage"], reported["usage_error_usd"]) == (REPORTED, False, None)
    assert (inferred["cache_split"], inferred["unknown_usage"]) == (INFERRED, False)
    assert inferred["usd"] == truth(uncached=4_000, write_5m=6_000, output=100)


def test_a_missing_output_count_is_flagged_unbounded():
    (charge,) = charges(
        [openinference_call(1, 500, completion=None, **{"llm.token_count.prompt_details.cache_read": 0})]
    )
    assert (charge["output_count"], charge["unknown_usage"], charge["usage_error_usd"]) == (UNKNOWN, True, None)


def test_the_run_the_report_and_its_text_say_so():
    con = open_ledger(":memory:")
    write(con, [prepare([root(), openinference_call(1, 10_000), openinference_call(2, 20_000)])])
    (run,) = con.execute("SELECT unknown_usage_calls FROM runs").fetchall()
    assert run == (2,)
    report = build_report(con, q.NO_FILTERS)
    assert report["unknown_usage_calls"] == 2
    (row,) = report["unknown_usage"]
    assert (row["calls"], row["unknown_cache_split"], Decimal(str(row["max_error_usd"]))) == (2, 2, Decimal("0.09"))
    assert "UNKNOWN USAGE" in format_report(report) and "error up to $0.09" in format_report(report)


@settings(max_examples=60, deadline=None)
@example(prompt=1_000, parts=[0, 0, 1, 0])  # all 1-hour writes: the dearest truth
@example(prompt=1_000, parts=[1, 0, 0, 0])  # all reads: the cheapest
@given(prompt=st.integers(1, 2_000_000), parts=st.lists(st.integers(0, 100), min_size=4, max_size=4))
def test_any_true_split_of_the_prompt_costs_within_the_flagged_error(prompt, parts):
    """Whatever the prompt really was (any mix of uncached, cache reads and writes), its true price is
    within the charge's usage_error_usd of what was charged."""
    (charge,) = charges([openinference_call(1, prompt, completion=0)])
    total = sum(parts) or 1
    read, w5, w1h = (prompt * p // total for p in parts[:3])
    uncached = prompt - read - w5 - w1h
    true = truth(uncached=uncached, read=read, write_5m=w5, write_1h=w1h)
    assert abs(true - charge["usd"]) <= charge["usage_error_usd"], (prompt, parts)


def test_a_call_without_its_cache_split_is_not_judged_a_cache_break():
    """Reads and writes unknown: read as zero, a working cache would look broken on every turn."""
    from ledger.cache_diagnosis import SPLIT_UNKNOWN, check_cache

    con = open_ledger(":memory:")
    write(con, [prepare([root(), openinference_call(1, 10_000), openinference_call(2, 10_400)])])
    turns = q.records(con, q.run_turns(TRACE))
    assert [check.status for check in check_cache(turns)] == [SPLIT_UNKNOWN, SPLIT_UNKNOWN]
