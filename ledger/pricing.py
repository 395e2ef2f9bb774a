"""The price book: USD for one model call, one exact amount per price term (``ledger.terms``).

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

from . import terms
from .errors import PriceFileError

__all__ = [
    "ModelPricing",
    "PriceBook",
    "PricedCall",
    "TokenCounts",
    "load_cache_minimums",
    "load_price_file",
]

_INPUT_PRICE = "input_mtok"  # the genai-prices unit other input-side prices default to
_PER_MTOK = 1_000_000
_USD_PLACES = Decimal("1e-12")  # matches the DECIMAL(38, 12) money columns
_NO_USD = Decimal(0).quantize(_USD_PLACES)
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
    "mistral_ai": "mistral",
}
_DATE_SUFFIX = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2}|v\d+(?::\d+)?)$")


class TokenCounts:
    """Tokens of one call, normalized, by price term (``ledger.terms``): the billed terms never overlap.

    Built by keyword (``TokenCounts(uncached_input=..., output=...)``); each
    term's count is also an attribute (``tokens.output``). A plain class with a
    dict, not a dataclass, so its fields follow ``TERMS``; built per charge at
    ingest, so kept small.
    """

    __slots__ = ("by_term", "reasoning")

    @classmethod
    def of(cls, by_term: dict[str, int], reasoning: int = 0) -> TokenCounts:
        """From a count for every term, unchecked: normalize builds one per charge (kwargs cost 3x as much)."""
        counts = object.__new__(cls)
        counts.by_term = by_term
        counts.reasoning = reasoning
        return counts

    def __init__(self, *, reasoning: int = 0, **by_term: int) -> None:
        keys = _keys(terms.TERMS)
        if by_term.keys() != keys.all:  # normalize passes every term; others may leave some out
            unknown = by_term.keys() - keys.all
            if unknown:
                raise TypeError(f"no price term {sorted(unknown)!r}; the terms are {list(keys.ordered)!r}")
            by_term = {k: by_term.get(k, 0) for k in keys.ordered}
        self.by_term = by_term
        self.reasoning = reasoning  # informational: already inside `output`, priced as output

    def __getattr__(self, name: str) -> int:  # only called for names that are not slots: the term keys
        by_term = object.__getattribute__(self, "by_term")
        if name in by_term:
            return int(by_term[name])
        raise AttributeError(f"TokenCounts has no price term {name!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TokenCounts):
            return NotImplemented
        return (self.by_term, self.reasoning) == (other.by_term, other.reasoning)

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={v}" for k, v in self.by_term.items())
        return f"TokenCounts({counts}, reasoning={self.reasoning})"

    @property
    def total_input(self) -> int:
        by_term = self.by_term
        return sum([by_term[k] for k in _keys(terms.TERMS).input_side])


@dataclass(frozen=True, slots=True)
class _TermKeys:
    ordered: tuple[str, ...]
    all: frozenset[str]
    input_side: tuple[str, ...]


@lru_cache(maxsize=8)
def _keys(terms_now: tuple[terms.PriceTerm, ...]) -> _TermKeys:
    """The term keys, worked out once per set of terms (TokenCounts are built per charge)."""
    ordered = tuple(t.key for t in terms_now)
    return _TermKeys(ordered, frozenset(ordered), tuple(t.key for t in terms_now if t.input_side))


@dataclass(slots=True)  # not frozen: built per charge at ingest, where frozen is 6x slower (read-only)
class PricedCall:
    """USD of one call by price term key; each term's dollars are also its USD column's name (``.usd_input``)."""

    usd: dict[str, Decimal]
    source: str  # "genai-prices" | "override" | "unpriced"
    version: str  # database version, or override file and effective date

    def __getattr__(self, name: str) -> Decimal:  # only called for names that are not fields: the USD columns
        usd = object.__getattribute__(self, "usd")
        for t in terms.TERMS:
            if t.usd_column == name:
                return Decimal(usd[t.key])
        raise AttributeError(f"PricedCall has no USD column {name!r}")

    @property
    def unpriced(self) -> bool:
        return self.source == "unpriced"

    @property
    def total(self) -> Decimal:
        return sum(self.usd.values(), Decimal(0))


@lru_cache(maxsize=8)
def _unpriced(terms_now: tuple[terms.PriceTerm, ...]) -> PricedCall:
    """Zero dollars in every term, flagged (one shared value per set of terms)."""
    return PricedCall(dict.fromkeys((t.key for t in terms_now), Decimal(0)), "unpriced", "")


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

        unit_prices = {t.price_name: _unit_price(self.prices, t) for t in terms.TERMS}
        return {
            "model": self.name,
            "provider": self.provider or "",
            "effective_from": self.effective_from.isoformat(),
            **{f"{name}_per_mtok": base(p) for name, p in unit_prices.items()},
            "tiered": any(isinstance(p, TieredPrices) for p in unit_prices.values()),
            "source": f"override ({self.origin})",
        }


# A database entry that prices 5-minute cache writes but not 1-hour ones (a model listed before
# genai-prices carried the 1-hour rate) still has Anthropic's 1-hour rule: the term's default
# multiple of input (2x), not the plain input price a model without any prompt cache gets.
_MULTIPLE_OF_INPUT_BESIDE = {"cache_write_1h": "cache_write_mtok"}


def _unit_price(prices: ModelPrice, term: terms.PriceTerm) -> Decimal | TieredPrices | None:
    """A term's price per million tokens. A database entry without cache prices (models
    with no prompt cache) bills cached tokens as plain input rather than dropping them."""
    price = getattr(prices, term.price_key, None)
    if price is None and term.input_side:
        price = getattr(prices, _INPUT_PRICE, None)
        beside = _MULTIPLE_OF_INPUT_BESIDE.get(term.key)
        multiple = term.default_input_multiple
        if price is not None and multiple is not None and beside and getattr(prices, beside, None) is not None:
            price = _times(price, multiple)
    return price


def _times(price: Decimal | TieredPrices, multiple: Decimal) -> Decimal | TieredPrices:
    """A price scaled by ``multiple``, tier by tier."""
    if isinstance(price, TieredPrices):
        return TieredPrices(base=price.base * multiple, tiers=[Tier(t.start, t.price * multiple) for t in price.tiers])
    return price * multiple


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


def _read_price_file(path: Path, text: str | None) -> dict[str, Any]:
    try:
        return tomllib.loads(text if text is not None else path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise PriceFileError(f"cannot read price file {str(path)!r}: {exc}") from None


def load_cache_minimums(path: Path | str, text: str | None = None) -> dict[str, int]:
    """A price file's ``[cache_minimum]`` table: model name -> the shortest prefix it caches (tokens)."""
    path = Path(path)
    table = _read_price_file(path, text).get("cache_minimum", {})
    if not isinstance(table, dict):
        raise PriceFileError(f"{path.name}: [cache_minimum] must be a table of model = tokens")
    out = {}
    for model, tokens in table.items():
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
            raise PriceFileError(f"{path.name} [cache_minimum] {model!r}: a whole number of tokens, got {tokens!r}")
        out[str(model).lower()] = tokens
    return out


