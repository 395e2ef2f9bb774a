"""The price terms: the one list every billed token count and dollar column comes from.

A model call is billed in separate terms (uncached input, output, cache write,
cache read), never pre-summed. Each term names its token column, its USD
column, how people call it and the colour charts give it. The schema, the
Arrow row layout, the SQL that sums a charge, the pricing result and the
dashboard's legends are all derived from ``TERMS``: adding a term is one entry
here plus a migration that adds its columns.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TERMS", "PriceTerm", "token_columns", "usd_columns", "usd_sum"]


@dataclass(frozen=True, slots=True)
class PriceTerm:
    key: str  # the attribute name on TokenCounts / PricedCall ("uncached_input", ...)
    tokens_column: str  # BIGINT token count in charges and runs
    usd_column: str  # exact DECIMAL dollars in charges and runs
    label: str  # what a person reads in a legend or a table header
    colour: str  # the same colour on every chart


TERMS: tuple[PriceTerm, ...] = (
    PriceTerm("uncached_input", "uncached_input_tokens", "usd_input", "uncached input", "#4C78A8"),
    PriceTerm("output", "output_tokens", "usd_output", "output", "#F58518"),
    PriceTerm("cache_write", "cache_write_tokens", "usd_cache_write", "cache write", "#B279A2"),
    PriceTerm("cache_read", "cache_read_tokens", "usd_cache_read", "cache read", "#54A24B"),
)


def token_columns() -> list[str]:
    return [t.tokens_column for t in TERMS]


def usd_columns() -> list[str]:
    return [t.usd_column for t in TERMS]


def usd_sum(alias: str | None = None) -> str:
    """SQL for one row's dollars, all terms added: ``(c.usd_input + c.usd_output + ...)``."""
    prefix = f"{alias}." if alias else ""
    return "(" + " + ".join(f"{prefix}{t.usd_column}" for t in TERMS) + ")"
