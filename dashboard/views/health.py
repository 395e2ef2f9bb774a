"""Health: how long runs and model calls take, how often calls fail and why, how each tool fares."""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dashboard import login_throttle, ui
from dashboard.loaders import load
from dashboard.ui import count, first_row, metric, pct, plain
from ledger import conventions as c
from ledger import queries as q
from ledger import settings
from ledger.report import latency_figures
from ledger.wording import duration

_MEASURES = {"run_ms": "Run (root span)", "model_call_ms": "Model call", "time_to_first_token_ms": "First token"}
_LEVEL_COLORS = {"p50": "#4C78A8", "p95": "#F58518", "p99": "#E45756"}


def latency_figure(latency: dict[str, dict[str, Any]]) -> go.Figure:
    """Grouped bars: p50/p95/p99 of each measure that has data, in ms (log scale: a run is many calls long)."""
    measures = [m for m, levels in latency.items() if levels["p50"] is not None]
    fig = go.Figure(
        [
            go.Bar(
                name=level,
                x=[_MEASURES[m] for m in measures],
                y=[latency[m][level] for m in measures],
                marker_color=color,
                text=[duration(latency[m][level]) for m in measures],
                textposition="auto",
                hovertemplate=f"%{{x}} {level}: %{{y:,.1f}} ms<extra></extra>",
            )
            for level, color in _LEVEL_COLORS.items()
        ]
    )
    fig.update_layout(
        title={"text": "Latency percentiles (nearest rank)"},
        xaxis_title="What was timed",
        yaxis_title="Milliseconds (log scale)",
        yaxis_type="log",
        barmode="group",
        legend_title_text="percentile",
        height=360,
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
    )
    return fig


def causes_figure(causes: pd.DataFrame) -> go.Figure:
    """Failed attempts per cause, split by whether a later attempt of the same call succeeded."""
    by_cause = causes.groupby("cause", as_index=False)[["recovered", "not_recovered"]].sum()
    by_cause = by_cause.sort_values(["not_recovered", "recovered"])
    names = [plain(c) for c in by_cause["cause"]]
    fig = go.Figure(
        [
            go.Bar(name=label, y=names, x=by_cause[column], orientation="h", marker_color=color,
                   hovertemplate=f"%{{y}}: %{{x}} {label}<extra></extra>")
            for column, label, color in (("recovered", "recovered by a retry", "#72B7B2"),
                                         ("not_recovered", "the call failed for good", "#E45756"))
        ]
    )  # fmt: skip
    fig.update_layout(
        title={"text": "Failed model-call attempts by cause"},
        xaxis_title="Failed attempts",
        yaxis_title="Cause",
        yaxis_type="category",  # "429" is a cause, not a number
        barmode="stack",
        legend_title_text="retry outcome",
        height=max(240, 100 + 40 * len(by_cause)),
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
    )
    return fig


def _login_throttle() -> None:
    """For the operator: password guessing on this dashboard since it started (dashboard.login_throttle)."""
    if settings.dashboard_password() is None:
        return
    s = login_throttle.THROTTLE.stats()
    line = (
        f":material/lock: Login: {s['wrong_passwords']} wrong password(s) and {s['refused_attempts']} throttled "
        f"attempt(s) since the dashboard started; {s['clients_waiting']} client(s) waiting"
    )
    if s["everyone_waits_s"]:
        line += (
            f"; every login waits {s['everyone_waits_s']:g} s more ({login_throttle.GLOBAL_PER_MINUTE} wrong a minute)"
        )
    st.caption(line + ".")


