"""Compare: two versions side by side, each difference with its 95% interval and a plain verdict.

The figures are ``ledger.compare_stats.compare`` itself, the same dictionary
``turnledger compare --json`` prints; the dimension and the two versions live
in the address (``?by=prompt_version&a=v6&b=v7``) beside the sidebar filters.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dashboard import charts, loaders, ui
from dashboard.loaders import load
from dashboard.ui import plain
from ledger import queries as q
from ledger.compare_stats import MIN_RUNS, compare, difference_text, value_text
from ledger.sources import SourceSpec

DIMENSION_LABELS = {
    "prompt_version": "Prompt version",
    "agent_version": "Agent version",
    "model": "Model (the run's models)",
    "tool_schema_version": "Tool schema version",
    "service_version": "Service version (resource)",
    "environment": "Deployment environment",
    "variant": "Variant (turnledger.variant)",
}
_VERDICT_COLORS = {"better": "#2E7D32", "worse": "#C62828"}  # anything else: grey
_URL_KEYS = {"by": "cmp_by", "a": "cmp_a", "b": "cmp_b"}


@st.cache_data(ttl=60, show_spinner=False, max_entries=64)
def _comparison(where: SourceSpec, gen: int, f: q.Filters, by: str, a: str, b: str) -> dict[str, Any]:
    del gen  # part of the cache key only
    return compare(loaders.make_source(where), f, by, a, b)  # the loaders' own source (benchmarks record it)


def _from_url() -> None:
    """Once per session: the comparison a shared link names becomes the widgets' choice."""
    s = st.session_state
    if s.get("_cmp_from_url"):
        return
    s["_cmp_from_url"] = True
    for param, key in _URL_KEYS.items():
        if st.query_params.get(param):
            s[key] = st.query_params[param]


def _to_url() -> None:
    for param, key in _URL_KEYS.items():
        value = st.session_state.get(key)
        if value and st.query_params.get(param) != value:
            st.query_params[param] = value


def _callable(versions: pd.DataFrame) -> list[str]:
    """The versions, newest first, with enough runs for a verdict (``MIN_RUNS``)."""
    return [str(v) for v, n in zip(versions["version"], versions["finished_runs"], strict=True) if n >= MIN_RUNS]


def _opening_dimension(f: q.Filters) -> str:
    """The first dimension with two versions that can reach a verdict; prompt versions when none can."""
    for by in DIMENSION_LABELS:
        if len(_callable(load(q.compare_versions, f, by=by))) >= 2:
            return by
    return "prompt_version"


def _pick(f: q.Filters) -> tuple[str, str, str] | None:
    s = st.session_state
    if s.get("cmp_by") not in DIMENSION_LABELS:
        s["cmp_by"] = _opening_dimension(f)
    c = st.columns(3)
    dimensions: list[str] = list(DIMENSION_LABELS)
    by = str(c[0].selectbox("Compare by", dimensions, format_func=lambda d: DIMENSION_LABELS[d], key="cmp_by"))
    versions = load(q.compare_versions, f, by=by)
    names = [str(v) for v in versions["version"]]
    if len(names) < 2:
        st.info(
            f"Fewer than two values of {DIMENSION_LABELS[by].lower()} in this selection: nothing to compare. "
            "Set it on the root span of each run (see README, 'Comparing versions') or widen the filters.",
            icon=":material/compare_arrows:",
        )
        return None
    # Newest first: by default the candidate is the newest version that can reach a verdict, the baseline
    # the one before it (two one-run versions never can, #31); the newest two when none can.
    callable_ = _callable(versions)
    opening = callable_ if len(callable_) >= 2 else names
    for key, default in (("cmp_a", opening[1]), ("cmp_b", opening[0])):
        if s.get(key) not in names:
            s[key] = default

    a = c[1].selectbox("A — baseline", names, key="cmp_a")
    b = c[2].selectbox("B — candidate", names, key="cmp_b")
    seen = versions.set_index("version")
    st.caption(
        " · ".join(
            f"{label} {name}: {ui.plural(int(seen.loc[name, 'runs']), 'run')}, first seen "
            f"{seen.loc[name, 'first_seen']:%Y-%m-%d %H:%M}, last seen {seen.loc[name, 'last_seen']:%Y-%m-%d %H:%M} UTC"
            for label, name in (("A", a), ("B", b))
        )
    )
    return by, a, b


def metrics_table(result: dict[str, Any]) -> pd.DataFrame:
    """One row per metric: the figures of ``compare --json`` and the same line in words."""
    rows = []
    for m in result["metrics"]:
        low, high = m["interval"] or (None, None)
        rows.append(
            {
                "metric": m["label"],
                "better": m["better"],
                "A": value_text(m["a"], m["unit"]),
                "B": value_text(m["b"], m["unit"]),
                "B − A [95% interval]": difference_text(m),
                "verdict": m["says"],
                "a": m["a"],
                "b": m["b"],
                "difference": m["difference"],
                "interval_low": low,
                "interval_high": high,
                "key": m["metric"],
            }
        )
    return pd.DataFrame(rows)


