"""Cache writes priced by TTL: 1-hour writes at the price book's 1-hour rate, 5-minute ones at theirs.

Issue #12's worked call on claude-sonnet-4-6 ($3 input, $15 output): 41 uncached input
tokens, 67 output tokens and 6,100 cache-write tokens cost $0.037728 written with a 1-hour
TTL ($6 / MTok) and $0.024003 with a 5-minute one ($3.75 / MTok). Before the 1-hour term
existed every write was priced at the 5-minute rate: the first figure came out as the second.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from genai_prices.types import ModelPrice, Tier, TieredPrices

from ledger import conventions as c
from ledger import pricing, schema, terms
from ledger import queries as q
from ledger.ingest import ingest
from ledger.normalize import EXCLUDES_CACHE, INCLUDES_CACHE, model_call
from ledger.pricing import PriceBook, TokenCounts, load_price_file
from ledger.report import build_report, format_report
from ledger.spans import SpanRecord
from ledger.store import open_ledger
from ledger.terms import split_cache_writes

MODEL = "claude-sonnet-4-6"
WHEN = datetime(2026, 6, 1, tzinfo=UTC)
ONE_HOUR_USD = Decimal("0.037728")
FIVE_MINUTE_USD = Decimal("0.024003")
SDK_SCOPE = "com.anthropic.sdk.python"  # the anthropic 2.x SDK's own spans


def _span(attrs: dict, *, span_id: str = "2" * 16, scope: str = SDK_SCOPE, start_ns: int = 1_780_000_000 * 10**9):
    base = {c.OPERATION_NAME: "chat", c.PROVIDER_NAME: "anthropic", c.REQUEST_MODEL: MODEL}
    return SpanRecord(
        "1" * 32, span_id, f"chat {MODEL}", start_ns, start_ns + 10**9, attributes=base | attrs, scope_name=scope
    )


def _sdk_span(*, split: bool, span_id: str = "2" * 16) -> SpanRecord:
    """The worked call as the SDK's span carries it: input INCLUDES the writes (41 + 6,100),
    the total under ``cache_write``, the TTL split under the SDK's own names."""
    attrs = {
        c.INPUT_TOKENS: 41 + 6_100,
        c.OUTPUT_TOKENS: 67,
        "gen_ai.usage.cache_write.input_tokens": 6_100,
        c.CACHE_READ_INPUT_TOKENS: 0,
    }
    if split:
        attrs[c.CACHE_CREATION_5M_INPUT_TOKENS] = 0
        attrs[c.CACHE_CREATION_1H_INPUT_TOKENS] = 6_100
    return _span(attrs, span_id=span_id)


# --- pricing alone -------------------------------------------------------------------------------
def test_the_worked_call_costs_0_037728_written_for_1_hour_and_0_024003_for_5_minutes():
    book = PriceBook.default()
    one_hour = book.price("anthropic", MODEL, TokenCounts(uncached_input=41, output=67, cache_write_1h=6_100), WHEN)
    five_minutes = book.price("anthropic", MODEL, TokenCounts(uncached_input=41, output=67, cache_write=6_100), WHEN)
    assert (one_hour.total, five_minutes.total) == (ONE_HOUR_USD, FIVE_MINUTE_USD)
    assert one_hour.usd["cache_write_1h"] == Decimal("0.0366") and one_hour.usd["cache_write"] == 0
    assert five_minutes.usd["cache_write"] == Decimal("0.022875") and five_minutes.usd["cache_write_1h"] == 0
    assert one_hour.source == "genai-prices"  # sonnet-4-6 is the database's: $3 / $15, 1-hour writes $6


def test_a_price_file_entry_defaults_the_1_hour_rate_to_2x_input_and_can_set_it_with_dates_and_tiers(tmp_path):
    path = tmp_path / "prices.toml"
    path.write_text(
        """
[[model]]
name = "acme-cache"
effective_from = 2026-01-01
input = "3"
output = "15"

[[model]]
name = "acme-cache"
effective_from = 2026-07-01
input = "3"
output = "15"
cache_write_1h = "5"
[[model.tiers]]
above = 200000
input = "6"
cache_write_1h = "9"
"""
    )
    book = PriceBook(load_price_file(path), use_database=False)
    small = TokenCounts(cache_write_1h=100_000)  # below the tier
    assert book.price(None, "acme-cache", small, WHEN).total == Decimal("0.6")  # 2 x $3 / MTok by default
    assert book.price(None, "acme-cache", small, datetime(2026, 7, 2, tzinfo=UTC)).total == Decimal("0.5")
    big = TokenCounts(uncached_input=150_000, cache_write_1h=100_000)  # 250k input: above the tier
    priced = book.price(None, "acme-cache", big, datetime(2026, 7, 2, tzinfo=UTC))
    assert (priced.usd["uncached_input"], priced.usd["cache_write_1h"]) == (Decimal("0.9"), Decimal("0.9"))
    (row,) = [r for r in book.override_rows() if r["effective_from"] == "2026-07-01"]
    assert row["cache_write_1h_per_mtok"] == Decimal("5")


