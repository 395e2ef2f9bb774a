"""``turnledger compare``: two versions side by side, each difference with its interval and a verdict."""

from __future__ import annotations

import argparse
import json

from ledger.budgets.relative import DIMENSIONS  # ledger.queries.COMPARE_DIMENSIONS, spelled without DuckDB

from .args import add_filters, add_source, filters_of, reading

__all__ = ["DIMENSIONS", "add_compare", "cmd_compare"]


def add_compare(p: argparse.ArgumentParser) -> None:
    """Compare two versions (prompt, agent, model, tool schema, service, environment, variant): verdicts."""
    p.description = (
        "A is the baseline, B the candidate: each difference is B - A with a 95% interval, and the verdict "
        "(better / worse / no detectable difference at n=...) says what B is. No difference is called while "
        "either version has fewer than 30 finished runs. Methods: README, 'Comparing versions'."
    )
    p.add_argument("--by", choices=DIMENSIONS, default="prompt_version", help="the dimension (default prompt_version)")
    p.add_argument("a", metavar="A", help="the baseline version")
    p.add_argument("b", metavar="B", help="the candidate version")
    p.add_argument("--json", action="store_true", help="machine-readable output (schema turnledger.compare/1)")
    add_filters(p)
    add_source(p)


def cmd_compare(a: argparse.Namespace) -> int:
    from ledger.compare_stats import compare, format_comparison

    with reading(a) as source:
        result = compare(source, filters_of(a), a.by, a.a, a.b)
    print(json.dumps(result, indent=2) if a.json else format_comparison(result))
    return 0
