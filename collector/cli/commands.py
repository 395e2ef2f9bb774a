"""The table of ``turnledger`` subcommands: name → (help, parser builder, runner).

Each subcommand is a pair of functions in the module named for it (``add_*``
builds its parser, ``cmd_*`` runs it). Command modules import only the standard
library and light ``ledger`` modules at the top, and their heavy dependencies
(DuckDB, pandas, the receiver) inside ``cmd_*``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from . import budget, dashboard, ingest, report, serve, simulate

__all__ = ["COMMANDS"]

Command = tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]

COMMANDS: dict[str, Command] = {
    "up": ("start the collector and the dashboard together", serve.add_up, serve.cmd_up),
    "serve": (
        "run the OTLP/HTTP collector and query API (the single writer of the ledger)",
        serve.add_serve,
        serve.cmd_serve,
    ),
    "dashboard": ("open the Streamlit dashboard", dashboard.add_dashboard, dashboard.cmd_dashboard),
    "ingest": ("load OTLP trace files into the ledger", ingest.add_ingest, ingest.cmd_ingest),
    "report": ("cost, cache, guard and long-tail figures", report.add_report, report.cmd_report),
    "context": ("print the exact request payload of a run's turn", report.add_context, report.cmd_context),
    "simulate": (
        "drive the harness with scripted models over a realistic workload",
        simulate.add_simulate,
        simulate.cmd_simulate,
    ),
    "samples": ("regenerate sample_traces/ from the seed scenarios", simulate.add_samples, simulate.cmd_samples),
    "budget": ("add, list, show and remove budget rules", budget.add_budget, budget.cmd_budget),
    "alerts": ("list alert events and their deliveries", budget.add_alerts, budget.cmd_alerts),
}