def render() -> None:
    st.title("Health")
    st.caption(
        "Is it healthy: how long runs and model calls take (p50 is the experience you designed, p99 the one "
        "people complain about), how often model calls fail and why, and which tools are flaky. "
        "Follows the sidebar filters."
    )
    _login_throttle()
    f = ui.current_filters()
    if not ui.has_runs(f):
        return
    per_model = load(q.model_call_latency, f)
    overall = first_row(per_model)  # the overall row comes first
    lat = latency_figures(first_row(load(q.run_latency, f)), overall)
    errors = first_row(load(q.error_rates, f))
    runs = first_row(load(q.run_errors, f))
    cols = [*st.columns(3), *st.columns(3)]
    metric(
        cols[0], "Run p50", duration(lat["run_ms"]["p50"]), "Half the runs took less (root span, first to last span)."
    )
    metric(cols[1], "Run p99", duration(lat["run_ms"]["p99"]), "99% of runs took at most this long.")
    metric(cols[2], "Model call p50", duration(lat["model_call_ms"]["p50"]), "Successful attempts' span duration.")
    metric(cols[3], "Model call p99", duration(lat["model_call_ms"]["p99"]), "The slow tail of model calls.")
    metric(
        cols[4],
        "Model-call error rate",
        pct(errors.get("error_rate")),
        "Failed attempts (ERROR status: 429, 529, 5xx, timeouts…) over all attempts.",
        delta=f"{count(errors.get('failed'))} of {count(errors.get('attempts'))} attempts",
        delta_color="off",
    )
    metric(
        cols[5],
        "Errored runs",
        pct(runs.get("share_of_runs")),
        "Runs with any ERROR span: a failed tool or call, the step cap, a budget stop. (Compare's error "
        "rate counts only the runs that ended in error, stop cause `error`.)",
        delta=f"{count(runs.get('runs'))} runs",
        delta_color="off",
    )

    st.subheader("Latency", anchor=False)
    st.plotly_chart(latency_figure(lat), key="latency")
    streamed = overall.get("streamed_calls")
    st.caption(
        "Bars are p50, p95 and p99; each is a real run's or call's duration. First token is the time to the first "
        f"chunk of streamed calls (`{c.TIME_TO_FIRST_CHUNK}`): "
        + (f"{count(streamed)} streamed calls." if streamed else "no call in this selection reports it.")
    )
    st.dataframe(
        per_model[~per_model["overall"]].drop(columns="overall"),
        hide_index=True,
        column_config={
            "calls": "successful attempts",
            "streamed_calls": "streamed",
            **{
                col: st.column_config.NumberColumn(col.replace("_", " "), format="%.0f ms")
                for col in per_model.columns
                if col.endswith("_ms")
            },
        },
        key="latency_per_model",
    )

    st.subheader("Model-call errors", anchor=False)
    causes = load(q.error_causes, f)
    if causes.empty:
        st.info("No failed model-call attempt in this selection.")
    else:
        left, right = st.columns([3, 2])
        with left:
            st.plotly_chart(causes_figure(causes), key="error_causes")
        with right:
            st.dataframe(
                causes,
                hide_index=True,
                column_config={
                    "failed": "failed attempts",
                    "not_recovered": "not recovered",
                    "share_of_attempts": st.column_config.NumberColumn("share of attempts", format="percent"),
                },
                key="error_table",
            )
        st.caption("Recovered: a later attempt of the same call succeeded. Not recovered: the call failed for good.")

    st.subheader("Tools", anchor=False)
    tools = load(q.tool_health, f)
    if tools.empty:
        st.info("No tool calls in this selection.")
        return
    st.caption(
        "Hard failures: the tool span has ERROR status (an exception, an is_error result, a denial). Soft "
        "failures: it ran and found nothing. A climbing failure rate costs steps long before it breaks runs."
    )
    st.dataframe(
        tools,
        hide_index=True,
        column_config={
            "hard_failures": "hard failures",
            "soft_failures": "soft failures",
            "failure_rate": st.column_config.ProgressColumn("failure rate", format="percent", min_value=0, max_value=1),
            "p50_ms": st.column_config.NumberColumn("p50", format="%.0f ms"),
            "p95_ms": st.column_config.NumberColumn("p95", format="%.0f ms"),
            "runs": "runs using it",
            "share_of_runs": st.column_config.NumberColumn("share of runs", format="percent"),
        },
        key="tools",
    )


ui.guarded(render)
