"""Budget operations as JSON-ready documents: one implementation for the CLI, the server and the dashboard.

``turnledger budget ...`` and ``turnledger alerts`` call these on the ledger
file when they open it themselves; while ``turnledger serve`` owns the file
they call the server's routes (:mod:`.routes`, through ``collector.client``),
which call these same functions on the server's connection. Both print the
same documents, so the output does not depend on the path taken. The
dashboard's budgets page shows :func:`budget_statuses` too, so a rule shows
one value and level everywhere: the governor's (:func:`.evaluate.current`, in
the rule's own time zone).

Every value in a document is JSON-native: money and ratios are exact decimal
strings (``"0.85"``), times ISO 8601 in UTC.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import duckdb

from ledger import queries as q

from .alerts import AlertEvent, format_value
from .breaker import replay
from .delivery import DROPPED
from .evaluate import current
from .governor import Governor
from .relative import Relative
from .rules import BudgetError, Rule, Scope, WebhookTarget, decimal_str, parse_money
from .store import (
    add_rule,
    get_rule,
    latest_alerts,
    list_alerts,
    list_deliveries,
    list_rules,
    new_rule_id,
    remove_rule,
    update_rule,
)
from .targets import TargetPolicy, check_new_targets
from .windows import Clock, system_clock

__all__ = [
    "add_budget",
    "alerts_doc",
    "budget_doc",
    "budget_row",
    "budget_statuses",
    "edit_budget",
    "jsonable",
    "remove_budget",
    "rule_from_request",
    "sweep_doc",
    "sweep_result",
    "target_states",
]


def jsonable(value: Any) -> Any:
    """Decimal as an exact string, times as ISO 8601 (naive ledger times are UTC)."""
    if isinstance(value, Decimal):
        return decimal_str(value)
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def _rule_doc(rule: Rule) -> dict[str, Any]:
    return {**rule.to_dict(), "created_at": rule.created_at, "description": rule.describe()}


def budget_statuses(con: duckdb.DuckDBPyConnection, clock: Clock = system_clock) -> list[dict[str, Any]]:
    """Every rule as it stands now: the rule's fields with ``now``, ``alerts_fired`` and ``last_alert``.

    ``now`` is the rule's :class:`~.evaluate.Evaluation` (value, level, window in
    the rule's time zone, projection; None for a per-run rule with no run yet):
    what ``budget list`` prints (:func:`budget_row`), ``GET /api/budgets`` sends
    and the dashboard's budgets page shows.
    """
    now = clock()
    latest = latest_alerts(con)
    out = []
    for rule in list_rules(con):
        ev = current(con, rule, now)
        last = latest.get(rule.id)
        out.append(
            {
                **_rule_doc(rule),
                "now": ev.to_dict() if ev else None,
                "alerts_fired": last["count"] if last else 0,
                "last_alert": {k: v for k, v in last.items() if k != "count"} if last else None,
            }
        )
    return jsonable(out)


def budget_row(status: Mapping[str, Any]) -> dict[str, Any]:
    """One line of ``budget list``: a :func:`budget_statuses` document with its values formatted for people."""
    rule = Rule.from_dict(status)
    ev = status["now"] or {}
    value = ev.get("value")
    return {
        "id": rule.id,
        "name": rule.name,
        "metric": rule.metric,
        "scope": str(rule.scope),
        "window": rule.window,
        "limit": format_value(rule, rule.limit),
        "soft": rule.soft_fraction,
        "value": format_value(rule, None if value is None else Decimal(value)),
        "level": ev.get("level", "ok") if rule.enabled else "disabled",
        "projection": (ev.get("projection") or {}).get("text", ""),
    } | ({"relative": rule.relative.to_dict()} if rule.relative is not None else {})


def budget_doc(con: duckdb.DuckDBPyConnection, id_or_name: str, clock: Clock = system_clock) -> dict[str, Any]:
    """``budget show``: the rule, its figures now (with the projection) and its recent alerts."""
    rule = get_rule(con, id_or_name)
    ev = current(con, rule, clock())
    alerts = list_alerts(con, budget=rule.id, limit=10)
    return jsonable(
        {
            "rule": _rule_doc(rule),
            "now": ev.to_dict() if ev else None,
            "alerts": [{k: v for k, v in x.items() if k != "figures"} for x in alerts],
        }
    )


def rule_from_request(body: Mapping[str, Any]) -> Rule:
    """A new rule from ``{"name", "limit", "scope", "window", "metric", "soft_fraction",
    "timezone", "webhooks": [URL | {"url", "format"}], "relative": {"to", "candidate", "baseline",
    "min_runs", "rollback"}}`` (what ``budget add`` sends; a relative rule's limit is its factor)."""
    if not isinstance(body, Mapping):
        raise BudgetError(f"a budget must be a JSON object, got {type(body).__name__}")
    known = {"name", "limit", "scope", "window", "metric", "soft_fraction", "timezone", "webhooks", "relative"}
    unknown = set(body) - known
    if unknown:
        raise BudgetError(f"unknown budget field(s) {sorted(unknown)!r} (known: {', '.join(sorted(known))})")
    for required in ("name", "limit"):
        if body.get(required) in (None, ""):
            raise BudgetError(f"a budget needs {required!r}")
    hooks = body.get("webhooks") or []
    if not isinstance(hooks, list):
        raise BudgetError(f"webhooks={hooks!r} must be a list")
    webhooks = tuple(
        WebhookTarget.parse(h) if isinstance(h, str) else WebhookTarget(str(h.get("url", "")), h.get("format", "json"))
        for h in hooks
    )
    soft = body.get("soft_fraction")
    try:
        soft_fraction = None if soft is None else float(soft)
    except (TypeError, ValueError):
        raise BudgetError(f"soft_fraction={soft!r} is not a number") from None
    return Rule(
        id=new_rule_id(),
        name=str(body["name"]),
        scope=Scope.parse(str(body.get("scope") or "global")),
        window=str(body.get("window") or "day"),
        limit=parse_money(body["limit"]),
        metric=str(body.get("metric") or "spend"),
        soft_fraction=soft_fraction,
        timezone=str(body.get("timezone") or "UTC"),
        webhooks=webhooks,
        relative=Relative.from_dict(body["relative"]) if body.get("relative") else None,
    )


def add_budget(
    con: duckdb.DuckDBPyConnection, rule: Rule | Mapping[str, Any], policy: TargetPolicy | None = None
) -> dict[str, Any]:
    """Store a new rule whose webhooks ``policy`` allows (default: the settings'); the stored
    rule with its one-line description."""
    rule = rule if isinstance(rule, Rule) else rule_from_request(rule)
    check_new_targets(rule.webhooks, policy or TargetPolicy.from_settings())
    stored = add_rule(con, rule)
    doc = jsonable(_rule_doc(stored))
    if unseen := _unseen_scope(con, rule.scope):
        doc["warning"] = unseen
    return doc


def _unseen_scope(con: duckdb.DuckDBPyConnection, scope: Scope) -> str:
    """Why the scope names nothing seen yet ("" when it does, or when its kind is no filter dimension).

    Accepted all the same (a rule may come before its first run), but a typo is the likelier case."""
    if scope.kind not in ("tenant", "agent", "model") or scope.value is None:
        return ""
    try:
        q.check_values({scope.kind: scope.value}, q.records(con, q.filter_options()))
    except q.UnknownFilterValue as exc:
        return f"{exc}. The rule is kept, and counts from the first run that has it."
    return ""


EDITABLE = ("limit", "soft_fraction", "enabled", "min_runs", "rollback")
"""What ``budget edit`` may change (the last two: a relative rule's); a rule's scope, window, metric and
versions define it (remove and add instead)."""
_RELATIVE_EDITS = ("min_runs", "rollback")


def edit_budget(con: duckdb.DuckDBPyConnection, id_or_name: str, changes: Mapping[str, Any]) -> dict[str, Any]:
    """Change a rule's limit, warn fraction (``soft_fraction``) or ``enabled`` switch; the stored rule.

    Checked as a new rule would be (a rate's limit within 0..1, the fraction in (0, 1]). The
    governor judges the rule by its new figures from its next evaluation; its alerts stay."""
    if not isinstance(changes, Mapping):
        raise BudgetError(f"an edit must be a JSON object, got {type(changes).__name__}")
    unknown = set(changes) - set(EDITABLE)
    if unknown:
        raise BudgetError(f"cannot edit {sorted(unknown)!r} (editable: {', '.join(EDITABLE)})")
    if not changes:
        raise BudgetError(f"nothing to edit: give one of {', '.join(EDITABLE)}")
    rule = get_rule(con, id_or_name)
    enabled = changes.get("enabled", rule.enabled)
    if not isinstance(enabled, bool):
        raise BudgetError(f"enabled={enabled!r} must be true or false")
    soft = changes.get("soft_fraction", rule.soft_fraction)
    try:
        soft_fraction = float(soft) if soft is not None else None
    except (TypeError, ValueError):
        raise BudgetError(f"soft_fraction={soft!r} is not a number") from None
    edited = replace(
        rule,
        limit=parse_money(changes["limit"]) if "limit" in changes else rule.limit,
        soft_fraction=soft_fraction,
        enabled=enabled,
        relative=_edited_relative(rule, changes),
        new=False,  # its name was checked when it was added
    )
    return jsonable(_rule_doc(update_rule(con, edited)))


def _edited_relative(rule: Rule, changes: Mapping[str, Any]) -> Relative | None:
    """A relative rule's minimum runs and rollback text, changed as asked (any other rule has neither)."""
    asked = {k: changes[k] for k in _RELATIVE_EDITS if k in changes}
    if not asked:
        return rule.relative
    if rule.relative is None:
        raise BudgetError(f"{' and '.join(asked)}: only a relative rule (--relative-to) has them")
    return Relative.from_dict({**rule.relative.to_dict(), **asked})


def remove_budget(con: duckdb.DuckDBPyConnection, id_or_name: str) -> dict[str, Any]:
    rule = remove_rule(con, id_or_name)
    return {**rule.to_dict(), "description": rule.describe()}


MAX_ALERTS_LISTED = 10_000  # alerts in one answer: page with since= for more


def alerts_doc(
    con: duckdb.DuckDBPyConnection,
    *,
    budget: str | None = None,
    level: str | None = None,
    since: datetime | None = None,
    limit: int = 50,
    deliveries: bool = False,
) -> list[dict[str, Any]]:
    """``alerts``: newest first; with ``deliveries`` each carries its delivery attempts."""
    if level is not None and level not in ("ok", "warn", "exceeded"):
        raise BudgetError(f"level={level!r}: choose ok, warn or exceeded")
    if not 1 <= limit <= MAX_ALERTS_LISTED:  # a bigger int than DuckDB's BIGINT was a 500
        raise BudgetError(f"limit={limit!r} must be between 1 and {MAX_ALERTS_LISTED:,}")
    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    alerts = list_alerts(con, budget=budget, level=level, since=since, limit=limit)
    if deliveries:
        by_alert: dict[str, list[dict[str, Any]]] = {}
        if alerts:
            for d in list_deliveries(con, [x["id"] for x in alerts]):
                by_alert.setdefault(d["alert_id"], []).append(d)
        alerts = [{**x, "deliveries": by_alert.get(x["id"], [])} for x in alerts]
    return jsonable(alerts)


def target_states(attempts: Iterable[Mapping[str, Any]], now: datetime) -> list[dict[str, Any]]:
    """Each webhook target's circuit breaker, replayed from its delivery attempts (rows of the
    ``webhook_attempts`` query): the state the delivering server holds, as far as its recorded
    attempts tell. Most troubled first."""
    by_target: dict[str, list[Mapping[str, Any]]] = {}
    for d in attempts:
        by_target.setdefault(d["target"], []).append(d)
    out = []
    for target, rows in by_target.items():
        tried = sorted(
            ((_instant(d["attempted_at"]), int(d["attempt"]), d) for d in rows if d["status"] != DROPPED),
            key=lambda t: t[:2],
        )
        breaker = replay((d["status"] == "delivered", at, str(d["detail"] or "")) for at, _, d in tried)
        doc = {"target": target, **breaker.to_dict(now.timestamp())}
        out.append({**doc, "dropped": sum(d["status"] == DROPPED for d in rows)})
    rank = {"open": 0, "half-open": 1, "closed": 2}
    return sorted(out, key=lambda t: (rank[t["state"]], -t["failures_in_a_row"], t["target"]))


def _instant(value: datetime | str) -> float:
    """Seconds since the epoch of a stored (naive UTC) or JSON (ISO) attempt time."""
    at = datetime.fromisoformat(value) if isinstance(value, str) else value  # a pandas Timestamp is a datetime
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()


def sweep_doc(governor: Governor, con: duckdb.DuckDBPyConnection, wait: float = 10.0) -> dict[str, Any]:
    """``budget sweep``: evaluate every rule now, alert, and wait up to ``wait`` s for the webhooks."""
    return sweep_result(governor, governor.sweep(con), wait)


def sweep_result(governor: Governor, events: list[AlertEvent], wait: float) -> dict[str, Any]:
    """The alerts a sweep fired, once their webhooks are done or ``wait`` s have passed."""
    delivered = governor.join(wait) if wait > 0 else not events
    return {"alerts": [e.to_dict() for e in events], "delivered": delivered, "wait": wait}
