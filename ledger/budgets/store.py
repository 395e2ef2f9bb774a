"""Rules, alert events and delivery attempts in the ledger's tables.

Values are always bound. Timestamps are stored as naive UTC (the ledger's
convention); money as DECIMAL. A rule is addressed by its id or its name.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import duckdb

from .. import lake
from .relative import Relative
from .rules import LEVELS, BudgetError, Rule, Scope, ScopeValues, UnknownBudget, WebhookTarget, covers
from .windows import naive_utc

if TYPE_CHECKING:
    from .alerts import AlertEvent
    from .delivery import DeliveryAttempt

__all__ = [
    "add_rule",
    "alert_history",
    "get_rule",
    "has_rules",
    "insert_alerts",
    "insert_attempts",
    "latest_alerts",
    "list_alerts",
    "list_deliveries",
    "list_rules",
    "new_rule_id",
    "remove_rule",
    "update_rule",
]

_RULE_COLUMNS = (
    "id, name, scope_kind, scope_value, time_window, metric, limit_value, soft_fraction, created_at, timezone, webhooks, "
    "enabled, relative"
)


def new_rule_id() -> str:
    return "b_" + uuid.uuid4().hex[:10]


def _rule(row: Sequence[Any]) -> Rule:
    rid, name, kind, value, window, metric, limit, soft, created, tz, hooks, enabled, relative = row
    return Rule(
        id=rid,
        name=name,
        scope=Scope(kind, value),
        window=window,
        limit=Decimal(limit),
        metric=metric,
        soft_fraction=soft,
        timezone=tz or "UTC",
        webhooks=tuple(WebhookTarget(h["url"], h.get("format", "json")) for h in json.loads(hooks or "[]")),
        enabled=enabled is not False,
        relative=Relative.from_dict(json.loads(relative)) if relative else None,
        created_at=created.replace(tzinfo=UTC) if created else None,
        new=False,
    )


def list_rules(
    con: duckdb.DuckDBPyConnection,
    *,
    covering: ScopeValues | None = None,
    metric: str | None = None,
    enabled_only: bool = False,
) -> list[Rule]:
    """Every rule, or only those that :func:`~.rules.covers` ``covering``
    (``{"tenant": ["acme"], "model": [...]}``), or only enabled ones (what the governor
    and the gate judge). The table is narrowed in SQL first,
    so a ledger with many tenants' rules costs no more to check than one with a few."""
    where, params = ["TRUE"], []
    if enabled_only:
        where.append("enabled")
    if covering is not None:
        clauses = ["scope_kind = 'global'"]
        for kind, values in sorted(covering.items()):
            wanted = sorted({v for v in values if v is not None})
            if wanted:
                clauses.append("(scope_kind = ? AND list_contains(?::VARCHAR[], scope_value))")
                params += [kind, wanted]
        where.append(f"({' OR '.join(clauses)})")
    if metric is not None:
        where.append("metric = ?")
        params.append(metric)
    rows = con.execute(
        f"SELECT {_RULE_COLUMNS} FROM budgets WHERE {' AND '.join(where)} ORDER BY created_at, name", params
    ).fetchall()
    rules = [_rule(r) for r in rows]
    return rules if covering is None else [r for r in rules if covers(r, covering)]


