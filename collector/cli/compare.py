"""``turnledger compare``: two versions side by side, each difference with its interval and a verdict."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .args import add_filters, add_source, filters_of, reading

__all__ = ["add_compare", "cmd_compare", "format_comparison"]

DIMENSIONS = ("prompt_version", "agent_version", "model", "tool_schema_version")  # ledger.queries.COMPARE_DIMENSIONS


def add_compare(p: argparse.ArgumentParser) -> None:
    """Compare two versions (prompt, agent, model, tool schema): differences, intervals, verdicts."""
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
    from ledger.compare_stats import compare

    with reading(a) as source:
        result = compare(source, filters_of(a), a.by, a.a, a.b)
    print(json.dumps(result, indent=2) if a.json else format_comparison(result))
    return 0


def _value(v: Any, unit: str) -> str:
    if v is None:
        return "—"
    if unit == "share":
        return f"{v:.1%}"
    if unit == "usd":
        return f"${v:,.4f}"
    if unit == "seconds":
        return f"{v:,.1f} s"
    return f"{v:,.2f}"


def _difference(m: dict[str, Any]) -> str:
    unit, d = m["unit"], m["difference"]
    if d is None:
        return "—"
    points = unit == "share"  # rates differ in percentage points
    text = f"{d * 100:+.1f} pts" if points else _value(d, unit).replace("$-", "-$")
    if not points and d >= 0:
        text = "+" + text
    if m["interval"] is not None:
        low, high = m["interval"]
        text += f" [{low * 100:+.1f}, {high * 100:+.1f}]" if points else f" [{_value(low, unit)}, {_value(high, unit)}]"
    return text


def format_comparison(r: dict[str, Any]) -> str:
    """The human table: one line per metric (A, B, B - A [95% interval], verdict), then tool selection."""
    n_a, n_b = r["runs"]["a"], r["runs"]["b"]
    lines = [
        f"{r['by']}: A = {r['a']} ({n_a} runs) vs B = {r['b']} ({n_b} runs); B - A with 95% intervals",
        f"{'metric':<32} {'A':>11} {'B':>11}  {'B - A [interval]':<36} verdict",
    ]
    for m in r["metrics"]:
        lines.append(
            f"{m['label'] + ' (' + m['better'] + ' is better)':<32} {_value(m['a'], m['unit']):>11} "
            f"{_value(m['b'], m['unit']):>11}  {_difference(m):<36} {m['says']}"
        )
    tools = r["tool_selection"]
    shares = tools["shares"]
    names = sorted(set(shares["a"]) | set(shares["b"]))
    lines += ["", f"tool selection ({tools['calls']['a']} vs {tools['calls']['b']} calls): {tools['verdict']}"]
    if tools["p_value"] is not None:
        lines[-1] += f" (chi-square p = {tools['p_value']:.3g})"
    lines += [
        f"  {n:<30} {_value(shares['a'].get(n), 'share'):>8} {_value(shares['b'].get(n), 'share'):>8}" for n in names
    ]
    return "\n".join(lines)
