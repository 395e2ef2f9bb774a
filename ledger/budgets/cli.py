"""``turnledger budget add|list|show|rm|check|sweep`` and ``turnledger alerts``.

Plugged into ``collector.cli`` (it calls ``add_budget``/``cmd_budget`` and
``add_alerts``/``cmd_alerts``). Every command takes ``--db``. Reading commands
open the file read-only; writing ones need it free.

While ``turnledger serve`` runs it owns the file (DuckDB allows one writing
process, and no reader beside it). With ``TURNLEDGER_SERVER`` set (and no
``--db``), every command goes through the server's API instead
(:class:`~.client.BudgetClient`); without it, a held file is an error that
says so. Both paths print the same documents (:mod:`.service`).
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

from ledger.errors import TurnledgerError
from ledger.schema import MIGRATIONS, schema_version
from ledger.settings import db_path, server_url
from ledger.store import open_ledger

from .alerts import format_value
from .client import BudgetClient
from .gate import CallScope, decide
from .governor import Governor
from .rules import METRICS, WINDOWS, Rule
from .service import add_budget as store_budget
from .service import alerts_doc, budget_doc, budget_rows, remove_budget, rule_from_request, sweep_doc
from .windows import system_clock

__all__ = ["add_alerts", "add_budget", "cmd_alerts", "cmd_budget"]


def _db(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db",
        type=Path,
        default=None,
        help="ledger file (default: $TURNLEDGER_DB or ./turnledger.duckdb); without --db and with "
        "$TURNLEDGER_SERVER set, the running server's API is used instead",
    )


def _json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine-readable output")


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


# --- where the ledger is: the file, or a running server ----------------------------------------
def _client(a: argparse.Namespace) -> BudgetClient | None:
    """Through the server when ``TURNLEDGER_SERVER`` is set and no ``--db`` was given."""
    url = server_url()
    return BudgetClient(url) if url and a.db is None else None


def _held(path: Path | None, exc: TurnledgerError) -> TurnledgerError:
    """A clearer message when a running ``turnledger serve`` holds the file's lock."""
    if "lock" not in str(exc).lower():
        return exc
    return TurnledgerError(
        f"the ledger {str(path or db_path())!r} is held by a running `turnledger serve` (DuckDB allows one "
        "writing process). Either stop the server, or go through its API: set TURNLEDGER_SERVER to its URL "
        "(e.g. TURNLEDGER_SERVER=http://127.0.0.1:4318) and run this command again without --db."
    )


def _write(path: Path | None) -> duckdb.DuckDBPyConnection:
    try:
        return open_ledger(path)
    except TurnledgerError as exc:
        raise _held(path, exc) from None


def _read(path: Path | None) -> duckdb.DuckDBPyConnection:
    """Read-only, unless the file predates the budget tables' current shape (then migrate it)."""
    try:
        con = open_ledger(path, read_only=True)
    except TurnledgerError as exc:
        raise _held(path, exc) from None
    if schema_version(con) < MIGRATIONS[-1][0]:
        con.close()
        con = _write(path)
    return con