def load_price_file(path: Path | str, text: str | None = None) -> list[ModelPricing]:
    """Parse an override TOML file. Raises PriceFileError naming the file and entry."""
    path = Path(path)
    data = _read_price_file(path, text)
    out = []
    for i, entry in enumerate(data.get("model", [])):
        where = f"{path.name} model #{i + 1}"
        name = entry.get("name")
        required = [t.price_name for t in terms.TERMS if t.default_input_multiple is None]
        if not name or any(key not in entry for key in required):
            raise PriceFileError(f"{where}: `name`, {' and '.join(f'`{k}`' for k in required)} are required")
        where = f"{path.name} model {name!r}"
        effective = entry.get("effective_from", date(1970, 1, 1))
        if isinstance(effective, datetime):
            effective = effective.date()
        if not isinstance(effective, date):
            raise PriceFileError(f"{where}: effective_from must be a TOML date, got {effective!r}")
        prices = ModelPrice(**_file_prices(entry, where))
        provider = entry.get("provider")
        out.append(ModelPricing(str(name).lower(), provider, effective, prices, path.name))
    return out


def _file_prices(entry: dict[str, Any], where: str) -> dict[str, Decimal | TieredPrices | None]:
    """Each term's price from one price-file entry (genai-prices keys); a cache price left
    out is its term's multiple of the input price (Anthropic's, in ``TERMS``)."""
    out: dict[str, Decimal | TieredPrices | None] = {}
    input_price = _decimal(entry[terms.term("uncached_input").price_name], where)
    for t in terms.TERMS:
        if t.price_name in entry:
            base = _decimal(entry[t.price_name], where)
        else:
            assert t.default_input_multiple is not None  # load_price_file checked the required ones
            base = input_price * t.default_input_multiple
        out[t.price_key] = _term(entry, t.price_name, base, where)
    return out


def _default_file() -> str:
    return (resources.files("ledger") / "data" / "prices.toml").read_text()


def _usd(value: Decimal) -> Decimal:
    return value.quantize(_USD_PLACES, rounding=ROUND_HALF_EVEN)


@dataclass(frozen=True, slots=True)
class _UnitPrices:
    """One model's price per MTok for every term, resolved once per model and day."""

    by_term: tuple[tuple[str, Decimal | TieredPrices | None], ...]  # (term key, price)
    tiered: bool