def relative_change(result: dict[str, Any]) -> go.Figure:
    """Each metric's B - A as a share of A, with its interval as error bars, coloured by verdict."""
    fig = go.Figure()
    shown = [m for m in result["metrics"] if m["a"] and m["difference"] is not None]
    for m in reversed(shown):  # plotly draws the first category at the bottom
        d = m["difference"]
        low, high = m["interval"] or (d, d)  # no interval (too few runs): the point alone
        low, high = d if low is None else low, d if high is None else high  # an end the runs cannot bound
        fig.add_scatter(
            x=[d / m["a"]],
            y=[m["label"]],
            mode="markers",
            marker={"size": 11, "color": _VERDICT_COLORS.get(m["verdict"], "#757575")},
            error_x={
                "type": "data",
                "symmetric": False,
                "array": [(high - d) / m["a"]],
                "arrayminus": [(d - low) / m["a"]],
            },
            name=m["says"],
            hovertemplate=f"B − A: {difference_text(m)}<br>{m['says']}<extra>{m['label']}</extra>",
            showlegend=False,
        )
    fig.add_vline(x=0, line_dash="dot", line_color="#9E9E9E")
    fig.update_xaxes(tickformat="+.0%")
    fig.update_layout(
        title={"text": "B against A: change as a share of A, with the 95% interval (green better, red worse)"},
        xaxis_title="B − A, as a share of A's value",
        yaxis_title=None,
        height=80 + 42 * max(len(shown), 1),
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
    )
    return fig


def tool_shares(result: dict[str, Any]) -> go.Figure:
    """Share of tool calls per tool, A beside B."""
    t = result["tool_selection"]
    tools = sorted(set(t["shares"]["a"]) | set(t["shares"]["b"]))
    fig = go.Figure()
    for side in ("a", "b"):
        fig.add_bar(
            y=[plain(n) for n in tools],
            x=[t["shares"][side].get(n, 0) for n in tools],
            orientation="h",
            name=f"{side.upper()} {plain(result[side])} ({t['calls'][side]} calls)",
            hovertemplate="%{x:.1%} of the calls<extra>%{fullData.name}</extra>",
        )
    fig.update_xaxes(tickformat=".0%")
    fig.update_layout(
        title={"text": "Tool selection: share of each version's tool calls"},
        xaxis_title="Share of the version's tool calls",
        barmode="group",
        height=120 + 48 * max(len(tools), 1),
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
        legend_title_text="version",
    )
    fig.update_yaxes(type="category")
    return fig


def render() -> None:
    st.title("Compare versions")
    st.caption(
        "A is the baseline, B the candidate, serving over the same period. Each difference is B − A with its 95% "
        "interval; a verdict is called only when the interval excludes zero and both versions have at least "
        f"{MIN_RUNS} finished runs. Rates use a two-proportion interval, percentiles and ratios a bootstrap with "
        "a fixed seed: the figures are those of `turnledger compare --json`. Follows the sidebar filters."
    )
    _from_url()
    f = ui.current_filters()
    if not ui.has_runs(f):
        return
    picked = _pick(f)
    _to_url()
    if picked is None:
        return
    by, a, b = picked
    if a == b:
        st.info("Pick two different versions.", icon=":material/compare_arrows:")
        return
    result = _comparison(loaders.spec(), loaders.generation(), f, by, a, b)
    n_a, n_b = result["runs"]["a"], result["runs"]["b"]
    if min(n_a, n_b) < MIN_RUNS:
        st.warning(
            f"Too few runs to call any difference: {n_a} and {n_b} finished runs, at least {MIN_RUNS} per version "
            "are needed. The figures are shown; the verdicts wait.",
            icon=":material/hourglass_top:",
        )
    table = metrics_table(result)
    st.dataframe(
        table[["metric", "better", "A", "B", "B − A [95% interval]", "verdict"]],
        hide_index=True,
        column_config={"better": st.column_config.TextColumn("better is", width="small")},
    )
    st.plotly_chart(relative_change(result), key="cmp_change")
    tools = result["tool_selection"]
    words = tools["verdict"] + (f" (chi-square p = {tools['p_value']:.3g})" if tools["p_value"] is not None else "")
    st.caption(f"Tool selection: {words}. Calls of one run are not independent, so read 'different' as 'look here'.")
    if tools["shares"]["a"] or tools["shares"]["b"]:
        st.plotly_chart(tool_shares(result), key="cmp_tools")
    with st.expander("The figures as numbers (compare --json)"):
        st.dataframe(
            table[["key", "a", "b", "difference", "interval_low", "interval_high", "verdict"]],
            hide_index=True,
        )
    _over_time(f, by)


def _over_time(f: q.Filters, by: str) -> None:
    """Success and p95 duration per time bucket with each version change marked, and every version's first and last run."""
    st.subheader("Over time", anchor=False)
    bounds = ui.first_row(load(q.time_bounds, f))
    bucket = ui.bucket_for(bounds["last_run"] - bounds["first_run"])
    outcomes, changes = load(q.outcomes_over_time, f, bucket=bucket), load(q.version_changes, f)
    left, right = st.columns(2)
    for column, figure, key in (
        (left, charts.success_over_time, "cmp_success"),
        (right, charts.latency_over_time, "cmp_latency"),
    ):
        column.plotly_chart(charts.mark_versions(figure(outcomes, bucket), changes, q.MARKED_DIMENSIONS), key=key)
    st.caption(
        "A dotted rule marks where a prompt, agent, service or tool-schema version was first seen (spend over time on the overview too)."
    )
    versions = load(q.compare_versions, f, by=by)
    st.dataframe(
        versions,
        hide_index=True,
        column_config={"first_seen": "first seen (UTC)", "last_seen": "last seen (UTC)"},
        key="cmp_versions",
    )


ui.guarded(render)
