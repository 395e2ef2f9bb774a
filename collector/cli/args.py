"""Arguments several subcommands share: the ledger file and the run filters."""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ledger.queries import Filters

__all__ = ["FILTER_OPTIONS", "add_db", "add_filters", "filters_of"]

# Each filter option and the Filters field it sets.
FILTER_OPTIONS = {
    "tenant": "tenant",
    "agent": "agent",
    "model": "model",
    "agent-version": "agent_version",
    "prompt-version": "prompt_version",
}


def add_db(p: argparse.ArgumentParser, help_extra: str = "") -> None:
    p.add_argument(
        "--db",
        type=Path,
        default=None,
        help="ledger file (default: $TURNLEDGER_DB or ./turnledger.duckdb)" + help_extra,
    )


def add_filters(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("filters")
    g.add_argument("--since", type=datetime.fromisoformat, help="runs started at or after (ISO time, UTC)")
    g.add_argument("--until", type=datetime.fromisoformat, help="runs started before (ISO time, UTC)")
    for option in FILTER_OPTIONS:
        g.add_argument(f"--{option}", help=f"only runs with this {option.replace('-', ' ')}")


def filters_of(a: argparse.Namespace) -> Filters:
    from ledger.queries import Filters

    return Filters(since=a.since, until=a.until, **{field: getattr(a, field) for field in FILTER_OPTIONS.values()})
