"""Arguments several subcommands share: where to read (the file or a server) and the run filters."""

from __future__ import annotations

import argparse
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ledger.queries import Filters
    from ledger.sources import Source

__all__ = [
    "FILTER_OPTIONS",
    "add_data_path",
    "add_db",
    "add_filters",
    "add_source",
    "filters_of",
    "reading",
    "require_free_port",
    "time_arg",
]

# Each filter option and the Filters field it sets.
FILTER_OPTIONS = {
    "tenant": "tenant",
    "agent": "agent",
    "model": "model",
    "agent-version": "agent_version",
    "prompt-version": "prompt_version",
    "service-version": "service_version",
    "environment": "environment",
    "variant": "variant",
}


def add_db(p: argparse.ArgumentParser, help_extra: str = "") -> None:
    p.add_argument(
        "--db",
        type=Path,
        default=None,
        help="ledger file (default: $TURNLEDGER_DB or ./turnledger.duckdb), or a DuckLake: "
        "'ducklake:postgres:dbname=… host=… port=…'" + help_extra,
    )
    add_data_path(p)


def add_data_path(p: argparse.ArgumentParser) -> None:
    """``--data-path``: ``main`` exports it as $TURNLEDGER_DATA_PATH, so the processes a command starts see it too."""
    p.add_argument(
        "--data-path",
        metavar="DIR",
        default=None,
        help="where a new DuckLake (--db ducklake:…) writes its Parquet files (default: $TURNLEDGER_DATA_PATH); "
        "the lake's catalog keeps it",
    )


def add_source(p: argparse.ArgumentParser, *, read_only: bool = True) -> None:
    """``--db`` and ``--server``: a command works on the file or through a running collector."""
    add_db(p, "; opened read-only" if read_only else "")
    p.add_argument(
        "--server",
        metavar="URL",
        default=None,
        help="go through a running `turnledger serve`/`up` at URL instead of the file (default without --db: "
        "$TURNLEDGER_SERVER; $TURNLEDGER_TOKEN is sent if set). Use it while a collector holds the file",
    )


@contextmanager
def reading(a: argparse.Namespace) -> Iterator[Source]:
    """The source ``--db``/``--server`` name, for one command: a file is opened read-only and closed after.

    Which one is announced on stderr, so stdout stays the command's output (the same either way).
    """
    from ledger.sources import ConnectionSource, source_spec

    spec = source_spec(a.db, a.server)
    print(f"turnledger: reading {spec.describe()}", file=sys.stderr)
    if spec.kind == "server":
        from collector.client import make_source

        yield make_source(spec)
        return
    from ledger.store import open_ledger

    con = open_ledger(spec.location, read_only=True)
    try:
        yield ConnectionSource(con, spec.describe())
    finally:
        con.close()


TIME_HELP = "(ISO time, UTC; or relative: 24h, 7d, '3 days ago', today, yesterday)"


def time_arg(raw: str) -> datetime:
    """``--since``/``--until``: the one reading of a user's time (``ledger.queries.parse_time``)."""
    from ledger.queries import parse_time

    try:
        return parse_time(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{raw!r}: {exc}") from None


def add_filters(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("filters")
    g.add_argument("--since", type=time_arg, help=f"runs started at or after {TIME_HELP}")
    g.add_argument("--until", type=time_arg, help=f"runs started before {TIME_HELP}")
    for option in FILTER_OPTIONS:
        g.add_argument(f"--{option}", help=f"only runs with this {option.replace('-', ' ')}")


def filters_of(a: argparse.Namespace, source: Source | None = None) -> Filters:
    """The filters the options set; with ``source``, a value no run has is an error naming the near ones."""
    from ledger import queries as q

    f = q.Filters(since=a.since, until=a.until, **{field: getattr(a, field) for field in FILTER_OPTIONS.values()})
    if source is not None and any(getattr(f, field) is not None for field in FILTER_OPTIONS.values()):
        q.check_filters(f, source.records(q.filter_options))
    return f


def require_free_port(host: str, port: int, what: str, option: str) -> None:
    """Refuse at once, before a ledger file or a process exists, when a port a command needs is taken."""
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind: a TIME_WAIT port is free
        try:
            probe.bind((host, port))
        except OSError as exc:
            from ledger.errors import TurnledgerError

            raise TurnledgerError(
                f"cannot listen on {host}:{port} for the {what}: {exc.strerror or exc}. "
                f"Is another turnledger running? Choose another {option}."
            ) from None
