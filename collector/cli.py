"""``turnledger``: the one command-line entry point.

Each subcommand is a pair of functions here (``add_*`` builds its parser,
``cmd_*`` runs it). Errors from turnledger itself print one actionable line and
exit 2; nothing prints a traceback for a user mistake.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from ledger import queries as q
from ledger.content import load_context
from ledger.errors import ContextNotCaptured, MalformedInput, TurnledgerError, UnknownRun
from ledger.ingest import ingest
from ledger.pricing import PriceBook
from ledger.report import build_report, format_report
from ledger.settings import db_path, prices_file
from ledger.spans import SpanRecord
from ledger.store import open_ledger

from .otlp import read_file

__all__ = [
    "add_context",
    "add_ingest",
    "add_report",
    "add_samples",
    "cmd_context",
    "cmd_ingest",
    "cmd_report",
    "cmd_samples",
    "expand_paths",
    "main",
    "parser",
    "resolve_trace",
]

OTLP_SUFFIXES = {".json", ".jsonl", ".pb", ".bin", ".protobuf", ".gz"}


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", type=Path, default=None, help="ledger file (default: $TURNLEDGER_DB or ./turnledger.duckdb)")


def _filters(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("filters")
    g.add_argument("--since", type=datetime.fromisoformat, help="runs started at or after (ISO time, UTC)")
    g.add_argument("--until", type=datetime.fromisoformat, help="runs started before (ISO time, UTC)")
    for name in ("tenant", "agent", "model", "agent-version", "prompt-version"):
        g.add_argument(f"--{name}", help=f"only runs with this {name.replace('-', ' ')}")


def _filters_of(a: argparse.Namespace) -> q.Filters:
    return q.Filters(a.since, a.until, a.tenant, a.agent, a.model, a.agent_version, a.prompt_version)


# --- ingest ------------------------------------------------------------------------------
def expand_paths(paths: Sequence[Path]) -> list[Path]:
    """Files as given, and OTLP files inside folders (sorted, recursive)."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            out += sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in OTLP_SUFFIXES)
        elif path.exists():
            out.append(path)
        else:
            raise TurnledgerError(f"{path}: no such file or folder")
    return out


def add_ingest(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "paths", nargs="+", type=Path, metavar="PATH", help="OTLP/JSON or OTLP protobuf files, or folders of them"
    )
    p.add_argument("--prices", type=Path, default=None, help="price override TOML (default: $TURNLEDGER_PRICES)")
    _common(p)


def cmd_ingest(a: argparse.Namespace) -> int:
    files = expand_paths(a.paths)
    if not files:
        raise TurnledgerError(f"no OTLP files (*.json, *.jsonl, *.pb) under {', '.join(map(str, a.paths))}")
    # Decode everything before writing anything: one malformed file aborts the
    # whole command with nothing half-written.
    decoded: list[tuple[Path, list[SpanRecord]]] = []
    problems = []
    for path in files:
        try:
            decoded.append((path, read_file(path)))
        except MalformedInput as exc:
            problems.append(str(exc))
    if problems:
        raise MalformedInput("nothing was ingested; fix or remove these files:\n  " + "\n  ".join(problems))
    prices = PriceBook.default(a.prices or prices_file())
    con = open_ledger(a.db)
    totals = {"spans": 0, "charges": 0, "duplicates": 0, "rejected": 0}
    unpriced: set[str] = set()
    for n, (path, spans) in enumerate(decoded, 1):
        r = ingest(con, spans, prices)
        totals["spans"] += r.spans_written
        totals["charges"] += r.charges_written
        totals["duplicates"] += r.duplicates
        totals["rejected"] += len(r.rejected)
        unpriced |= r.unpriced_models
        print(f"[{n}/{len(decoded)}] {path}: {r.spans_written} spans, {r.charges_written} charges"
              + (f", {r.duplicates} already in the ledger" if r.duplicates else "")
              + (f", {len(r.rejected)} rejected" if r.rejected else ""), file=sys.stderr)  # fmt: skip
        for reason in r.rejected[:5]:
            print(f"    rejected {reason}", file=sys.stderr)
    print(
        f"ingested {totals['spans']} spans and {totals['charges']} charges into {a.db or db_path()}"
        + (f" ({totals['duplicates']} duplicate spans skipped)" if totals["duplicates"] else "")
        + (f" ({totals['rejected']} invalid spans rejected)" if totals["rejected"] else "")
    )
    if unpriced:
        print(f"warning: unpriced models (charged $0 until priced): {', '.join(sorted(unpriced))}", file=sys.stderr)
    return 0