def test_the_shipped_price_file_gives_its_models_the_1_hour_rate():
    book = PriceBook.default()
    priced = book.price("anthropic", "claude-opus-5", TokenCounts(cache_write_1h=1_000_000), WHEN)
    assert (priced.source, priced.total) == ("override", Decimal("10"))  # $5 input x 2


def test_a_database_entry_without_a_1_hour_price_gets_2x_input_when_it_prices_cache_writes():
    one_hour = terms.term("cache_write_1h")
    cached = ModelPrice(input_mtok=Decimal("3"), output_mtok=Decimal("15"), cache_write_mtok=Decimal("3.75"))
    assert pricing._unit_price(cached, one_hour) == Decimal("6")
    tiered = ModelPrice(
        input_mtok=TieredPrices(base=Decimal("3"), tiers=[Tier(start=200_000, price=Decimal("6"))]),
        cache_write_mtok=Decimal("3.75"),
    )
    assert pricing._unit_price(tiered, one_hour) == TieredPrices(
        base=Decimal("6"), tiers=[Tier(start=200_000, price=Decimal("12"))]
    )
    no_cache = ModelPrice(input_mtok=Decimal("8"), output_mtok=Decimal("24"))  # claude-2: no prompt cache at all
    assert pricing._unit_price(no_cache, one_hour) == Decimal("8")  # as every cache term of such a model


# --- the split as sources report it ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("total", "one_hour", "five_minute", "expected"),
    [
        (6_100, 6_100, 0, (0, 6_100)),
        (6_100, 100, 6_000, (6_000, 100)),
        (6_100, 0, 0, (6_100, 0)),
        (6_100, 100, 0, (6_000, 100)),  # 1-hour count only: the rest of the total is 5-minute
        (100, 6_100, 0, (0, 6_100)),  # the split exceeds the total: trust the split, never negative
        (100, 60, 70, (70, 60)),
        (6_100, 100, 200, (6_000, 100)),  # the split leaves tokens unaccounted for: 5-minute, as unsplit writes
    ],
)
def test_split_cache_writes(total, one_hour, five_minute, expected):
    assert split_cache_writes(total, one_hour, five_minute) == expected


def test_the_sdk_span_with_the_split_is_read_into_the_1_hour_term():
    call = model_call(_sdk_span(split=True))
    assert call is not None and call.convention == INCLUDES_CACHE
    assert call.tokens == TokenCounts(uncached_input=41, output=67, cache_write=0, cache_write_1h=6_100)


def test_a_span_without_the_split_keeps_every_write_at_the_5_minute_rate():
    call = model_call(_sdk_span(split=False))
    assert call is not None
    assert call.tokens == TokenCounts(uncached_input=41, output=67, cache_write=6_100, cache_write_1h=0)
    # an instrumentation's span (OpenInference: no TTL split) the same way
    openinference = {
        "openinference.span.kind": "LLM",
        "llm.model_name": MODEL,
        "llm.provider": "anthropic",
        "llm.token_count.prompt": 41 + 6_100,
        "llm.token_count.completion": 67,
        "llm.token_count.prompt_details.cache_write": 6_100,
    }
    span = SpanRecord("1" * 32, "3" * 16, "Messages", 1, 2, attributes=openinference,
                      scope_name="openinference.instrumentation.anthropic")  # fmt: skip
    call = model_call(span)
    assert call is not None
    assert call.tokens == TokenCounts(uncached_input=41, output=67, cache_write=6_100)


