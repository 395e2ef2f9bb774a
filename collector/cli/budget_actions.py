"""What ``turnledger budget ...`` and ``turnledger alerts`` do (their parsers are in :mod:`.budget`).

On the file, through :mod:`ledger.budgets.service`; with ``--server`` (or
``TURNLEDGER_SERVER`` and no ``--db``), through the running server's API. Both
print the same documents.
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

from collector.client import ServerClient
from ledger.budgets.alerts import format_value
from ledger.budgets.gate import CallScope, decide
from ledger.budgets.governor import Governor
from ledger.budgets.relative import TEMPLATES
from ledger.budgets.rules import BudgetError, Rule, format_metric
from ledger.budgets.service import add_budget as store_budget
from ledger.budgets.service import (
    alerts_doc,
    budget_doc,
    budget_row,
    budget_statuses,
    edit_budget,
    remove_budget,
    rule_from_request,
    sweep_doc,
    target_states,
)
from ledger.budgets.windows import system_clock
from ledger.queries import run as run_query
from ledger.queries import webhook_attempts
from ledger.schema import pending_migrations
from ledger.settings import db_path
from ledger.sources import source_spec
from ledger.store import open_ledger

__all__ = ["run_alerts", "run_budget"]


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str, ensure_ascii=False))


# --- where the ledger is: the file, or a running server ----------------------------------------
def _client(a: argparse.Namespace, *, reading: bool = False) -> ServerClient | None:
    """Through the server ``--server``/TURNLEDGER_SERVER names (``ledger.sources.source_spec``), else None;
    which one is used is announced on stderr, a read in the other read commands' words."""
    spec = source_spec(a.db, a.server)
    where = f"reading {spec.describe()}" if reading else f"writing {spec.describe(reading=False)}"
    print(f"turnledger: {where}", file=sys.stderr)
    return ServerClient(spec.location, spec.token) if spec.kind == "server" else None


def _write(path: Path | None) -> duckdb.DuckDBPyConnection:
    return open_ledger(path)  # a held file: LedgerBusy, saying how to go through the server


def _read(path: Path | None) -> duckdb.DuckDBPyConnection:
    """Read-only, unless the file predates the budget tables' current shape (then migrate it)."""
    con = open_ledger(path, read_only=True)
    if pending_migrations(con):
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


def _relative_request(a: argparse.Namespace) -> dict[str, Any]:
    """What the relative options (or a template, which they override) add to ``budget add``'s request."""
    template = TEMPLATES[a.template] if a.template else None
    to = a.relative_to or (template.to if template else None)
    if to is None:
        for option in ("factor", "candidate", "baseline", "min_runs"):
            if getattr(a, option) is not None:
                raise BudgetError(
                    f"--{option.replace('_', '-')} belongs to a relative rule: add --relative-to or --template"
                )
        return {"limit": a.limit, "window": a.window or "day", "metric": a.metric or "spend"}
    if a.limit is not None:
        raise BudgetError("a relative rule's limit is its --factor, not --limit")
    factor = a.factor if a.factor is not None else (template.factor if template else None)
    if factor is None:
        raise BudgetError("a relative rule needs --factor (e.g. 2: beyond twice the baseline)")
    relative = {"to": to, "candidate": a.candidate, "baseline": a.baseline, "rollback": a.rollback}
    if a.min_runs is not None:
        relative["min_runs"] = a.min_runs
    return {
        "limit": str(factor),
        "window": a.window or (template.window if template else "rolling_hour"),
        "metric": a.metric or (template.metric if template else None),
        "relative": relative,
    }


def _budget_add(a: argparse.Namespace) -> int:
    request = {
        "name": a.name,
        **_relative_request(a),
        "scope": a.scope,
        "soft_fraction": a.soft,
        "timezone": a.tz,
        "webhooks": [{"url": u, "format": "json"} for u in a.webhook]
        + [{"url": u, "format": "slack"} for u in a.slack],
    }
    rule = rule_from_request(request)  # validate here: a bad value never reaches the server or the file
    client = _client(a)
    stored = client.add_budget(request) if client else store_budget(_write(a.db), rule)
    print(f"added {stored['id']}: {stored['description']}")
    if stored.get("warning"):
        print(f"turnledger budget add: warning: {stored['warning']}", file=sys.stderr)
    return 0


