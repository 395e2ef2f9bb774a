"""The price book: USD for one model call, as four separate exact terms.

Prices come from the maintained ``genai-prices`` database, with override files
layered on top (the project default in ``ledger/data/prices.toml``, then the
user's). A model neither source knows is *unpriced*: its charge carries a flag
and zero dollars, and every report counts and lists it, so a missing price is
never mistaken for a free call.
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from functools import lru_cache, partial
from importlib import resources
from pathlib import Path
from typing import Any

from genai_prices import data_snapshot
from genai_prices.types import ModelPrice, Tier, TieredPrices, calc_unit_price

from .errors import PriceFileError

__all__ = [
    "CACHE_READ_MULTIPLIER",
    "CACHE_WRITE_MULTIPLIER",
    "ModelPricing",
    "PriceBook",
    "PricedCall",
    "TokenCounts",
    "load_price_file",
]

# Anthropic's prompt-cache multipliers of the input price (seeds, DESIGN.md).
CACHE_WRITE_MULTIPLIER = Decimal("1.25")
CACHE_READ_MULTIPLIER = Decimal("0.10")
_PER_MTOK = 1_000_000
_USD_PLACES = Decimal("1e-12")  # matches the DECIMAL(38, 12) money columns
GENAI_PRICES_VERSION = importlib.metadata.version("genai-prices")

# OTel provider names -> genai-prices provider ids, where they differ.
_PROVIDER_IDS = {
    "aws.bedrock": "aws",
    "gcp.vertex_ai": "google",
    "gcp.gemini": "google",
    "gcp.gen_ai": "google",
    "azure.ai.openai": "azure",
    "azure.ai.inference": "azure",
    "az.ai.openai": "azure",
    "x_ai": "x-ai",
}
_DATE_SUFFIX = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2}|v\d+(?::\d+)?)$")


@dataclass(slots=True)  # not frozen: built per charge at ingest, where frozen is 6x slower (read-only)
class TokenCounts:
    """Tokens of one call, normalized: the four billed terms never overlap."""

    uncached_input: int = 0
    cache_write: int = 0
    cache_read: int = 0
    output: int = 0
    reasoning: int = 0  # informational: already inside `output`, priced as output

    @property
    def total_input(self) -> int:
        return self.uncached_input + self.cache_write + self.cache_read


@dataclass(slots=True)  # not frozen, as TokenCounts
class PricedCall:
    usd_input: Decimal
    usd_output: Decimal
    usd_cache_write: Decimal
    usd_cache_read: Decimal
    source: str  # "genai-prices" | "override" | "unpriced"
    version: str  # database version, or override file and effective date

    @property
    def unpriced(self) -> bool:
        return self.source == "unpriced"

    @property
    def total(self) -> Decimal:
        return self.usd_input + self.usd_output + self.usd_cache_write + self.usd_cache_read


_ZERO = Decimal(0)
_UNPRICED = PricedCall(_ZERO, _ZERO, _ZERO, _ZERO, "unpriced", "")


@dataclass(frozen=True, slots=True)
class ModelPricing:
    """USD per million tokens for one model from one date on (override entries)."""

    name: str
    provider: str | None
    effective_from: date
    prices: ModelPrice
    origin: str  # file the entry came from

    def to_row(self) -> dict[str, object]:
        def base(p: Decimal | TieredPrices | None) -> Decimal | None:
            return p.base if isinstance(p, TieredPrices) else p

        return {
            "model": self.name,
            "provider": self.provider or "",
            "effective_from": self.effective_from.isoformat(),
            "input_per_mtok": base(self.prices.input_mtok),
            "output_per_mtok": base(self.prices.output_mtok),
            "cache_write_per_mtok": base(self.prices.cache_write_mtok),
            "cache_read_per_mtok": base(self.prices.cache_read_mtok),
            "tiered": any(isinstance(p, TieredPrices) for p in _terms(self.prices)),
            "source": f"override ({self.origin})",
        }


def _terms(p: ModelPrice) -> tuple[object, object, object, object]:
    return (p.input_mtok, p.output_mtok, p.cache_write_mtok, p.cache_read_mtok)


def _decimal(value: object, where: str) -> Decimal:
    try:
        d = Decimal(str(value))
    except ArithmeticError:
        raise PriceFileError(f"{where}: price {value!r} is not a number") from None
    if not d.is_finite() or d < 0:
        raise PriceFileError(f"{where}: price {value!r} must be a non-negative number")
    return d


def _term(entry: dict[str, Any], key: str, base: Decimal | None, where: str) -> Decimal | TieredPrices | None:
    """One price term with its tiers (cliff tiers on total input tokens, as genai-prices)."""
    if base is None:
        return None
    tiers = []
    for tier in entry.get("tiers", []) or []:
        if not isinstance(tier, dict) or "above" not in tier:
            raise PriceFileError(f"{where}: each tier needs `above = <input tokens>`")
        if key in tier:
            tiers.append(Tier(start=int(tier["above"]), price=_decimal(tier[key], f"{where} tier")))
    return TieredPrices(base=base, tiers=tiers) if tiers else base


def load_price_file(path: Path | str, text: str | None = None) -> list[ModelPricing]:
    """Parse an override TOML file. Raises PriceFileError naming the file and entry."""
    path = Path(path)
    try:
        data = tomllib.loads(text if text is not None else path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise PriceFileError(f"cannot read price file {str(path)!r}: {exc}") from None
    out = []
    for i, entry in enumerate(data.get("model", [])):
        where = f"{path.name} model #{i + 1}"
        name = entry.get("name")
        if not name or "input" not in entry or "output" not in entry:
            raise PriceFileError(f"{where}: `name`, `input` and `output` are required")
        where = f"{path.name} model {name!r}"
        effective = entry.get("effective_from", date(1970, 1, 1))
        if isinstance(effective, datetime):
            effective = effective.date()
        if not isinstance(effective, date):
            raise PriceFileError(f"{where}: effective_from must be a TOML date, got {effective!r}")
        inp = _decimal(entry["input"], where)
        write = _decimal(entry["cache_write"], where) if "cache_write" in entry else inp * CACHE_WRITE_MULTIPLIER
        read = _decimal(entry["cache_read"], where) if "cache_read" in entry else inp * CACHE_READ_MULTIPLIER
        prices = ModelPrice(
            input_mtok=_term(entry, "input", inp, where),
            output_mtok=_term(entry, "output", _decimal(entry["output"], where), where),
            cache_write_mtok=_term(entry, "cache_write", write, where),
            cache_read_mtok=_term(entry, "cache_read", read, where),
        )
        provider = entry.get("provider")
        out.append(ModelPricing(str(name).lower(), provider, effective, prices, path.name))
    return out


def _default_overrides() -> list[ModelPricing]:
    ref = resources.files("ledger") / "data" / "prices.toml"
    return load_price_file(Path("prices.toml"), ref.read_text())


def _usd(value: Decimal) -> Decimal:
    return value.quantize(_USD_PLACES, rounding=ROUND_HALF_EVEN)


def _price_terms(prices: ModelPrice, tokens: TokenCounts, source: str, version: str) -> PricedCall:
    total_in = tokens.total_input
    cache_write_price = prices.cache_write_mtok
    cache_read_price = prices.cache_read_mtok
    # A database entry without cache prices (models with no prompt cache) bills
    # cached tokens as plain input rather than dropping them.
    if cache_write_price is None:
        cache_write_price = prices.input_mtok
    if cache_read_price is None:
        cache_read_price = prices.input_mtok
    return PricedCall(
        _usd(calc_unit_price(prices.input_mtok, tokens.uncached_input, total_in, _PER_MTOK)),
        _usd(calc_unit_price(prices.output_mtok, tokens.output, total_in, _PER_MTOK)),
        _usd(calc_unit_price(cache_write_price, tokens.cache_write, total_in, _PER_MTOK)),
        _usd(calc_unit_price(cache_read_price, tokens.cache_read, total_in, _PER_MTOK)),
        source,
        version,
    )


class PriceBook:
    """Resolves (provider, model, time) to prices and prices token counts.

    ``overrides`` take precedence over the database; among overrides for the
    same model, the latest ``effective_from`` not after the call wins.
    """

    def __init__(self, overrides: list[ModelPricing] | None = None, *, use_database: bool = True) -> None:
        self.overrides = sorted(overrides or [], key=lambda o: o.effective_from)
        self.use_database = use_database
        self._lookup = lru_cache(maxsize=4096)(self._resolve)

    def __reduce__(self) -> tuple[Any, ...]:
        # Picklable (the collector's decoder processes get one) without its cache.
        return (partial(PriceBook, use_database=self.use_database), (self.overrides,))

    @classmethod
    def default(cls, user_file: Path | str | None = None) -> PriceBook:
        overrides = _default_overrides()
        if user_file:
            overrides += load_price_file(user_file)
        return cls(overrides)

    def price(self, provider: str | None, model: str, tokens: TokenCounts, when: datetime | None = None) -> PricedCall:
        if not model:
            return _UNPRICED
        day = (when or datetime.now(UTC)).date()
        found = self._lookup((provider or "").lower(), model.lower(), day)
        if found is None:
            return _UNPRICED
        prices, source, version = found
        return _price_terms(prices, tokens, source, version)

    def is_priced(self, provider: str | None, model: str, when: datetime | None = None) -> bool:
        return not self.price(provider, model, TokenCounts(), when).unpriced

    def _resolve(self, provider: str, model: str, day: date) -> tuple[ModelPrice, str, str] | None:
        bare = _DATE_SUFFIX.sub("", model)
        for o in reversed(self.overrides):
            if (
                o.name in (model, bare)
                and o.effective_from <= day
                and (not o.provider or not provider or o.provider == provider)
            ):
                return o.prices, "override", f"{o.origin}@{o.effective_from.isoformat()}"
        if not self.use_database:
            return None
        snapshot = data_snapshot.get_snapshot()
        provider_id = _PROVIDER_IDS.get(provider, provider) or None
        when = datetime(day.year, day.month, day.day, tzinfo=UTC)
        for pid in (provider_id, None) if provider_id else (None,):
            try:
                _, info = snapshot.find_provider_model(model, None, pid, None)
            except LookupError:
                continue
            return info.get_prices(when), "genai-prices", GENAI_PRICES_VERSION
        return None

    def override_rows(self) -> list[dict[str, object]]:
        return [o.to_row() for o in self.overrides]
