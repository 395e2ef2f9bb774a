"""``turnledger budget add|list|show|rm|check|sweep`` and ``turnledger alerts``.

Plugged into ``collector.cli`` (it calls ``add_budget``/``cmd_budget`` and
``add_alerts``/``cmd_alerts``). Every command takes ``--db``. Reading commands
open the file read-only; writing ones need it free (stop ``turnledger serve``
first: it owns the file while it runs).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb

from ledger.schema import MIGRATIONS, schema_version
from ledger.settings import db_path
from ledger.store import open_ledger

from .alerts import format_value
from .evaluate import Evaluation, current
from .gate import CallScope, decide
from .governor import Governor
from .rules import METRICS, WINDOWS, Rule, Scope, WebhookTarget, parse_money
from .store import add_rule, get_rule, list_alerts, list_deliveries, list_rules, new_rule_id, remove_rule
from .windows import system_clock

__all__ = ["add_alerts", "add_budget", "cmd_alerts", "cmd_budget"]


def _db(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", type=Path, default=None, help="ledger file (default: $TURNLEDGER_DB or ./turnledger.duckdb)")


def _json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _read(path: Path | None) -> duckdb.DuckDBPyConnection:
    """Read-only, unless the file predates the budget tables' current shape (then migrate it)."""
    con = open_ledger(path, read_only=True)
    if schema_version(con) < MIGRATIONS[-1][0]:
        con.close()
        con = open_ledger(path)
    return con


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str, ensure_ascii=False))


