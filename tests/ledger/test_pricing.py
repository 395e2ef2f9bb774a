"""The price book: overrides with dates and tiers, database fallback, clear errors."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from ledger.errors import PriceFileError
from ledger.pricing import PriceBook, TokenCounts, load_price_file

OVERRIDE = """
[[model]]
name = "acme-large"
provider = "acme"
effective_from = 2026-01-01
input = "2"
output = "8"

[[model]]
name = "acme-large"
provider = "acme"
effective_from = 2026-06-01
input = "1"
output = "4"
cache_read = "0.05"
[[model.tiers]]
above = 200000
input = "2"
output = "6"
"""


def _book(tmp_path, text=OVERRIDE) -> PriceBook:
    path = tmp_path / "prices.toml"
    path.write_text(text)
    return PriceBook.default(path)


def _at(day: str) -> datetime:
    return datetime.fromisoformat(day).replace(tzinfo=UTC)


def test_effective_dates_pick_the_price_in_force(tmp_path):
    book = _book(tmp_path)
    tokens = TokenCounts(uncached_input=100_000, output=100_000)  # below the 200k tier
    assert book.price("acme", "acme-large", tokens, _at("2026-03-01")).total == Decimal("1.0")
    assert book.price("acme", "acme-large", tokens, _at("2026-07-01")).total == Decimal("0.5")
    assert book.price("acme", "acme-large", tokens, _at("2025-12-31")).unpriced


def test_tiers_apply_to_all_tokens_above_the_threshold(tmp_path):
    book = _book(tmp_path)
    small = book.price("acme", "acme-large", TokenCounts(uncached_input=100_000, output=1_000), _at("2026-07-01"))
    large = book.price("acme", "acme-large", TokenCounts(uncached_input=250_000, output=1_000), _at("2026-07-01"))
    assert small.usd_input == Decimal("0.1") and small.usd_output == Decimal("0.004")
    assert large.usd_input == Decimal("0.5") and large.usd_output == Decimal("0.006")


def test_explicit_cache_price_and_default_multipliers(tmp_path):
    book = _book(tmp_path)
    p = book.price("acme", "acme-large", TokenCounts(cache_write=1_000_000, cache_read=1_000_000), _at("2026-07-01"))
    assert p.usd_cache_read == Decimal("0.05")
    assert p.usd_cache_write == Decimal("1.25")  # 1.25 x input when the file gives none


def test_dated_model_names_match_their_override():
    p = PriceBook.default().price("anthropic", "claude-sonnet-5-20260301", TokenCounts(uncached_input=1_000_000))
    assert p.usd_input == Decimal(3) and p.source == "override"


def test_database_prices_other_models_and_names_its_version():
    p = PriceBook.default().price("openai", "gpt-4o", TokenCounts(uncached_input=1_000_000, output=1_000_000))
    assert p.source == "genai-prices" and p.version
    assert p.total > 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[model]]\nname = 'x'\ninput = '1'\n", "`name`, `input` and `output` are required"),
        ("[[model]]\nname = 'x'\ninput = 'cheap'\noutput = '1'\n", "price 'cheap' is not a number"),
        ("[[model]]\nname = 'x'\ninput = '-1'\noutput = '1'\n", "must be a non-negative number"),
        ("[[model]\n", "cannot read price file"),
    ],
)
def test_bad_price_files_name_the_problem(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(PriceFileError, match=message):
        load_price_file(path)
