"""The run explorer's trace waterfall: every span on one time axis, and each span's inputs and outputs.

Bars are indented by parent and placed by start and duration (``charts.trace_waterfall``);
below them each span opens to show its timing beside what it carried: a tool call's
arguments and result, a model call's input and output tokens, cost and finish reason.
Levels below a chosen depth fold away, so a long run reads top-down.

Not a page: ``run_explorer`` calls :func:`render`. Span names, arguments and results
arrived in spans: they are shown with ``st.text``/``st.code`` only; an expander's
label (rendered as markdown) is built from our own words and numbers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import charts
from dashboard.analysis import tree_rows
from dashboard.ui import count, missing, parsed_json, table, usd
from ledger.terms import input_token_columns

__all__ = ["MAX_DETAILED", "render", "span_details", "span_label"]

MAX_DETAILED = 200  # spans opened one by one below the chart; a longer run shows its first ones
_KINDS = {"invoke_agent": "agent run", "chat": "model call", "execute_tool": "tool call"}
_INPUT_COLUMNS = input_token_columns()
# A span name goes into an expander label (markdown) only when it holds nothing markdown could act on.
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9_.\- ]{1,80}$")


def _text(value: Any) -> str | None:
    return None if missing(value) or value == "" else str(value)


def span_label(index: int, depth: int, span: Mapping[str, Any]) -> str:
    """An expander label from our own words (position, kind, timing, status), and the span's name only
    when it is plain letters, digits and ``_.-`` (anything else is shown inside, as text)."""
    kind = _KINDS.get(str(span.get("operation")), "span")
    name = str(span.get("name") or "")
    if _PLAIN_NAME.match(name):
        kind = f"{kind} {name}"
    status = " · error" if span.get("status_code") == "ERROR" else " · soft failure" if span.get("soft_failure") else ""
    start, duration = float(span.get("offset_ms") or 0), float(span.get("duration_ms") or 0)
    return f"{'↳ ' * depth}{index}. {kind} · at {start:,.0f} ms for {duration:,.0f} ms{status}"


def span_details(span: Mapping[str, Any]) -> dict[str, Any]:
    """What one span carried, by name: timing, then its arguments and result (only what it has)."""
    out: dict[str, Any] = {
        "start (ms from run start)": round(float(span.get("offset_ms") or 0), 1),
        "duration (ms)": round(float(span.get("duration_ms") or 0), 1),
        "status": _text(span.get("status_code")) or "UNSET",
    }
    if _text(span.get("model")):
        out |= {
            "model": span["model"],
            "attempt": int(span.get("attempt") or 1),
            "input tokens": count(sum(int(span.get(k) or 0) for k in _INPUT_COLUMNS)),
            "output tokens": count(span.get("output_tokens") or 0),
            "cost": "unpriced (no price for this model)" if span.get("unpriced") else usd(span.get("usd")),
        }
        for key, label in (("finish_reason", "finish reason"), ("retry_cause", "retry cause"), ("error_type", "error")):
            if _text(span.get(key)):
                out[label] = span[key]
    if _text(span.get("duplicate_of")):
        out["charged on"] = f"span {span['duplicate_of']} (this copy costs nothing)"
    if _text(span.get("tool")):
        out["tool"] = span["tool"]
    if _text(span.get("status_message")):
        out["message"] = span["status_message"]
    if span.get("events"):
        out["events"] = int(span["events"])
    return out


def _code(value: Any, label: str) -> None:
    text = _text(value)
    if text is None:
        return
    shown = parsed_json(text)
    st.caption(label)
    if isinstance(shown, dict | list):
        st.json(shown, expanded=2)
    else:
        st.code(text, language=None, wrap_lines=True)


def _detail(span: Mapping[str, Any]) -> None:
    st.text(str(span.get("name")))
    left, right = st.columns([2, 3])
    with left:
        details = span_details(span)
        table(
            pd.DataFrame({"value": [str(v) for v in details.values()]}, index=list(details)),
            key=f"span_{span['span_id']}",
        )
    with right:
        _code(span.get("tool_arguments"), "Arguments")
        _code(span.get("tool_result"), "Result")


def _depths(ordered: Sequence[tuple[int, Mapping[str, Any]]]) -> int:
    return max((d for d, _ in ordered), default=0)


def render(trace_id: str, tree: pd.DataFrame) -> None:
    st.subheader("Trace waterfall", anchor=False)
    ordered = tree_rows(tree.to_dict("records"))
    if not ordered:
        st.caption("No spans recorded for this run.")
        return
    deepest = _depths(ordered)
    levels = deepest + 1
    if deepest:
        levels = st.select_slider(
            "Levels shown", options=list(range(1, deepest + 2)), value=deepest + 1, key=f"wf_levels_{trace_id}",
            help="Fold the tree: 1 shows the run alone, each step down adds its children.",
        )  # fmt: skip
    shown = [(d, s) for d, s in ordered if d < levels]
    st.caption(
        "Every span of the run on one time axis, children indented under their parent (grey: run · blue: model "
        "call · teal: tool · orange: soft failure, a tool that ran but reported a problem · red: error). Open a "
        "span below for its timing beside its arguments and result. A model call reported twice (say by the "
        "anthropic SDK's own tracing and an instrumentation) is charged once; the other copy says where."
    )
    st.plotly_chart(charts.trace_waterfall(shown), key=f"waterfall_{trace_id}")
    for i, (depth, span) in enumerate(shown[:MAX_DETAILED], start=1):
        with st.expander(span_label(i, depth, span)):
            _detail(span)
    if len(shown) > MAX_DETAILED:
        st.caption(f"The first {MAX_DETAILED} of {len(shown)} spans are listed; fold levels to see fewer.")
