"""The run's spend against its token and dollar limits.

The model cannot see its own spend (usage is computed by the server after the
fact), so the harness keeps the ledger: a hard stop the model cannot argue
with, and a soft warning at 80% that the model *can* read, sent once.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from collector.harness.llm import Usage

__all__ = ["WRAP_UP_NOTE", "Budget", "BudgetLine"]

WRAP_UP_NOTE = (
    "[harness note] You have used {percent}% of this run's budget. Finish what you have started and "
    "give your answer now; do not start new lines of work. If you cannot finish, say exactly what remains."
)


@dataclass(frozen=True, slots=True)
class BudgetLine:
    """One budget dimension at the moment it crossed a threshold."""

    kind: Literal["tokens", "usd"]
    spent: int | Decimal
    limit: int | Decimal

    @property
    def fraction(self) -> float:
        return float(self.spent) / float(self.limit)


class Budget:
    """Tokens (all four terms) and dollars, each with an optional limit. Thread-safe:
    model calls made inside tools charge it from worker threads."""

    def __init__(self, max_tokens: int | None, max_usd: Decimal | None, warn_ratio: float = 0.8) -> None:
        self.max_tokens = max_tokens
        self.max_usd = max_usd
        self.warn_ratio = warn_ratio
        self.tokens = 0
        self.usd = Decimal(0)
        self._warned = False
        self._lock = threading.Lock()

    def charge(self, usage: Usage, cost_usd: Decimal) -> None:
        with self._lock:
            self.tokens += usage.total_tokens
            self.usd += cost_usd

    def _lines(self) -> list[BudgetLine]:
        lines: list[BudgetLine] = []
        if self.max_tokens:
            lines.append(BudgetLine("tokens", self.tokens, self.max_tokens))
        if self.max_usd:
            lines.append(BudgetLine("usd", self.usd, self.max_usd))
        return lines

    def exceeded(self) -> BudgetLine | None:
        """The first dimension whose limit is reached or passed, if any."""
        with self._lock:
            return next((line for line in self._lines() if line.fraction >= 1.0), None)

    def take_warning(self) -> BudgetLine | None:
        """The dimension that crossed the soft threshold, the first time only.

        Once per run by design: repeating the wrap-up on every later turn spends
        context re-sending an instruction the model has already read.
        """
        with self._lock:
            if self._warned:
                return None
            line = max(self._lines(), key=lambda x: x.fraction, default=None)
            if line is None or not self.warn_ratio <= line.fraction < 1.0:
                return None
            self._warned = True
            return line
