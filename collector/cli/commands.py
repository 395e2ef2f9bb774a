"""The table of ``turnledger`` subcommands: name → (parser builder, runner).

Each subcommand is a pair of functions in the module named for it (``add_*``
builds its parser, ``cmd_*`` runs it). Command modules import only the standard
library and light ``ledger`` modules at the top, and their heavy dependencies
(DuckDB, pandas, the receiver) inside ``cmd_*``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from . import budget, cases, compare, dashboard, feedback, ingest, lake, prune, report, review, runs, serve, simulate

__all__ = ["COMMANDS", "help_of"]

Command = tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]

# name -> (builds its parser; its docstring is the command's help), (runs it)
COMMANDS: dict[str, Command] = {
    "up": (serve.add_up, serve.cmd_up),
    "serve": (serve.add_serve, serve.cmd_serve),
    "dashboard": (dashboard.add_dashboard, dashboard.cmd_dashboard),
    "ingest": (ingest.add_ingest, ingest.cmd_ingest),
    "report": (report.add_report, report.cmd_report),
    "runs": (runs.add_runs, runs.cmd_runs),
    "context": (report.add_context, report.cmd_context),
    "diff": (report.add_diff, report.cmd_diff),
    "compare": (compare.add_compare, compare.cmd_compare),
    "simulate": (simulate.add_simulate, simulate.cmd_simulate),
    "samples": (simulate.add_samples, simulate.cmd_samples),
    "budget": (budget.add_budget, budget.cmd_budget),
    "alerts": (budget.add_alerts, budget.cmd_alerts),
    "feedback": (feedback.add_feedback, feedback.cmd_feedback),
    "review": (review.add_review, review.cmd_review),
    "cases": (cases.add_cases, cases.cmd_cases),
    "migrate": (lake.add_migrate, lake.cmd_migrate),
    "maintain": (lake.add_maintain, lake.cmd_maintain),
    "prune": (prune.add_prune, prune.cmd_prune),
}


def help_of(add: Callable[[argparse.ArgumentParser], None]) -> str:
    """A command's one-line help: the first line of its parser builder's docstring."""
    first = (add.__doc__ or "").strip().splitlines()[0]
    return first[0].lower() + first[1:].rstrip(".")
