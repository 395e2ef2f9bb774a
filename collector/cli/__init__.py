"""``turnledger``: the one command-line entry point.

``collector.cli.commands`` lists the subcommands. This package imports it when
``main`` or ``parser`` runs, not when it is imported: the console script
(``from collector.cli import main``) is the ``__main__`` that every process
multiprocessing spawns re-runs (the receiver's decoder workers), and a worker
must not load every command's parser and what it imports. Errors from
turnledger itself print one actionable line and exit 2; nothing prints a
traceback for a user mistake.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ledger.errors import TurnledgerError

if TYPE_CHECKING:
    import argparse

__all__ = ["main", "parser"]


def parser() -> argparse.ArgumentParser:
    import argparse

    from .commands import COMMANDS, help_of

    p = argparse.ArgumentParser(
        prog="turnledger",
        description="Observability and cost governance for LLM agents: OpenTelemetry spans in, a DuckDB cost ledger out.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (add, run) in COMMANDS.items():
        sp = sub.add_parser(name, help=help_of(add), description=help_of(add))
        add(sp)
        sp.set_defaults(run=run)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if getattr(args, "data_path", None):  # read by ledger.store.open_ledger, here and in child processes
        os.environ["TURNLEDGER_DATA_PATH"] = args.data_path
    try:
        return int(args.run(args))
    except TurnledgerError as exc:
        print(f"turnledger {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
