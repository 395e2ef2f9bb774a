"""``turnledger``: the one command-line entry point.

Each subcommand is a pair of functions in the module named for it (``add_*``
builds its parser, ``cmd_*`` runs it); ``COMMANDS`` lists them all. Command
modules import only the standard library and light ``ledger`` modules at the
top, and their heavy dependencies (DuckDB, pandas, the receiver) inside
``cmd_*``, so ``turnledger --help`` starts at once. Errors from turnledger
itself print one actionable line and exit 2; nothing prints a traceback for a
user mistake.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from ledger.errors import TurnledgerError

from . import budget, dashboard, ingest, report, serve, simulate

__all__ = ["COMMANDS", "main", "parser"]

Command = tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]

# name -> (builds its parser; its docstring is the command's help), (runs it)
COMMANDS: dict[str, Command] = {
    "up": (serve.add_up, serve.cmd_up),
    "serve": (serve.add_serve, serve.cmd_serve),
    "dashboard": (dashboard.add_dashboard, dashboard.cmd_dashboard),
    "ingest": (ingest.add_ingest, ingest.cmd_ingest),
    "report": (report.add_report, report.cmd_report),
    "context": (report.add_context, report.cmd_context),
    "simulate": (simulate.add_simulate, simulate.cmd_simulate),
    "samples": (simulate.add_samples, simulate.cmd_samples),
    "budget": (budget.add_budget, budget.cmd_budget),
    "alerts": (budget.add_alerts, budget.cmd_alerts),
}


def _help(add: Callable[..., None]) -> str:
    first = (add.__doc__ or "").strip().splitlines()[0]
    return first[0].lower() + first[1:].rstrip(".")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="turnledger",
        description="Observability and cost governance for LLM agents: OpenTelemetry spans in, a DuckDB cost ledger out.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (add, run) in COMMANDS.items():
        sp = sub.add_parser(name, help=_help(add), description=_help(add))
        add(sp)
        sp.set_defaults(run=run)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.run(args))
    except TurnledgerError as exc:
        print(f"turnledger {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
