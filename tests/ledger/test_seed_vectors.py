"""The seeds' worked examples, computed through OTLP decode + ingest + queries.

These figures are exact in the seeds; a pricing, normalization or aggregation
bug anywhere on the path moves at least one of them.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from ledger import queries as q


def _trace(ledger, conversation: str) -> str:
    return ledger.execute("SELECT trace_id FROM runs WHERE conversation_id = ?", [conversation]).fetchone()[0]


def test_five_turn_run_per_turn_costs_total_shares_and_hit_rate(ledger, load):
    load("five_turn_run")
    turns = q.records(ledger, q.run_turns(_trace(ledger, "conv-five-turn-run")))
    assert [round(t["usd"], 4) for t in turns] == [
        Decimal("0.0427"), Decimal("0.0149"), Decimal("0.0123"), Decimal("0.0150"), Decimal("0.0147"),
    ]  # fmt: skip
    assert round(turns[-1]["cumulative_usd"], 4) == Decimal("0.0997")

    money = q.records(ledger, q.where_the_money_went())[0]
    assert round(money["total_usd"], 4) == Decimal("0.0997")
    assert round(money["share_output"], 3) == 0.253
    assert round(money["share_cache_write"], 3) == 0.589
    assert round(money["share_cache_read"], 3) == 0.154
    assert round(money["share_uncached_input"], 3) == 0.003
    assert round(money["cache_hit_rate"], 3) == 0.765

    hit = q.records(ledger, q.cache_hit_rate())[0]
    assert hit["verdict"] == "healthy"


def test_healthy_vs_broken_cache_pair(ledger, load):
    load("cache_pair")
    per_run = {
        r["trace_id"]: r["usd_total"] for r in q.records(ledger, q.long_tail()) if r["agent_name"] == "cache-audit"
    }
    healthy = per_run[_trace(ledger, "conv-cache-healthy")]
    broken = per_run[_trace(ledger, "conv-cache-broken")]
    assert round(healthy, 4) == Decimal("0.0584")
    assert round(broken, 4) == Decimal("0.1412")
    assert round(broken / healthy, 2) == Decimal("2.42")
    verdicts = {r["run"]: r["verdict"] for r in q.records(ledger, q.cache_hit_rate(by="run"))}
    assert verdicts[_trace(ledger, "conv-cache-healthy")] == "healthy"
    assert verdicts[_trace(ledger, "conv-cache-broken")] == "broken"


def test_long_tail_a93_is_the_p95_and_tops_the_table(ledger, load):
    load("long_tail")
    rows = q.records(ledger, q.long_tail())
    costs = {r["trace_id"]: (r["usd_total"], r["turns"], r["stop_cause"]) for r in rows}
    a91, a92, a93 = (_trace(ledger, f"conv-{k}") for k in ("a91", "a92", "a93"))
    assert round(costs[a91][0], 2) == Decimal("0.26")
    assert round(costs[a92][0], 2) == Decimal("0.21")
    assert costs[a93] == (Decimal("9.93"), 40, "max_steps")
    assert rows[0]["trace_id"] == a93
    assert round(rows[0]["times_median"]) == 38  # "38x the $0.26 next to it"

    stats = q.records(ledger, q.cost_per_run())[0]
    assert stats["p95_usd"] == Decimal("9.93")
    assert round(stats["median_usd"], 2) == Decimal("0.26")


def test_openai_style_prompt_tokens_include_cached_ones(ledger, load):
    load("openai_style")
    charge = ledger.execute(
        "SELECT uncached_input_tokens, cache_read_tokens, output_tokens, token_convention, "
        "usd_input + usd_output + usd_cache_write + usd_cache_read, price_source FROM charges"
    ).fetchone()
    # prompt_tokens=1000 INCLUDES 800 cached: 200 uncached at $2.5, 800 read at $1.25, 100 out at $10 per MTok.
    assert charge[:4] == (200, 800, 100, "includes_cache")
    assert charge[4] == Decimal("0.0025")
    assert charge[5] == "genai-prices"


def test_budget_example_call_costs_082(ledger, load):
    load("budget_warn")
    terms = ledger.execute("SELECT usd_input, usd_output, usd_cache_write, usd_cache_read FROM charges").fetchone()
    assert terms == (Decimal("0.65"), Decimal("0.025"), Decimal("0.125"), Decimal("0.02"))
    assert ledger.execute("SELECT count(*) FROM guard_events WHERE name = 'turnledger.budget.warn'").fetchone()[0] == 1


@pytest.mark.parametrize(
    ("model", "per_mtok_in", "per_mtok_out"),
    [("claude-opus-5", 5, 25), ("claude-sonnet-5", 3, 15), ("claude-haiku-4-5", 1, 5)],
)
def test_seed_model_prices(model, per_mtok_in, per_mtok_out):
    from ledger.pricing import PriceBook, TokenCounts

    priced = PriceBook.default().price(
        "anthropic",
        model,
        TokenCounts(uncached_input=1_000_000, cache_write=1_000_000, cache_read=1_000_000, output=1_000_000),
    )
    assert priced.usd_input == per_mtok_in
    assert priced.usd_output == per_mtok_out
    assert priced.usd_cache_write == Decimal(per_mtok_in) * Decimal("1.25")
    assert priced.usd_cache_read == Decimal(per_mtok_in) * Decimal("0.10")
