"""Enforcement: may this model call go ahead, given every spend budget covering it?

The harness asks before each model call (and before the first, so a run against
an exhausted tenant budget is refused before it spends anything)::

    gate = BudgetGate(LedgerSource(con))            # embedded ledger
    gate = BudgetGate(HttpSource(server_url))        # through `turnledger serve`
    decision = gate.check(CallScope(tenant=..., agent=..., model=..., call_site=...,
                                    trace_id=current_trace_id(), run_spent_usd=budget.usd))
    if not decision.allowed:
        emit(decision.event()); stop with cause "budget_exceeded", detail decision.detail

(``HttpSource`` and ``current_trace_id`` belong to the harness: :mod:`collector.harness.fleet_gate`.)

A rule covers a call when its scope matches the call's tenant / agent / model /
call site / trace (global rules cover everything; :func:`.rules.covers`).
Only spend rules are enforced; metric rules alert. A rule is spent when spend >= limit.

The ledger sees a run's spans only once they are exported and ingested, so the
harness passes its own live count (``run_spent_usd``): for rules that cover the
whole run (global, tenant, agent, run) the run's ledger charges are replaced by
that count, so nothing is counted twice and nothing waits on the exporter.
Model- and call-site-scoped rules use the ledger alone (the run's count is not
split by model), and so does every windowed rule when no ``trace_id`` is given
(the run's exported charges could not be told apart, and counting them twice
would refuse early).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Protocol

import duckdb

from ledger import conventions as c

from .evaluate import measure_query
from .rules import BudgetError, Level, Rule, ScopeValues, decimal_str, format_money, level_for, parse_money
from .store import list_rules
from .windows import Clock, Window, system_clock, window_for

__all__ = [
    "BudgetGate",
    "BudgetSource",
    "CallScope",
    "Decision",
    "LedgerSource",
    "check_request",
    "decide",
]

_WHOLE_RUN_SCOPES = ("global", "tenant", "agent", "run")


@dataclass(frozen=True, slots=True)
class CallScope:
    """What a model call would be charged to."""

    tenant: str | None = None
    agent: str | None = None
    model: str | None = None
    call_site: str | None = None
    trace_id: str | None = None
    run_spent_usd: Decimal | None = None  # the run's own spend so far, as the harness counts it

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {k: getattr(self, k) for k in ("tenant", "agent", "model", "call_site", "trace_id")}
        d["run_spent_usd"] = decimal_str(self.run_spent_usd)
        return d

    def scope_values(self) -> ScopeValues:
        """What the call carries, by scope kind (for :func:`.rules.covers` and ``list_rules``)."""
        values = {"tenant": self.tenant, "agent": self.agent, "model": self.model, "call_site": self.call_site}
        values["run"] = self.trace_id
        return {kind: {v} for kind, v in values.items() if v}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CallScope:
        unknown = set(d) - {"tenant", "agent", "model", "call_site", "trace_id", "run_spent_usd"}
        if unknown:
            raise BudgetError(f"unknown call scope field(s) {sorted(unknown)!r}")

        def text(k: str) -> str | None:
            v = d.get(k)
            return None if v is None or v == "" else str(v)

        spent = d.get("run_spent_usd")
        return cls(
            text("tenant"),
            text("agent"),
            text("model"),
            text("call_site"),
            text("trace_id"),
            None if spent is None else parse_money(spent, "run_spent_usd"),
        )


@dataclass(frozen=True)
class Decision:
    """The gate's answer. ``rule`` is the spent rule when refused, else the one closest to its limit."""

    allowed: bool
    rule: Rule | None
    detail: str
    spent: Decimal | None = None
    limit: Decimal | None = None
    level: Level = "ok"
    window: dict[str, Any] = field(default_factory=dict)
    rules_checked: int = 0
    unavailable: bool = False  # the check itself failed; ``allowed`` is the fail-open/closed verdict

    def event(self) -> tuple[str, dict[str, Any]]:
        """The guard event to put on the run's span, in the ledger's vocabulary."""
        name = c.EVENT_BUDGET_WARN if self.allowed else c.EVENT_BUDGET_STOP
        attrs: dict[str, Any] = {"kind": "usd", "scope": "fleet", "detail": self.detail}
        if self.rule is not None:
            attrs.update({"rule": self.rule.name, "rule_id": self.rule.id, "rule_scope": str(self.rule.scope)})
            attrs["window"] = str(self.window.get("key", self.rule.window))
        if self.spent is not None and self.limit is not None:
            attrs.update({"spent_usd": float(self.spent), "limit_usd": float(self.limit)})
            attrs["fraction"] = round(float(self.spent / self.limit), 4) if self.limit else 1.0
        return name, attrs

    def to_dict(self) -> dict[str, Any]:
        return {
            "allowed": self.allowed,
            "rule": self.rule.to_dict() if self.rule else None,
            "detail": self.detail,
            "spent": decimal_str(self.spent),
            "limit": decimal_str(self.limit),
            "level": self.level,
            "window": self.window,
            "rules_checked": self.rules_checked,
            "unavailable": self.unavailable,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Decision:
        return cls(
            allowed=bool(d["allowed"]),
            rule=Rule.from_dict(d["rule"]) if d.get("rule") else None,
            detail=str(d.get("detail", "")),
            spent=None if d.get("spent") is None else Decimal(str(d["spent"])),
            limit=None if d.get("limit") is None else Decimal(str(d["limit"])),
            level=d.get("level", "ok"),
            window=dict(d.get("window") or {}),
            rules_checked=int(d.get("rules_checked", 0)),
            unavailable=bool(d.get("unavailable", False)),
        )


def _spent(con: duckdb.DuckDBPyConnection, rule: Rule, window: Window, scope: CallScope) -> Decimal:
    own = scope.run_spent_usd if rule.scope.kind in _WHOLE_RUN_SCOPES else None
    if window.kind == "run":
        ledger = Decimal(0)
        if window.trace_id:
            q = measure_query(rule, window)
            row = con.execute(q.sql, q.params).fetchone()
            ledger = Decimal(row[1]) if row else Decimal(0)  # (trace_id, spend, ...)
        return max(ledger, own) if own is not None else ledger
    if scope.trace_id is None:
        own = None  # without the trace id its exported charges cannot be told apart: ledger only
    exclude = scope.trace_id if own is not None else None
    q = measure_query(rule, window, exclude_trace=exclude)
    row = con.execute(q.sql, q.params).fetchone()
    return (Decimal(row[0]) if row else Decimal(0)) + (own or Decimal(0))


def decide(con: duckdb.DuckDBPyConnection, scope: CallScope, now: datetime) -> Decision:
    """Check every enforced rule covering ``scope`` against the ledger."""
    rules = list_rules(con, covering=scope.scope_values(), metric="spend", enabled_only=True)
    statuses: list[tuple[Decimal, Rule, Window, Decimal]] = []
    for rule in rules:
        if rule.window == "run" and not scope.trace_id and scope.run_spent_usd is None:
            continue  # a per-run rule needs to know the run
        window = window_for(rule, now, scope.trace_id or "(this run)")
        spent = _spent(con, rule, window, scope)
        ratio = spent / rule.limit if rule.limit else Decimal(1)
        statuses.append((ratio, rule, window, spent))
    if not statuses:
        return Decision(True, None, "no budget covers this call", rules_checked=0)
    spent_out = [s for s in statuses if s[3] >= s[1].limit]
    ratio, rule, window, spent = max(spent_out or statuses, key=lambda s: s[0])
    where = f"{rule.scope}, {window.key}"
    money = f"{format_money(spent)} of {format_money(rule.limit)}"
    if spent_out:
        detail = f"budget '{rule.name}' ({where}) is spent: {money}"
        return Decision(False, rule, detail, spent, rule.limit, "exceeded", window.to_dict(), len(statuses))
    level = level_for(rule, spent)
    detail = f"within budget: closest is '{rule.name}' ({where}) at {money} ({float(ratio):.0%})"
    return Decision(True, rule, detail, spent, rule.limit, level, window.to_dict(), len(statuses))


class BudgetSource(Protocol):
    def decide(self, scope: CallScope) -> Decision: ...


class LedgerSource:
    """Decides against an embedded ledger; each thread uses its own cursor."""

    def __init__(self, con: duckdb.DuckDBPyConnection, *, clock: Clock = system_clock) -> None:
        self.con, self.clock = con, clock
        self._local = threading.local()

    def decide(self, scope: CallScope) -> Decision:
        cur = getattr(self._local, "cursor", None)
        if cur is None:
            cur = self._local.cursor = self.con.cursor()
        return decide(cur, scope, self.clock())


class BudgetGate:
    """What the harness holds: ``check`` before every model call."""

    def __init__(self, source: BudgetSource) -> None:
        self.source = source

    def check(self, scope: CallScope) -> Decision:
        return self.source.decide(scope)


def check_request(
    con: duckdb.DuckDBPyConnection, payload: Mapping[str, Any] | bytes | str, clock: Clock = system_clock
) -> dict[str, Any]:
    """The server's handler for ``POST /v1/budgets/check``: a CallScope in, a Decision out (JSON-ready).

    Raises :class:`BudgetError` for a malformed body (answer 400 with its message).
    """
    if isinstance(payload, bytes | str):
        try:
            payload = json.loads(payload)
        except ValueError as exc:
            raise BudgetError(f"budget check body is not JSON: {exc}") from None
    if not isinstance(payload, Mapping):
        raise BudgetError(f"budget check body must be a JSON object, got {type(payload).__name__}")
    return decide(con, CallScope.from_dict(payload), clock()).to_dict()
