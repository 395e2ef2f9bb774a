"""``turnledger budget add|edit|list|show|rm|check|sweep`` and ``turnledger alerts``.

Plugged into ``collector.cli`` (it calls ``add_budget``/``cmd_budget`` and
``add_alerts``/``cmd_alerts``). Every command takes ``--db``. Reading commands
open the file read-only; writing ones need it free.

While ``turnledger serve`` runs it owns the file (DuckDB allows one writing
process, and no reader beside it). With ``--server URL`` (or TURNLEDGER_SERVER
and no ``--db``), every command goes through the server's API instead
(:class:`collector.client.ServerClient`); without it, a held file is an error
that says so. Both paths print the same documents (:mod:`ledger.budgets.service`).
"""

from __future__ import annotations

import argparse

from ledger.budgets.relative import RELATIVE_METRICS, RELATIVE_TO, TEMPLATES
from ledger.budgets.rules import METRICS, WINDOWS

from .args import TIME_HELP, add_source, time_arg

__all__ = ["add_alerts", "add_budget", "cmd_alerts", "cmd_budget"]


def _json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine-readable output")


# --- budget ----------------------------------------------------------------------------------
def add_budget(p: argparse.ArgumentParser) -> None:
    """Add, edit, list, show and remove budget rules."""
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    a = sub.add_parser(
        "add",
        help="add a budget (spend), metric or baseline-relative rule",
        description="Add a budget or metric rule, or a rule measuring a candidate version against the baseline "
        "serving beside it (--relative-to, or a kill-criterion --template): e.g. `budget add v7-errors --template "
        "error-rate --candidate prompt_version=v7 --baseline prompt_version=v6 --rollback 'kubectl rollout undo "
        "deploy/agent'`. Templates: "
        + "; ".join(f"{name}: {t.describe()}" for name, t in TEMPLATES.items())
        + ". Every part of a template can be overridden (--factor, --window, --min-runs).",
    )
    a.add_argument("name", help="a unique name, e.g. acme-daily")
    a.add_argument(
        "--limit",
        default=None,
        help="USD for spend and cost metrics; 0..1 for rates and the floors; ms for p99_run_latency; "
        "a whole count for safety_violations (1: alert at the first); relative rules: --factor",
    )
    a.add_argument(
        "--scope",
        default="global",
        help="global (default), or tenant=X, agent=X, model=X, call_site=X, run=TRACE_ID; tool=NAME "
        "(tool_failure_rate only)",
    )
    a.add_argument(
        "--window",
        default=None,
        choices=WINDOWS,
        help="default: day (calendar day in --tz); rolling_5m for health; relative: rolling_hour",
    )
    metrics = list(dict.fromkeys([*METRICS, *RELATIVE_METRICS]))
    a.add_argument(
        "--metric",
        default=None,
        choices=metrics,
        help="default: spend (the USD budget); health and quality: p99_run_latency, model_call_error_rate, "
        "tool_failure_rate, safety_violations, task_success_rate",
    )
    rel = a.add_argument_group("baseline-relative rules (the candidate against the baseline serving beside it)")
    rel.add_argument("--template", choices=list(TEMPLATES), default=None, help="a kill criterion (see above)")
    rel.add_argument("--relative-to", choices=RELATIVE_TO, default=None, help="baseline, or forecast (cost_per_hour)")
    rel.add_argument("--factor", default=None, help="exceeded beyond this multiple of the baseline (e.g. 2, 1.5)")
    rel.add_argument("--candidate", metavar="DIM=VALUE", default=None, help="e.g. prompt_version=v7")
    rel.add_argument("--baseline", metavar="DIM=VALUE", default=None, help="e.g. prompt_version=v6")
    rel.add_argument("--min-runs", type=int, default=None, help="finished runs each version needs first (default 30)")
    rel.add_argument("--rollback", default="", metavar="TEXT", help="the rollback command, carried by every alert")
    a.add_argument(
        "--soft", type=float, default=None, help="warn at this fraction of the limit (default 0.8; 1 = no warning)"
    )
    a.add_argument("--tz", default="UTC", help="time zone of calendar windows (IANA name, default UTC)")
    a.add_argument(
        "--webhook",
        action="append",
        default=[],
        metavar="URL",
        help="POST the JSON alert here (repeat). Link-local/metadata addresses are refused; private and "
        "loopback ones need $TURNLEDGER_ALLOW_PRIVATE_WEBHOOKS=1 (or the server's --allow-private-webhooks)",
    )
    a.add_argument(
        "--slack", action="append", default=[], metavar="URL", help="POST a Slack {text} alert here (repeat)"
    )
    add_source(a, read_only=False)

    ed = sub.add_parser(
        "edit",
        help="change a rule's limit or warn fraction, or switch it off and on",
        description="Change a rule's limit or warn fraction, or disable/enable it (a disabled rule is kept and "
        "listed, but neither evaluated nor enforced). Its scope, window and metric stay: rm and add to change those.",
    )
    ed.add_argument("budget", metavar="NAME_OR_ID")
    ed.add_argument(
        "--limit", "--factor", default=None, help="the new limit, in the rule's unit (USD, 0..1 for a rate, a factor)"
    )
    ed.add_argument("--min-runs", type=int, default=None, help="a relative rule's minimum runs per version")
    ed.add_argument("--rollback", default=None, metavar="TEXT", help="a relative rule's rollback text")
    ed.add_argument("--warn-at", type=float, default=None, metavar="FRACTION", help="warn at this fraction (0..1]")
    switch = ed.add_mutually_exclusive_group()
    switch.add_argument("--disable", dest="enabled", action="store_false", default=None, help="switch the rule off")
    switch.add_argument("--enable", dest="enabled", action="store_true", help="switch it back on")
    add_source(ed, read_only=False)

    ls = sub.add_parser("list", help="every rule with its current value and level")
    _json_flag(ls)
    add_source(ls)

    sh = sub.add_parser("show", help="one rule: figures, projection and recent alerts")
    sh.add_argument("budget", metavar="NAME_OR_ID")
    _json_flag(sh)
    add_source(sh)

    rm = sub.add_parser("rm", help="remove a rule (its alert history stays)")
    rm.add_argument("budget", metavar="NAME_OR_ID")
    add_source(rm, read_only=False)

    ck = sub.add_parser(
        "check",
        help="would a model call in this scope be allowed? (exit 1 if refused)",
        description="Ask the gate the harness asks before each model call. Exit status 1 when refused.",
    )
    for name in ("tenant", "agent", "model", "call-site", "trace"):
        ck.add_argument(f"--{name}", default=None)
    _json_flag(ck)
    add_source(ck)

    sw = sub.add_parser(
        "sweep",
        help="evaluate every rule now, record alerts and send webhooks (what the server does periodically)",
    )
    sw.add_argument("--wait", type=float, default=10.0, help="seconds to wait for webhook deliveries (default 10)")
    add_source(sw, read_only=False)


def cmd_budget(a: argparse.Namespace) -> int:
    from . import budget_actions  # DuckDB and the budget engine load only when a budget command runs

    return budget_actions.run_budget(a)


# --- alerts ----------------------------------------------------------------------------------
def add_alerts(p: argparse.ArgumentParser) -> None:
    """List alert events and their deliveries."""
    p.add_argument("--budget", default=None, metavar="NAME_OR_ID", help="only this rule's alerts")
    p.add_argument("--level", default=None, choices=("ok", "warn", "exceeded"))
    p.add_argument("--since", type=time_arg, default=None, help=f"fired at or after {TIME_HELP}")
    p.add_argument("--limit", type=int, default=50, help="newest N (default 50)")
    p.add_argument("--deliveries", action="store_true", help="list every delivery attempt under each alert")
    _json_flag(p)
    add_source(p)


def cmd_alerts(a: argparse.Namespace) -> int:
    from . import budget_actions

    return budget_actions.run_alerts(a)
