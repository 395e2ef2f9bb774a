"""Pure logic behind the dashboard's debugging views; no Streamlit, no SQL.

* ``estimate_tokens`` / ``payload_components``: what each part of a captured
  request costs in tokens, roughly (characters / 4 of its compact JSON).
* the comparison of two turns' payloads (the first change inside the stable
  prefix: the cache invalidator) is ``ledger.turn_diff``, shared with
  ``turnledger diff``.
* each call's cache verdict (cached, written, broken by …, below the model's
  minimum, no breakpoint) is ``ledger.cache_diagnosis``, shared with the CLI.
* ``tree_rows``: a trace's spans in depth-first order with their depth.
* ``expense_reasons`` / ``quadratic_fit``: why a run was expensive, and the
  a·n + b·n² curve that turn count vs cost follows when history is re-sent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.turn_diff import compact_json, estimate_tokens

__all__ = [
    "Component",
    "estimate_tokens",
    "expense_reasons",
    "payload_components",
    "quadratic_fit",
    "tree_rows",
]


@dataclass(frozen=True)
class Component:
    part: str  # "system", "tools[1]", "messages[3]", "model", ...
    label: str  # a short description: tool name, message role and block types
    chars: int
    tokens: int


def _message_label(message: Any) -> str:
    if not isinstance(message, Mapping):
        return type(message).__name__
    role = str(message.get("role", "?"))
    content = message.get("content")
    if isinstance(content, str):
        return f"{role}: text"
    if isinstance(content, list):
        kinds = []
        for block in content:
            kind = str(block.get("type", "?")) if isinstance(block, Mapping) else type(block).__name__
            name = block.get("name") if isinstance(block, Mapping) else None
            kinds.append(f"{kind} {name}" if name else kind)
        return f"{role}: {', '.join(kinds)}"
    return role


def payload_components(payload: Mapping[str, Any]) -> list[Component]:
    """One row per part of the request, in the order it was sent, with a token estimate."""
    out: list[Component] = []
    for key, value in payload.items():
        if key == "tools" and isinstance(value, list):
            for i, tool in enumerate(value):
                name = tool.get("name", "") if isinstance(tool, Mapping) else ""
                text = compact_json(tool)
                out.append(Component(f"tools[{i}]", f"tool {name}".strip(), len(text), estimate_tokens(text)))
        elif key == "messages" and isinstance(value, list):
            for i, message in enumerate(value):
                text = compact_json(message)
                out.append(Component(f"messages[{i}]", _message_label(message), len(text), estimate_tokens(text)))
        else:
            text = compact_json(value)
            label = "system prompt" if key == "system" else "request field"
            out.append(Component(key, label, len(text), estimate_tokens(text)))
    return out


def tree_rows(spans: Sequence[Mapping[str, Any]]) -> list[tuple[int, Mapping[str, Any]]]:
    """Spans as (depth, span) in depth-first order, children by start time.

    A span whose parent is not in the trace (not arrived yet, or from another
    service) is shown as a root rather than dropped.
    """
    ids = {s["span_id"] for s in spans}
    children: dict[str, list[Mapping[str, Any]]] = {}
    roots: list[Mapping[str, Any]] = []
    for s in spans:
        parent = s.get("parent_span_id") or ""
        if parent and parent in ids and parent != s["span_id"]:
            children.setdefault(parent, []).append(s)
        else:
            roots.append(s)

    def order(items: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        return sorted(items, key=lambda s: (s.get("start_time"), s["span_id"]))

    out: list[tuple[int, Mapping[str, Any]]] = []
    seen: set[str] = set()
    stack = [(0, s) for s in reversed(order(roots))]
    while stack:
        depth, span = stack.pop()
        if span["span_id"] in seen:  # a cycle in bad data: show each span once
            continue
        seen.add(span["span_id"])
        out.append((depth, span))
        stack += [(depth + 1, c) for c in reversed(order(children.get(span["span_id"], [])))]
    return out


def expense_reasons(run: Mapping[str, Any], typical: Mapping[str, Any]) -> list[str]:
    """Short reasons a run cost more than the typical one (long-tail table)."""
    times = run.get("times_median")
    if times is not None and not (isinstance(times, float) and math.isnan(times)) and times <= 1:
        return ["not expensive: at or below the median cost"]
    reasons: list[str] = []
    turns = int(run.get("turns") or 0)
    median_turns = float(typical.get("median_turns") or 0)
    if turns and median_turns and turns >= 2 * median_turns and turns > 2:
        reasons.append(f"{turns} turns ({turns / median_turns:.0f}× the median): history re-sent every turn")
    if str(run.get("stop_cause") or "") == "max_steps":
        reasons.append("ran into the step cap")
    hit = run.get("hit_rate")
    input_tokens = int(run.get("input_tokens") or 0)
    if hit is not None and not (isinstance(hit, float) and math.isnan(hit)) and input_tokens >= 1024 and hit <= 0.1:
        reasons.append(f"cache hit rate {hit:.0%} on {input_tokens:,} input tokens")
    median_in = float(typical.get("median_input_tokens") or 0)
    if median_in and input_tokens >= 4 * median_in:
        reasons.append(f"{input_tokens / median_in:.0f}× the median input tokens")
    retries = int(run.get("retry_attempts") or 0)
    if retries:
        reasons.append(f"{retries} retried call{'s' if retries > 1 else ''}")
    trips = int(run.get("loop_trips") or 0)
    if trips:
        reasons.append(f"{trips} loop-detector trip{'s' if trips > 1 else ''}")
    models = [m for m in str(run.get("models") or "").split(",") if m]
    if len(models) > 1:
        reasons.append(f"model mix: {', '.join(models)}")
    return reasons or ["no single cause: a large request"]


def quadratic_fit(turns: Sequence[float], cost: Sequence[float]) -> tuple[float, float] | None:
    """Least-squares (a, b) of cost ≈ a·n + b·n² (through the origin), both ≥ 0, or None if underdetermined.

    Non-negative (scipy's NNLS): each turn costs something and re-sends the history, so neither term can
    be negative; an unconstrained fit bent below zero and predicted negative cost for short runs (#31)."""
    from scipy.optimize import nnls

    pts = [
        (float(n), float(y))
        for n, y in zip(turns, cost, strict=True)
        if n is not None and y is not None and not math.isnan(float(y)) and float(n) > 0
    ]
    if len({n for n, _ in pts}) < 2:
        return None
    (a, b), _ = nnls([[n, n * n] for n, _ in pts], [y for _, y in pts])
    return float(a), float(b)