def _budget_list(a: argparse.Namespace) -> int:
    client = _client(a, reading=True)
    statuses = client.budgets() if client else budget_statuses(_read(a.db))
    rows = [budget_row(s) for s in statuses]
    if a.json:
        _print_json(rows)
    elif not rows:
        where = client.base_url if client else (a.db or db_path())
        print(f"no budgets in {where}; add one with `turnledger budget add NAME --limit 10 --scope tenant=X`")
    else:
        print(_table(rows, ["id", "name", "metric", "scope", "window", "limit", "value", "level", "projection"]))
    return 0


def _budget_show(a: argparse.Namespace) -> int:
    client = _client(a, reading=True)
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


def _budget_edit(a: argparse.Namespace) -> int:
    options = {
        "limit": a.limit,
        "soft_fraction": a.warn_at,
        "enabled": a.enabled,
        "min_runs": a.min_runs,
        "rollback": a.rollback,
    }
    changes = {k: v for k, v in options.items() if v is not None}
    client = _client(a)
    rule = client.edit_budget(a.budget, changes) if client else edit_budget(_write(a.db), a.budget, changes)
    print(f"edited {rule['id']}: {rule['description']}")
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


def run_budget(a: argparse.Namespace) -> int:
    return {
        "add": _budget_add,
        "edit": _budget_edit,
        "list": _budget_list,
        "show": _budget_show,
        "rm": _budget_rm,
        "check": _budget_check,
        "sweep": _budget_sweep,
    }[a.action](a)


def _fmt(value: Any, metric: str | None = None) -> str:
    """An alert's figure in its rule's unit ($, %, ms, a count); bare when the rule is gone."""
    if value is None:
        return "-"
    amount = Decimal(str(value))
    if metric is not None:
        return format_metric(metric, amount)
    return str(amount.normalize()) if amount == amount.to_integral() else str(amount.quantize(Decimal("0.0001")))


def run_alerts(a: argparse.Namespace) -> int:
    since = a.since.replace(tzinfo=a.since.tzinfo or UTC) if a.since else None
    query = {"budget": a.budget, "level": a.level, "since": since, "limit": a.limit, "deliveries": a.deliveries}
    client = _client(a, reading=True)
    if client is not None:
        alerts, attempts = client.alerts(**query), lambda: client.query("webhook_attempts")
    else:
        con = _read(a.db)
        alerts, attempts = alerts_doc(con, **query), lambda: run_query(con, webhook_attempts())
    if a.json:
        _print_json(alerts)
        return 0
    if alerts:
        _print_alerts(alerts, a.deliveries)
    else:
        print("no alerts", file=sys.stderr)
    # Each target's circuit breaker, replayed from its newest attempts (the same query on either path).
    _print_targets(target_states(attempts().to_dict("records"), datetime.now(UTC)))
    return 0


def _print_alerts(alerts: list[dict[str, Any]], deliveries: bool) -> None:
    for x in alerts:
        name = x["budget"] or f"(removed {x['budget_id']})"
        print(
            f"{_when(x['fired_at']):%Y-%m-%d %H:%M:%S}  {x['level']:<8} {name}  value {_fmt(x['value'], x.get('metric'))} "
            f"threshold {_fmt(x['threshold'], x.get('metric'))}  {x['window_key']}  "
            f"delivered {x['delivered']}/{x['attempts']} attempts  [{x['id'][:12]}]"
        )
        if not deliveries:
            continue
        for d in x["deliveries"]:
            print(
                f"    #{d['attempt']} {_when(d['attempted_at']):%H:%M:%S} {d['status']:<9} {d['target']}  {d['detail']}"
            )


def _print_targets(targets: list[dict[str, Any]]) -> None:
    """Each webhook target's circuit breaker, as its recorded attempts tell it."""
    if not targets:
        return
    print("\nwebhook targets (circuit breaker, from each target's recorded attempts):")
    for t in targets:
        if t["state"] == "open":
            how = f"{t['failures_in_a_row']} failed attempts in a row; next probe in {t['probe_in_s']:g}s"
        elif t["state"] == "half-open":
            how = f"{t['failures_in_a_row']} failed attempts in a row; the next delivery is a probe"
        else:
            how = f"{t['failures_in_a_row']} failed attempt(s) since the last success"
        last = f"; last: {t['last_detail']}" if t["failures_in_a_row"] else ""
        dropped = f"; {t['dropped']} dropped (queue full)" if t["dropped"] else ""
        print(f"  {t['state']:<9} {t['target']}  {how}{last}{dropped}")