def has_rules(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether any budget exists (without one, nothing after an ingest needs measuring)."""
    return con.execute("SELECT 1 FROM budgets LIMIT 1").fetchone() is not None


def get_rule(con: duckdb.DuckDBPyConnection, id_or_name: str) -> Rule:
    rows = con.execute(
        f"SELECT {_RULE_COLUMNS} FROM budgets WHERE id = ? OR name = ? ORDER BY id = ? DESC LIMIT 1",
        [id_or_name, id_or_name, id_or_name],
    ).fetchall()
    if not rows:
        raise UnknownBudget(f"no budget with id or name {id_or_name!r} (see `turnledger budget list`)")
    return _rule(rows[0])


def add_rule(con: duckdb.DuckDBPyConnection, rule: Rule, *, now: datetime | None = None) -> Rule:
    """Store a new rule; names are unique so people can address rules by name."""
    taken = con.execute("SELECT id FROM budgets WHERE name = ? OR id = ?", [rule.name, rule.id]).fetchone()
    if taken:
        raise BudgetError(f"a budget named {rule.name!r} (or with id {rule.id!r}) already exists: {taken[0]}")
    created = rule.created_at or now or datetime.now(UTC)
    con.execute(
        f"INSERT INTO budgets ({_RULE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            rule.id,
            rule.name,
            rule.scope.kind,
            rule.scope.value,
            rule.window,
            rule.metric,
            rule.limit,
            rule.soft_fraction,
            naive_utc(created),
            rule.timezone,
            json.dumps([w.to_dict() for w in rule.webhooks]),
            rule.enabled,
            _relative_json(rule),
        ],
    )
    return get_rule(con, rule.id)


def _relative_json(rule: Rule) -> str | None:
    return json.dumps(rule.relative.to_dict()) if rule.relative is not None else None


def update_rule(con: duckdb.DuckDBPyConnection, rule: Rule) -> Rule:
    """Store an edited rule's limit, warn fraction, switch and relative settings (its id, name, scope, window
    and metric stay)."""
    con.execute(
        "UPDATE budgets SET limit_value = ?, soft_fraction = ?, enabled = ?, relative = ? WHERE id = ?",
        [rule.limit, rule.soft_fraction, rule.enabled, _relative_json(rule), rule.id],
    )
    return get_rule(con, rule.id)


def remove_rule(con: duckdb.DuckDBPyConnection, id_or_name: str) -> Rule:
    """Delete a rule; its alerts and deliveries stay as history."""
    rule = get_rule(con, id_or_name)
    con.execute("DELETE FROM budgets WHERE id = ?", [rule.id])
    return rule


# --- alerts ---------------------------------------------------------------------------------
def _json(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


_ALERT_COLUMNS = (
    "id, budget_id, level, window_start, fired_at, value, figures, state_key, window_key, window_end, "
    "previous_level, threshold"
)


def insert_alerts(con: duckdb.DuckDBPyConnection, events: Sequence[AlertEvent]) -> None:
    """All in one statement (a storm of runs can fire many at once)."""
    if not events:
        return
    params: list[Any] = []
    for e in events:
        w = e.window
        params += [
            e.id,
            e.rule.id,
            e.level,
            naive_utc(w.start) if w.start else None,
            naive_utc(e.fired_at),
            e.value,
            _json(e.figures),
            e.state_key,
            e.window_key,
            naive_utc(w.end) if w.end else None,
            e.previous_level,
            e.threshold,
        ]
    row = "(?, ?, ?, ?, ?, ?::DECIMAL(38, 12), ?, ?, ?, ?, ?, ?::DECIMAL(38, 12))"
    con.execute(f"INSERT INTO alerts ({_ALERT_COLUMNS}) VALUES {', '.join([row] * len(events))}", params)


def alert_history(
    con: duckdb.DuckDBPyConnection, budget_id: str, state_keys: Iterable[str]
) -> dict[str, list[tuple[str, str | None]]]:
    """(level, window_key) of a rule's alerts per state key, newest first (one query)."""
    keys = sorted(set(state_keys))
    out: dict[str, list[tuple[str, str | None]]] = {k: [] for k in keys}
    if not keys:
        return out
    rows = con.execute(
        "SELECT state_key, level, window_key FROM alerts WHERE budget_id = ? AND list_contains(?::VARCHAR[], state_key) "
        "ORDER BY fired_at DESC, rowid DESC",
        [budget_id, keys],
    ).fetchall()
    for key, level, window_key in rows:
        out[key].append((str(level), window_key))
    return out