def _table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in columns}
    lines = ["  ".join(c.upper().ljust(widths[c]) for c in columns)]
    lines += ["  ".join(str(r[c]).ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


def _when(iso: str) -> datetime:
    return datetime.fromisoformat(iso)


def _budget_add(a: argparse.Namespace) -> int:
    request = {
        "name": a.name,
        "limit": a.limit,
        "scope": a.scope,
        "window": a.window,
        "metric": a.metric,
        "soft_fraction": a.soft,
        "timezone": a.tz,
        "webhooks": [{"url": u, "format": "json"} for u in a.webhook]
        + [{"url": u, "format": "slack"} for u in a.slack],
    }
    rule = rule_from_request(request)  # validate here: a bad value never reaches the server or the file
    client = _client(a)
    stored = client.add_budget(request) if client else store_budget(_write(a.db), rule)
    print(f"added {stored['id']}: {stored['description']}")
    return 0


def _budget_list(a: argparse.Namespace) -> int:
    client = _client(a)
    rows = client.budgets() if client else budget_rows(_read(a.db))
    if a.json:
        _print_json(rows)
    elif not rows:
        where = client.base_url if client else (a.db or db_path())
        print(f"no budgets in {where}; add one with `turnledger budget add NAME --limit 10 --scope tenant=X`")
    else:
        print(_table(rows, ["id", "name", "metric", "scope", "window", "limit", "value", "level", "projection"]))
    return 0


def _budget_show(a: argparse.Namespace) -> int:
    client = _client(a)
    doc = client.budget(a.budget) if client else budget_doc(_read(a.db), a.budget)
    if a.json:
        _print_json(doc)
        return 0
    r = doc["rule"]
    rule = Rule.from_dict(r)
    print(r.get("description") or rule.describe())
    print(f"  id {r['id']}, soft {r['soft_fraction']}, time zone {r['timezone']}, created {r.get('created_at')}")
    print(f"  webhooks: {', '.join(r.get('webhooks') or []) or '(none on the rule)'}")
    now = doc["now"]
    if now is None:
        print("  no run in scope yet")
    else:
        value = Decimal(now["value"]) if now["value"] is not None else None
        print(f"  window {now['window']['key']}: {format_value(rule, value)} -> {now['level']}")
        if now.get("projection"):
            print(f"  projection: {now['projection']['text']}")
    for x in doc["alerts"]:
        value = Decimal(x["value"]) if x["value"] is not None else None
        print(
            f"  {_when(x['fired_at']):%Y-%m-%d %H:%M:%S} {x['level']:<8} {format_value(rule, value)} "
            f"({x['window_key']}) delivered {x['delivered']}/{x['attempts']} attempts"
        )
    return 0


def _budget_rm(a: argparse.Namespace) -> int:
    client = _client(a)
    rule = client.remove_budget(a.budget) if client else remove_budget(_write(a.db), a.budget)
    print(f"removed {rule['id']}: {rule['description']}")
    return 0


def _budget_check(a: argparse.Namespace) -> int:
    scope = CallScope(a.tenant, a.agent, a.model, a.call_site, a.trace)
    client = _client(a)
    doc = client.check(scope) if client else decide(_read(a.db), scope, system_clock()).to_dict()
    if a.json:
        _print_json(doc)
    else:
        print(("allowed: " if doc["allowed"] else "REFUSED: ") + doc["detail"])
    return 0 if doc["allowed"] else 1


def _budget_sweep(a: argparse.Namespace) -> int:
    client = _client(a)
    if client:
        doc = client.sweep(a.wait)
    else:
        con = _write(a.db)
        governor = Governor()
        try:
            doc = sweep_doc(governor, con, a.wait)
        finally:
            governor.close()
    for alert in doc["alerts"]:
        print(alert["text"])
    n = len(doc["alerts"])
    print(f"{n} alert(s)" + ("" if doc["delivered"] else f"; some deliveries still pending after {a.wait:g}s"))
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
    if value is None:
        return "-"
    amount = Decimal(str(value))
    return str(amount.normalize()) if amount == amount.to_integral() else str(amount.quantize(Decimal("0.0001")))


def cmd_alerts(a: argparse.Namespace) -> int:
    since = a.since.replace(tzinfo=a.since.tzinfo or UTC) if a.since else None
    query = {"budget": a.budget, "level": a.level, "since": since, "limit": a.limit, "deliveries": a.deliveries}
    client = _client(a)
    alerts = client.alerts(**query) if client else alerts_doc(_read(a.db), **query)
    if a.json:
        _print_json(alerts)
        return 0
    if not alerts:
        print("no alerts", file=sys.stderr)
        return 0
    for x in alerts:
        name = x["budget"] or f"(removed {x['budget_id']})"
        print(
            f"{_when(x['fired_at']):%Y-%m-%d %H:%M:%S}  {x['level']:<8} {name}  value {_fmt(x['value'])} "
            f"threshold {_fmt(x['threshold'])}  {x['window_key']}  "
            f"delivered {x['delivered']}/{x['attempts']} attempts  [{x['id'][:12]}]"
        )
        for d in x.get("deliveries", []):
            print(
                f"    #{d['attempt']} {_when(d['attempted_at']):%H:%M:%S} {d['status']:<9} {d['target']}  {d['detail']}"
            )
    return 0