# --- report ------------------------------------------------------------------------------
def add_report(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--json", action="store_true", help="machine-readable output (schema in README: 'Report JSON schema')"
    )
    p.add_argument("--top", type=int, default=10, help="rows in the most-expensive-runs table (default 10)")
    _filters(p)
    _common(p)


def cmd_report(a: argparse.Namespace) -> int:
    con = open_ledger(a.db, read_only=True)
    report = build_report(con, _filters_of(a), top=a.top)
    print(json.dumps(report, indent=2) if a.json else format_report(report))
    return 0


# --- context -----------------------------------------------------------------------------
def add_context(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace_id", metavar="TRACE_ID", help="the run's trace id (a unique prefix of 8+ characters works)")
    p.add_argument("--turn", type=int, default=None, help="model call number, 1-based (default: list the turns)")
    _common(p)


def resolve_trace(con, prefix: str) -> str:  # type: ignore[no-untyped-def]
    prefix = prefix.strip().lower()
    rows = con.execute("SELECT trace_id FROM runs WHERE starts_with(trace_id, ?) LIMIT 2", [prefix]).fetchall()
    if len(prefix) < 8 and not (rows and rows[0][0] == prefix):
        raise UnknownRun(f"trace id {prefix!r} is too short: give at least 8 characters")
    if not rows:
        raise UnknownRun(f"no run with trace id {prefix!r} in the ledger (see `turnledger report` for ids)")
    if len(rows) > 1:
        raise UnknownRun(f"trace id prefix {prefix!r} matches several runs: give more characters")
    return str(rows[0][0])


def cmd_context(a: argparse.Namespace) -> int:
    con = open_ledger(a.db, read_only=True)
    trace_id = resolve_trace(con, a.trace_id)
    turns = q.run(con, q.run_turns(trace_id))
    if turns.empty:
        raise UnknownRun(f"run {trace_id} has no model calls")
    if a.turn is None:
        for row in turns.itertuples():
            print(f"turn {row.turn}: {row.model} ({row.call_site}), {row.attempts} attempt(s), ${row.usd:.4f}")
        return 0
    if not 1 <= a.turn <= len(turns):
        raise UnknownRun(f"run {trace_id} has turns 1..{len(turns)}; --turn {a.turn} is out of range")
    span_id = str(turns.iloc[a.turn - 1]["span_id"])
    payload = load_context(con, trace_id, span_id)
    if payload is None:
        raise ContextNotCaptured(
            f"turn {a.turn} of run {trace_id} was recorded without its request payload: content capture was off. "
            "Turn it on in the producer (TURNLEDGER_CAPTURE=redacted, the default) and run again."
        )
    print(json.dumps(payload, indent=2, ensure_ascii=False))
    return 0


# --- samples -----------------------------------------------------------------------------
def add_samples(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, default=Path("sample_traces"), help="folder to write (default sample_traces/)")


def cmd_samples(a: argparse.Namespace) -> int:
    from .samples import write_samples

    for path in write_samples(a.out):
        print(path)
    return 0


COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {
    "ingest": ("load OTLP trace files into the ledger", add_ingest, cmd_ingest),
    "report": ("cost, cache, guard and long-tail figures", add_report, cmd_report),
    "context": ("print the exact request payload of a run's turn", add_context, cmd_context),
    "samples": ("regenerate sample_traces/ from the seed scenarios", add_samples, cmd_samples),
}


# Commands that live with the part they run; each module exposes add_<name> and
# cmd_<name>. A module not yet present simply leaves its command out.
PLUGINS = {
    "serve": ("collector.server.cli", "run the OTLP/HTTP collector and query API (the single writer of the ledger)"),
    "up": ("collector.server.cli", "start the collector and the dashboard together"),
    "dashboard": ("dashboard.cli", "open the Streamlit dashboard"),
    "simulate": ("collector.harness.cli", "drive the harness with scripted models over a realistic workload"),
    "budget": ("ledger.budgets.cli", "add, list, show and remove budget rules"),
    "alerts": ("ledger.budgets.cli", "list alert events and their deliveries"),
}


def _plugin_commands() -> dict[str, tuple[str, Callable[..., None], Callable[..., int]]]:
    import importlib

    found = {}
    for name, (module_name, help_text) in PLUGINS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue  # that part is not built yet
            raise
        found[name] = (help_text, getattr(module, f"add_{name}"), getattr(module, f"cmd_{name}"))
    return found


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="turnledger",
        description="Observability and cost governance for LLM agents: OpenTelemetry spans in, a DuckDB cost ledger out.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_text, add, run) in {**COMMANDS, **_plugin_commands()}.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
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


if __name__ == "__main__":
    sys.exit(main())
