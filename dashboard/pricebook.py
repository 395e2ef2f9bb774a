"""The price book as this process would price a call now (Models & prices page).

Stored charges carry their own price source and version (``price_sources``
query); this module answers the other question: what is in force today.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache
from typing import Any

from ledger.pricing import GENAI_PRICES_VERSION, PriceBook, TokenCounts
from ledger.settings import prices_file
from ledger.terms import TERMS

__all__ = ["cache_minimum", "price_book_summary", "unit_prices"]

_PROBE = 1_000  # tokens per term; small enough to stay in every model's base tier


@lru_cache(maxsize=4)
def _book(user_file: str | None) -> PriceBook:
    return PriceBook.default(user_file)


def cache_minimum(model: str | None) -> int | None:
    """The shortest prefix ``model`` caches, from the price book in force (``[cache_minimum]``)."""
    user = prices_file()
    return _book(str(user) if user else None).cache_minimum(model)


def price_book_summary() -> dict[str, Any]:
    user = prices_file()
    book = _book(str(user) if user else None)
    files = ["ledger/data/prices.toml (shipped)"] + ([f"{user} (TURNLEDGER_PRICES)"] if user else [])
    rows = []
    for row in book.override_rows():
        rows.append({k: (float(v) if isinstance(v, Decimal) else v) for k, v in row.items()})
    return {"genai_prices_version": GENAI_PRICES_VERSION, "files": files, "overrides": rows}


def unit_prices(models: list[tuple[str, str]], when: datetime | None = None) -> list[dict[str, Any]]:
    """USD per million tokens for each term of each (provider, model); None where unpriced."""
    user = prices_file()
    book = _book(str(user) if user else None)
    when = when or datetime.now(UTC)
    out = []
    for provider, model in models:
        probes = {t.price_name: TokenCounts(**{t.key: _PROBE}) for t in TERMS}  # "input", "output", ...
        row: dict[str, Any] = {"provider": provider, "model": model}
        for term, tokens in probes.items():
            priced = book.price(provider, model, tokens, when)
            row["source"] = priced.source if not priced.unpriced else "UNPRICED"
            row[term] = None if priced.unpriced else float(priced.total * 1_000_000 / _PROBE)
        out.append(row)
    return out