def _unit_prices(prices: ModelPrice) -> _UnitPrices:
    by_term = tuple((t.key, _unit_price(prices, t)) for t in terms.TERMS)
    return _UnitPrices(by_term, any(isinstance(p, TieredPrices) for _, p in by_term))


def _price_terms(unit_prices: _UnitPrices, tokens: TokenCounts, source: str, version: str) -> PricedCall:
    """Each term's unit price times its tokens; tiers are chosen by the call's total input tokens."""
    counts = tokens.by_term
    # Only tiered prices read the total (as in genai-prices), and most prices are flat.
    total_in = tokens.total_input if unit_prices.tiered else 0
    usd = {}
    for key, price in unit_prices.by_term:
        count = counts[key]
        # A term the call did not use costs nothing whatever its price (most calls skip one or two).
        usd[key] = _usd(calc_unit_price(price, count, total_in, _PER_MTOK)) if count else _NO_USD
    return PricedCall(usd, source, version)


class PriceBook:
    """Resolves (provider, model, time) to prices and prices token counts.

    ``overrides`` take precedence over the database; among overrides for the
    same model, the latest ``effective_from`` not after the call wins.
    """

    def __init__(
        self,
        overrides: list[ModelPricing] | None = None,
        *,
        use_database: bool = True,
        cache_minimums: dict[str, int] | None = None,
    ) -> None:
        self.overrides = sorted(overrides or [], key=lambda o: o.effective_from)
        self.use_database = use_database
        self.cache_minimums = dict(cache_minimums or {})
        self._lookup = lru_cache(maxsize=4096)(self._resolve)

    def __reduce__(self) -> tuple[Any, ...]:
        # Picklable (the collector's decoder processes get one) without its cache.
        book = partial(PriceBook, use_database=self.use_database, cache_minimums=self.cache_minimums)
        return (book, (self.overrides,))

    @classmethod
    def default(cls, user_file: Path | str | None = None) -> PriceBook:
        shipped = Path("prices.toml"), _default_file()
        overrides, minimums = load_price_file(*shipped), load_cache_minimums(*shipped)
        if user_file:
            overrides += load_price_file(user_file)
            minimums |= load_cache_minimums(user_file)
        return cls(overrides, cache_minimums=minimums)

    def cache_minimum(self, model: str | None) -> int | None:
        """The shortest prefix ``model`` caches (tokens), when the price book knows it.

        A dated or suffixed name uses the longest listed name it extends
        (``claude-sonnet-4-5-20250929`` → ``claude-sonnet-4-5``).
        """
        name = _DATE_SUFFIX.sub("", (model or "").lower())
        if name in self.cache_minimums:
            return self.cache_minimums[name]
        extended = [key for key in self.cache_minimums if name.startswith(key + "-")]
        return self.cache_minimums[max(extended, key=len)] if extended else None

    def price(self, provider: str | None, model: str, tokens: TokenCounts, when: datetime | None = None) -> PricedCall:
        terms_now = terms.TERMS
        if not model:
            return _unpriced(terms_now)
        day = (when or datetime.now(UTC)).date()
        found = self._lookup((provider or "").lower(), model.lower(), day, terms_now)
        if found is None:
            return _unpriced(terms_now)
        unit_prices, source, version = found
        return _price_terms(unit_prices, tokens, source, version)

    def split_error(
        self, provider: str | None, model: str, tokens: TokenCounts, when: datetime | None = None
    ) -> Decimal:
        """The most a charge of ``tokens`` can be off when its source gave no cache split: its uncached
        input tokens may in truth have been any other input-side term (cache reads, 5-minute or 1-hour
        writes). 0 for a model without cache prices, or without a price at all (flagged unpriced)."""
        n = tokens.by_term["uncached_input"]
        charged = self.price(provider, model, tokens, when)
        if not n or charged.unpriced:
            return Decimal(0)
        worst = Decimal(0)
        for t in terms.TERMS:
            if t.input_side and t.key != "uncached_input":
                other = TokenCounts.of({**dict.fromkeys(tokens.by_term, 0), t.key: n})
                worst = max(
                    worst, abs(self.price(provider, model, other, when).usd[t.key] - charged.usd["uncached_input"])
                )
        return worst

    def is_priced(self, provider: str | None, model: str, when: datetime | None = None) -> bool:
        return not self.price(provider, model, TokenCounts(), when).unpriced

    def _resolve(
        self, provider: str, model: str, day: date, _terms: tuple[terms.PriceTerm, ...]
    ) -> tuple[_UnitPrices, str, str] | None:
        """Each term's unit price for this model on this day (cached: the terms are in the key, for tests)."""
        found = self._model_price(provider, model, day)
        return None if found is None else (_unit_prices(found[0]), *found[1:])

    def _model_price(self, provider: str, model: str, day: date) -> tuple[ModelPrice, str, str] | None:
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
