"""The price terms: the one list every billed token count and dollar column comes from.

A model call is billed in separate terms (uncached input, output, cache write
with a 5-minute TTL, cache read, cache write with a 1-hour TTL), never pre-summed. Each term names its token column, its USD
column, the genai-prices unit that prices it, how people call it and the
colour charts give it. The Arrow row layout, the SQL that sums a charge or a
run, the pricing result, the report's splits and the dashboard's legends are
all derived from ``TERMS``, read when they are used (so a test can add a term).

Adding a term is one entry here (at the end: its columns come after the
others) plus one migration, ``ledger.schema.add_term_columns(key)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

__all__ = [
    "TERMS",
    "PriceTerm",
    "input_token_columns",
    "input_tokens_sum",
    "split_cache_writes",
    "term",
    "token_columns",
    "usd_columns",
    "usd_sum",
]


@dataclass(frozen=True, slots=True, eq=False)  # one object per term: compared and hashed by identity (cheap cache keys)
class PriceTerm:
    key: str  # the attribute name on TokenCounts / PricedCall ("uncached_input", ...)
    tokens_column: str  # BIGINT token count in charges and runs
    usd_column: str  # exact DECIMAL dollars in charges and runs
    label: str  # what a person reads in a legend or a table header
    colour: str  # the same colour on every chart
    price_key: str  # the genai-prices unit price ("input_mtok"); a price file names it without "_mtok"
    input_side: bool  # part of the prompt: counts in input tokens, the cache-hit rate and price tiers
    # An override entry that leaves this price out gets this multiple of its input
    # price (Anthropic's cache multipliers); None: the entry must give it.
    default_input_multiple: Decimal | None = None

    @property
    def price_name(self) -> str:
        """The key of this term's price in a price file (``input``, ``cache_write``, ...)."""
        return self.price_key.removesuffix("_mtok")


TERMS: tuple[PriceTerm, ...] = (
    PriceTerm("uncached_input", "uncached_input_tokens", "usd_input", "uncached input", "#4C78A8", "input_mtok", True),
    PriceTerm("output", "output_tokens", "usd_output", "output", "#F58518", "output_mtok", False),
    PriceTerm(
        "cache_write", "cache_write_tokens", "usd_cache_write", "cache write", "#B279A2", "cache_write_mtok", True,
        Decimal("1.25"),
    ),
    PriceTerm(
        "cache_read", "cache_read_tokens", "usd_cache_read", "cache read", "#54A24B", "cache_read_mtok", True,
        Decimal("0.10"),
    ),
    # Anthropic bills a cache write by the entry's TTL: 5 minutes at 1.25x input (``cache_write``
    # above, and every write of a source that reports no split), 1 hour at 2x. Added by migration 5.
    PriceTerm(
        "cache_write_1h", "cache_write_1h_tokens", "usd_cache_write_1h", "cache write (1 h)", "#6B3D7B",
        "cache_write_1h_mtok", True, Decimal("2"),
    ),
)  # fmt: skip


def split_cache_writes(total: int, one_hour: int, five_minute: int = 0) -> tuple[int, int]:
    """A call's cache writes as (5-minute, 1-hour) tokens: the ``cache_write`` and ``cache_write_1h`` terms.

    ``total`` is every token the call wrote (Anthropic's ``cache_creation_input_tokens``), ``one_hour``
    and ``five_minute`` the TTL split it reports beside it (0 when it reports none: then every write
    is a 5-minute write, as before the split existed). Never negative: when the split adds up to more
    than the total, the total is the number that is wrong (the split is the finer report), so each
    TTL gets its own reported count; tokens of the total the split leaves unaccounted for are billed
    at the 5-minute rate, like writes whose TTL nobody reported.
    """
    return max(total - one_hour, five_minute), one_hour


def term(key: str) -> PriceTerm:
    """The term with this key; raises KeyError naming it."""
    for t in TERMS:
        if t.key == key:
            return t
    raise KeyError(f"no price term {key!r}")


def token_columns() -> list[str]:
    return [t.tokens_column for t in TERMS]


def input_token_columns() -> list[str]:
    """The token columns of the prompt, cached or not (every input-side term)."""
    return [t.tokens_column for t in TERMS if t.input_side]


def usd_columns() -> list[str]:
    return [t.usd_column for t in TERMS]


def _prefix(alias: str | None) -> str:
    return f"{alias}." if alias else ""


def usd_sum(alias: str | None = None) -> str:
    """SQL for one row's dollars, all terms added: ``(c.usd_input + c.usd_output + ...)``."""
    prefix = _prefix(alias)
    return "(" + " + ".join(f"{prefix}{t.usd_column}" for t in TERMS) + ")"


def input_tokens_sum(alias: str | None = None) -> str:
    """SQL for one row's prompt tokens, cached or not: ``(c.uncached_input_tokens + ...)``."""
    prefix = _prefix(alias)
    return "(" + " + ".join(f"{prefix}{column}" for column in input_token_columns()) + ")"
