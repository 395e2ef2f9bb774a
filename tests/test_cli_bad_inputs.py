"""No command prints a traceback, whatever ledger path it is given (#31: every CLI failure is one line).

Every subcommand (and every action of those that have them) runs with ``--db`` naming what a user
mistypes: a missing file, a file that is no DuckDB database (the project's ``pyproject.toml``), a JSON
file (which DuckDB opened as an in-memory database and failed in read-only mode with a traceback). Its
required arguments get plausible values, so the ledger is what fails. Each answer is an exit code
and, on failure, one line on stderr from the command (the ledger's path, or the argument it refused).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from collector.cli import main, parser

ROOT = Path(__file__).resolve().parents[1]
# Commands that serve until stopped or generate data (a missing path is a new ledger to them).
_LONG_RUNNING = {"up", "serve", "dashboard", "simulate", "samples"}  # started, they run: not here


def _subparsers(p: argparse.ArgumentParser) -> argparse._SubParsersAction | None:  # type: ignore[type-arg]
    return next((a for a in p._actions if isinstance(a, argparse._SubParsersAction)), None)


def _leaves(
    p: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    sub = _subparsers(p)
    if sub is None:
        yield path, p
        return
    for name, child in sub.choices.items():
        yield from _leaves(child, (*path, name))


def _filled(p: argparse.ArgumentParser) -> list[str]:
    """Values for the leaf's positionals and required options (a trace id, a name, a number)."""
    args: list[str] = []
    for action in p._actions:
        if action.option_strings and action.required:
            value = str(next(iter(action.choices))) if action.choices else "1"
            args += [action.option_strings[0], *[value] * (action.nargs if isinstance(action.nargs, int) else 1)]
        elif not action.option_strings and action.nargs != 0 and action.dest != "help":
            choice = next(iter(action.choices)) if action.choices else "0123456789abcdef0123456789abcdef"
            args += [str(choice)] * (2 if action.nargs in ("+", 2) else 1)
    return args


def _cases() -> Iterator[tuple[str, list[str]]]:
    for path, leaf in _leaves(parser()):
        if path[0] in _LONG_RUNNING or not any("--db" in a.option_strings for a in leaf._actions):
            continue
        yield " ".join(path), [*path, *_filled(leaf)]


def _bad_ledgers(tmp_path: Path) -> dict[str, Path]:
    good_json = tmp_path / "good.json"
    good_json.write_text('{"resourceSpans": []}')
    return {"missing": tmp_path / "nowhere" / "l.duckdb", "not duckdb": ROOT / "pyproject.toml", "json": good_json}


@pytest.mark.parametrize(("name", "argv"), list(_cases()), ids=[name for name, _ in _cases()])
def test_no_command_prints_a_traceback_for_a_bad_ledger_path(
    name: str, argv: list[str], tmp_path: Path, capsys
) -> None:
    for kind, db in _bad_ledgers(tmp_path).items():
        try:
            code = main([*argv, "--db", str(db)])
        except SystemExit as exc:  # argparse: a usage error
            code = int(exc.code or 0)
        err = capsys.readouterr().err
        assert "Traceback" not in err, (kind, err)
        assert code in (0, 1, 2), (kind, code, err)
        if code and not err.startswith("usage: "):  # argparse's answer to a usage mistake is its own
            # one line of its own (beside "reading/writing …"), from the command, naming what failed
            said = [line for line in err.strip().splitlines() if not line.startswith("turnledger: ")]
            assert len(said) == 1 and said[0].startswith(f"turnledger {argv[0]}"), (kind, err)
