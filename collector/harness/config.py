"""Run limits, thresholds and the harness's own price estimate.

The harness prices calls only to enforce a dollar budget while the run is
live; the ledger re-prices every charge from its price book afterwards.
Money is Decimal so a budget comparison never suffers float drift.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from collector.harness.llm import Usage

from .retry import RetryPolicy

__all__ = ["DEFAULT_PRICES", "AgentConfig", "Price"]

_MTOK = Decimal(1_000_000)


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens; cache terms are multiples of the input price (Anthropic's: a
    5-minute cache write 1.25x, a 1-hour one 2x, a cache read 0.10x)."""

    input_per_mtok: Decimal
    output_per_mtok: Decimal
    cache_write_multiplier: Decimal = Decimal("1.25")
    cache_read_multiplier: Decimal = Decimal("0.10")
    cache_write_1h_multiplier: Decimal = Decimal("2")

    @classmethod
    def of(cls, input_per_mtok: float | str | Decimal, output_per_mtok: float | str | Decimal) -> Price:
        return cls(Decimal(str(input_per_mtok)), Decimal(str(output_per_mtok)))

    def cost(self, usage: Usage) -> Decimal:
        """Every term at its own rate (a cache read is not a full-price input, a 1-hour write
        is not a 5-minute one)."""
        p_in = self.input_per_mtok
        return (
            usage.input_tokens * p_in
            + usage.output_tokens * self.output_per_mtok
            + usage.cache_creation_5m_input_tokens * p_in * self.cache_write_multiplier
            + usage.cache_creation_1h_input_tokens * p_in * self.cache_write_1h_multiplier
            + usage.cache_read_input_tokens * p_in * self.cache_read_multiplier
        ) / _MTOK


# The seeds' list prices (USD per MTok, input/output), and claude-sonnet-4-6 (issue #12's worked example).
DEFAULT_PRICES: Mapping[str, Price] = {
    "claude-opus-5": Price.of(5, 25),
    "claude-sonnet-5": Price.of(3, 15),
    "claude-haiku-4-5": Price.of(1, 5),
    "claude-sonnet-4-6": Price.of(3, 15),
}


@dataclass(frozen=True)
class AgentConfig:
    """Every limit of one run. Defaults are the seed's: 10 steps, 50,000 tokens,
    loop thresholds 3/2/6, 80% soft budget, retries capped at 60 s."""

    max_steps: int = 10  # model calls
    max_total_tokens: int | None = 50_000  # all four terms: uncached + cache write + cache read + output
    max_cost_usd: Decimal | None = None
    budget_warn_ratio: float = 0.8
    # LoopGuard: a call may be made `repeat_threshold` times, the world may look
    # the same `cycle_threshold` times, `stall_threshold` steps may pass without progress.
    repeat_threshold: int = 3
    cycle_threshold: int = 2
    stall_threshold: int = 6
    max_tool_calls: int = 40  # the guard's own cap: one turn can request several tools
    max_parallel_tools: int = 4
    max_tokens_per_call: int = 4096
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    prices: Mapping[str, Price] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    default_price: Price = field(default_factory=lambda: DEFAULT_PRICES["claude-opus-5"])
    # Identity, carried onto telemetry so runs can be compared across versions.
    agent_name: str = "agent"
    agent_version: str = ""
    prompt_version: str = ""
    tool_schema_version: str = ""
    call_site: str = "agent"  # the label of the loop's own model calls

    def __post_init__(self) -> None:
        if self.max_cost_usd is not None and not isinstance(self.max_cost_usd, Decimal):
            object.__setattr__(self, "max_cost_usd", Decimal(str(self.max_cost_usd)))
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {self.max_steps!r}")

    def price(self, model: str) -> Price:
        return self.prices.get(model, self.default_price)

    def cost(self, model: str, usage: Usage) -> Decimal:
        return self.price(model).cost(usage)