def latest_alerts(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    """Per rule id: its latest alert's level, time and value, and how many alerts it fired."""
    # Alerts of one evaluation share their time (warn and exceeded when one batch crosses both lines):
    # the more severe is the latest, as the governor's level is.
    severity = "list_position([" + ", ".join(f"'{level}'" for level in LEVELS) + "], level)"
    latest = f"struct_pack(t := fired_at, s := {severity})"
    rows = con.execute(
        f"SELECT budget_id, arg_max(level, {latest}), max(fired_at), arg_max(value, {latest}), count(*) "
        "FROM alerts GROUP BY budget_id"
    ).fetchall()
    return {str(b): {"level": lv, "fired_at": at, "value": v, "count": int(n)} for b, lv, at, v, n in rows}


def list_alerts(
    con: duckdb.DuckDBPyConnection,
    *,
    budget: str | None = None,
    level: str | None = None,
    since: datetime | None = None,
    limit: int = 50,
) -> list[dict[str, Any]]:
    """Newest first, with the rule's name (when the rule still exists) and delivery summary."""
    where: list[str] = ["TRUE"]
    params: list[Any] = []
    if budget is not None:
        where.append("(a.budget_id = ? OR b.name = ?)")
        params += [budget, budget]
    if level is not None:
        where.append("a.level = ?")
        params.append(level)
    if since is not None:
        where.append("a.fired_at >= ?")
        params.append(naive_utc(since) if since.tzinfo else since)
    cur = con.execute(
        f"""SELECT a.id, a.fired_at, a.budget_id, b.name AS budget, b.metric, a.level, a.previous_level, a.value, a.threshold,
       a.window_key, a.window_start, a.window_end, a.state_key, a.figures,
       (SELECT count(*) FROM alert_deliveries d WHERE d.alert_id = a.id) AS attempts,
       (SELECT count(*) FROM alert_deliveries d WHERE d.alert_id = a.id AND d.status = 'delivered') AS delivered
FROM alerts a LEFT JOIN budgets b ON b.id = a.budget_id
WHERE {" AND ".join(where)} ORDER BY a.fired_at DESC, a.rowid DESC LIMIT ?""",
        [*params, int(limit)],
    )
    names = [d[0] for d in cur.description]
    out = []
    for row in cur.fetchall():
        rec = dict(zip(names, row, strict=True))
        rec["figures"] = json.loads(rec["figures"]) if rec["figures"] else {}
        out.append(rec)
    return out


# --- deliveries -----------------------------------------------------------------------------
_DELIVERY_COLUMNS = ("alert_id", "attempt", "target", "attempted_at", "status", "detail", "http_status", "latency_ms")


def insert_attempts(con: duckdb.DuckDBPyConnection, attempts: Sequence[DeliveryAttempt]) -> None:
    """All in one statement: attempts are recorded in small batches, off the ingest path."""
    if not attempts:
        return
    params: list[Any] = []
    for a in attempts:
        params += [
            a.alert_id,
            a.attempt,
            a.target.label,
            naive_utc(a.attempted_at),
            a.status,
            a.detail,
            a.http_status,
            a.latency_ms,
        ]
    values = ", ".join(["(?, ?, ?, ?, ?, ?, ?::INTEGER, ?::DOUBLE)"] * len(attempts))
    if lake.is_lake(con):  # no key there: merged by (alert_id, target, attempt)
        con.execute(lake.upsert("alert_deliveries", _DELIVERY_COLUMNS, f"VALUES {values}"), params)
        return
    con.execute(f"INSERT OR REPLACE INTO alert_deliveries ({', '.join(_DELIVERY_COLUMNS)}) VALUES {values}", params)


def list_deliveries(con: duckdb.DuckDBPyConnection, alert_ids: Iterable[str] | None = None) -> list[dict[str, Any]]:
    params: list[Any] = []
    where = "TRUE"
    if alert_ids is not None:
        where = "list_contains(?::VARCHAR[], alert_id)"
        params.append(sorted(set(alert_ids)))
    cur = con.execute(
        "SELECT alert_id, target, attempt, attempted_at, status, http_status, latency_ms, detail "
        f"FROM alert_deliveries WHERE {where} ORDER BY alert_id, target, attempt",
        params,
    )
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