# --- budget ----------------------------------------------------------------------------------
def add_budget(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    a = sub.add_parser("add", help="add a budget (spend) or metric rule", description="Add a budget or metric rule.")
    a.add_argument("name", help="a unique name, e.g. acme-daily")
    a.add_argument("--limit", required=True, help="USD for spend and cost metrics; 0..1 for rates and the cache floor")
    a.add_argument(
        "--scope", default="global", help="global (default), or tenant=X, agent=X, model=X, call_site=X, run=TRACE_ID"
    )
    a.add_argument("--window", default="day", choices=WINDOWS, help="default: day (calendar day in --tz)")
    a.add_argument("--metric", default="spend", choices=list(METRICS), help="default: spend (the USD budget)")
    a.add_argument(
        "--soft", type=float, default=None, help="warn at this fraction of the limit (default 0.8; 1 = no warning)"
    )
    a.add_argument("--tz", default="UTC", help="time zone of calendar windows (IANA name, default UTC)")
    a.add_argument("--webhook", action="append", default=[], metavar="URL", help="POST the JSON alert here (repeat)")
    a.add_argument(
        "--slack", action="append", default=[], metavar="URL", help="POST a Slack {text} alert here (repeat)"
    )
    _db(a)

    ls = sub.add_parser("list", help="every rule with its current value and level")
    _json_flag(ls)
    _db(ls)

    sh = sub.add_parser("show", help="one rule: figures, projection and recent alerts")
    sh.add_argument("budget", metavar="NAME_OR_ID")
    _json_flag(sh)
    _db(sh)

    rm = sub.add_parser("rm", help="remove a rule (its alert history stays)")
    rm.add_argument("budget", metavar="NAME_OR_ID")
    _db(rm)

    ck = sub.add_parser(
        "check",
        help="would a model call in this scope be allowed? (exit 1 if refused)",
        description="Ask the gate the harness asks before each model call. Exit status 1 when refused.",
    )
    for name in ("tenant", "agent", "model", "call-site", "trace"):
        ck.add_argument(f"--{name}", default=None)
    _json_flag(ck)
    _db(ck)

    sw = sub.add_parser(
        "sweep",
        help="evaluate every rule now, record alerts and send webhooks (what the server does periodically)",
    )
    sw.add_argument("--wait", type=float, default=10.0, help="seconds to wait for webhook deliveries (default 10)")
    _db(sw)


def _status_row(rule: Rule, ev: Evaluation | None) -> dict[str, Any]:
    return {
        "id": rule.id,
        "name": rule.name,
        "metric": rule.metric,
        "scope": str(rule.scope),
        "window": rule.window,
        "limit": format_value(rule, rule.limit),
        "soft": rule.soft_fraction,
        "value": format_value(rule, ev.value) if ev else "no data",
        "level": ev.level if ev else "ok",
        "projection": ev.projection.describe() if ev and ev.projection else "",
    }


def _table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in columns}
    lines = ["  ".join(c.upper().ljust(widths[c]) for c in columns)]
    lines += ["  ".join(str(r[c]).ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


def _budget_add(a: argparse.Namespace) -> int:
    webhooks = tuple(WebhookTarget(u) for u in a.webhook) + tuple(WebhookTarget(u, "slack") for u in a.slack)
    rule = Rule(
        id=new_rule_id(),
        name=a.name,
        scope=Scope.parse(a.scope),
        window=a.window,
        limit=parse_money(a.limit),
        metric=a.metric,
        soft_fraction=a.soft,
        timezone=a.tz,
        webhooks=webhooks,
    )
    con = open_ledger(a.db)
    stored = add_rule(con, rule)
    print(f"added {stored.id}: {stored.describe()}")
    return 0


def _budget_list(a: argparse.Namespace) -> int:
    con = _read(a.db)
    now = system_clock()
    rows = [_status_row(r, current(con, r, now)) for r in list_rules(con)]
    if a.json:
        _print_json(rows)
    elif not rows:
        print(
            f"no budgets in {a.db or db_path()}; add one with `turnledger budget add NAME --limit 10 --scope tenant=X`"
        )
    else:
        print(_table(rows, ["id", "name", "metric", "scope", "window", "limit", "value", "level", "projection"]))
    return 0


def _budget_show(a: argparse.Namespace) -> int:
    con = _read(a.db)
    rule = get_rule(con, a.budget)
    ev = current(con, rule, system_clock())
    alerts = list_alerts(con, budget=rule.id, limit=10)
    doc = {
        "rule": {**rule.to_dict(), "created_at": rule.created_at},
        "now": ev.to_dict() if ev else None,
        "alerts": [{k: v for k, v in x.items() if k != "figures"} for x in alerts],
    }
    if a.json:
        _print_json(doc)
        return 0
    print(rule.describe())
    print(f"  id {rule.id}, soft {rule.soft_fraction}, time zone {rule.timezone}, created {rule.created_at}")
    print(f"  webhooks: {', '.join(w.label for w in rule.webhooks) or '(none on the rule)'}")
    if ev is None:
        print("  no run in scope yet")
    else:
        print(f"  window {ev.window.key}: {format_value(rule, ev.value)} -> {ev.level}")
        if ev.projection:
            print(f"  projection: {ev.projection.describe()}")
    for x in alerts:
        print(
            f"  {x['fired_at']:%Y-%m-%d %H:%M:%S} {x['level']:<8} {format_value(rule, x['value'])} "
            f"({x['window_key']}) delivered {x['delivered']}/{x['attempts']} attempts"
        )
    return 0


def _budget_rm(a: argparse.Namespace) -> int:
    con = open_ledger(a.db)
    rule = remove_rule(con, a.budget)
    print(f"removed {rule.id}: {rule.describe()}")
    return 0


def _budget_check(a: argparse.Namespace) -> int:
    con = _read(a.db)
    scope = CallScope(a.tenant, a.agent, a.model, a.call_site, a.trace)
    decision = decide(con, scope, system_clock())
    if a.json:
        _print_json(decision.to_dict())
    else:
        print(("allowed: " if decision.allowed else "REFUSED: ") + decision.detail)
    return 0 if decision.allowed else 1


def _budget_sweep(a: argparse.Namespace) -> int:
    con = open_ledger(a.db)
    governor = Governor()
    try:
        events = governor.sweep(con)
        for e in events:
            print(e.text())
        delivered = governor.join(a.wait)
    finally:
        governor.close()
    print(f"{len(events)} alert(s)" + ("" if delivered else f"; some deliveries still pending after {a.wait:g}s"))
    return 0


def cmd_budget(a: argparse.Namespace) -> int:
    return {
        "add": _budget_add,
        "list": _budget_list,
        "show": _budget_show,
        "rm": _budget_rm,
        "check": _budget_check,
        "sweep": _budget_sweep,
    }[a.action](a)


# --- alerts ----------------------------------------------------------------------------------
def add_alerts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--budget", default=None, metavar="NAME_OR_ID", help="only this rule's alerts")
    p.add_argument("--level", default=None, choices=("ok", "warn", "exceeded"))
    p.add_argument("--since", type=datetime.fromisoformat, default=None, help="fired at or after (ISO time, UTC)")
    p.add_argument("--limit", type=int, default=50, help="newest N (default 50)")
    p.add_argument("--deliveries", action="store_true", help="list every delivery attempt under each alert")
    _json_flag(p)
    _db(p)


def _fmt(value: Any) -> str:
    if isinstance(value, Decimal):
        return str(value.normalize()) if value == value.to_integral() else str(value.quantize(Decimal("0.0001")))
    return "-" if value is None else str(value)


def cmd_alerts(a: argparse.Namespace) -> int:
    con = _read(a.db)
    since = a.since.replace(tzinfo=a.since.tzinfo or UTC) if a.since else None
    alerts = list_alerts(con, budget=a.budget, level=a.level, since=since, limit=a.limit)
    deliveries: dict[str, list[dict[str, Any]]] = {}
    if a.deliveries and alerts:
        for d in list_deliveries(con, [x["id"] for x in alerts]):
            deliveries.setdefault(d["alert_id"], []).append(d)
    if a.json:
        _print_json([{**x, "deliveries": deliveries.get(x["id"], [])} if a.deliveries else x for x in alerts])
        return 0
    if not alerts:
        print("no alerts", file=sys.stderr)
        return 0
    for x in alerts:
        name = x["budget"] or f"(removed {x['budget_id']})"
        print(
            f"{x['fired_at']:%Y-%m-%d %H:%M:%S}  {x['level']:<8} {name}  value {_fmt(x['value'])} "
            f"threshold {_fmt(x['threshold'])}  {x['window_key']}  "
            f"delivered {x['delivered']}/{x['attempts']} attempts  [{x['id'][:12]}]"
        )
        for d in deliveries.get(x["id"], []):
            print(f"    #{d['attempt']} {d['attempted_at']:%H:%M:%S} {d['status']:<9} {d['target']}  {d['detail']}")
    return 0