def test_an_excluding_source_with_a_split_larger_than_its_total_trusts_the_split():
    attrs = {
        c.INPUT_TOKENS: 41,
        c.OUTPUT_TOKENS: 67,
        c.CACHE_CREATION_INPUT_TOKENS: 100,  # inconsistent: less than the split below
        c.CACHE_CREATION_1H_INPUT_TOKENS: 6_100,
    }
    call = model_call(_span(attrs))
    assert call is not None and call.convention == EXCLUDES_CACHE
    assert call.tokens == TokenCounts(uncached_input=41, output=67, cache_write=0, cache_write_1h=6_100)


# --- stored, summed, reported ------------------------------------------------------------------------
def test_the_sdk_span_is_charged_0_037728_in_the_ledger_and_0_024003_without_the_split(ledger):
    ingest(ledger, [_sdk_span(split=True, span_id="a" * 16), _sdk_span(split=False, span_id="b" * 16)])
    rows = ledger.execute(
        f"""SELECT span_id, cache_write_tokens, cache_write_1h_tokens, usd_cache_write_1h, {terms.usd_sum()}
            FROM charges ORDER BY span_id"""
    ).fetchall()
    assert rows == [
        ("a" * 16, 0, 6_100, Decimal("0.0366"), ONE_HOUR_USD),
        ("b" * 16, 6_100, 0, Decimal(0), FIVE_MINUTE_USD),
    ]
    (run_usd, run_1h) = ledger.execute("SELECT usd_total, cache_write_1h_tokens FROM runs").fetchone()
    assert (run_usd, run_1h) == (ONE_HOUR_USD + FIVE_MINUTE_USD, 6_100)


def test_the_hit_rate_counts_1_hour_writes_as_input(ledger):
    attrs = {
        c.INPUT_TOKENS: 1_000,  # includes: 900 read + 100 written (all for 1 hour)
        c.OUTPUT_TOKENS: 10,
        c.CACHE_READ_INPUT_TOKENS: 900,
        c.CACHE_CREATION_INPUT_TOKENS: 100,
        c.CACHE_CREATION_1H_INPUT_TOKENS: 100,
    }
    ingest(ledger, [_span(attrs, scope="turnledger.harness")])
    hit = q.records(ledger, q.cache_hit_rate())[0]
    assert hit["hit_rate"] == pytest.approx(0.9)  # 900 / 1,000, not 900 / 900
    assert (hit["cache_write_tokens"], hit["cache_write_1h_tokens"]) == (0, 100)
    assert build_report(ledger)["cache"]["hit_rate"] == pytest.approx(0.9)


def test_the_report_shows_the_1_hour_term_in_the_spend_split_and_per_model(ledger):
    ingest(ledger, [_sdk_span(split=True)])
    report = build_report(ledger)
    money = report["where_the_money_went"]
    assert list(money) == [f"share_{t.key}" for t in terms.TERMS]
    assert money["share_cache_write_1h"] == pytest.approx(float(Decimal("0.0366") / ONE_HOUR_USD))
    assert money["share_cache_write"] == 0 and sum(money.values()) == pytest.approx(1)
    (model,) = report["models"]
    assert (model["usd_cache_write_1h"], model["usd_total"]) == (0.0366, float(ONE_HOUR_USD))
    assert "cache write (1 h)" in format_report(report)


def test_migration_5_adds_the_1_hour_columns_in_place_even_after_migration_6(tmp_path, monkeypatch):
    path = tmp_path / "older.duckdb"
    with monkeypatch.context() as m:  # a ledger made before this term existed: every other migration, four terms
        m.setattr(schema, "MIGRATIONS", [step for step in schema.MIGRATIONS if step[0] != 5])
        m.setattr(terms, "TERMS", tuple(t for t in terms.TERMS if t.key != "cache_write_1h"))
        with open_ledger(path) as con:
            assert schema.pending_migrations(con) == []
            ingest(con, [_sdk_span(split=False)])
            before = con.execute("SELECT usd_total FROM runs").fetchone()
    with open_ledger(path) as con:
        assert schema.schema_version(con) >= 5
        assert con.execute("SELECT name FROM schema_migrations WHERE version = 5").fetchone() == (
            "1-hour cache-write price term",
        )
        charges = con.execute("SELECT cache_write_tokens, cache_write_1h_tokens, usd_cache_write_1h FROM charges")
        assert charges.fetchall() == [(6_100, 0, 0)]
        assert con.execute("SELECT usd_total FROM runs").fetchone() == before
        ingest(con, [_sdk_span(split=True, span_id="c" * 16)])  # and it takes 1-hour writes now
        assert con.execute("SELECT sum(cache_write_1h_tokens) FROM charges").fetchone() == (6_100,)
