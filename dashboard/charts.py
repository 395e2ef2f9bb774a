"""Plotly figures, each a pure function of query rows: titles, axis units, hover text.

Labels that come from the data (models, tools, call sites, span names) pass
through ``plain`` because plotly interprets a subset of HTML in labels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from ledger.terms import TERMS

from .analysis import quadratic_fit
from .ui import plain, plural, usd

__all__ = [
    "cost_distribution",
    "cumulative_cost",
    "latency_over_time",
    "loop_trips_over_time",
    "mark_versions",
    "model_terms",
    "retries_by_cause",
    "spend_bars",
    "spend_over_time",
    "stop_causes",
    "success_over_time",
    "trace_waterfall",
    "turns_vs_cost",
]

_OPERATION_COLORS = {"invoke_agent": "#9D9DA6", "chat": "#4C78A8", "execute_tool": "#72B7B2"}


def _layout(fig: go.Figure, title: str, x: str, y: str, *, height: int = 360, legend: str | None = None) -> go.Figure:
    fig.update_layout(
        title={"text": title},
        xaxis_title=x,
        yaxis_title=y,
        height=height,
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
        legend_title_text=legend,
        hoverlabel={"namelength": -1},
    )
    if any(getattr(t, "orientation", None) == "h" for t in fig.data):
        fig.update_yaxes(type="category")  # "429" is a cause, not a number
    return fig


_BUCKET_LENGTH = {
    "minute": pd.Timedelta(minutes=1),
    "hour": pd.Timedelta(hours=1),
    "day": pd.Timedelta(days=1),
    "week": pd.Timedelta(weeks=1),
    "month": pd.Timedelta(days=30),
}


def _time_bars(fig: go.Figure, df: pd.DataFrame, bucket: str) -> None:
    """Bars that span their bucket (centred on it) and an axis that shows whole buckets.

    Without this, a single bucket makes plotly zoom to milliseconds around it.
    """
    length = _BUCKET_LENGTH[bucket]
    fig.update_traces(width=length.total_seconds() * 1000 * 0.85)
    if not df.empty:
        first, last = pd.Timestamp(df["bucket"].min()), pd.Timestamp(df["bucket"].max())
        fig.update_xaxes(type="date", range=[first - length * 0.5, last + length * 1.5])


def spend_over_time(df: pd.DataFrame, bucket: str) -> go.Figure:
    """Stacked bars: spend per time bucket, one colour per model."""
    fig = go.Figure()
    half = _BUCKET_LENGTH[bucket] / 2
    for model, rows in df.groupby("model", sort=True):
        fig.add_bar(
            x=rows["bucket"] + half,
            y=rows["usd"],
            name=plain(model),
            customdata=rows["calls"],
            hovertemplate="$%{y:.4f} in %{customdata} calls<extra>%{fullData.name}</extra>",
        )
    fig.update_layout(barmode="stack", showlegend=True)  # the legend names the series even when there is one
    _time_bars(fig, df, bucket)
    return _layout(fig, f"Spend per {bucket}, by model", f"Time (UTC, per {bucket})", "Spend (USD)", legend="model")


def mark_versions(fig: go.Figure, changes: pd.DataFrame, labels: dict[str, str]) -> go.Figure:
    """A vertical rule where each version first appeared, named (``prompt v7``) at the top of the chart.

    ``changes``: ``q.version_changes`` rows; ``labels``: dimension -> its short name. A shape and an
    annotation rather than ``add_vline``, whose annotation cannot be placed on a date axis.
    """
    names: dict[pd.Timestamp, list[str]] = {}
    for row in changes.itertuples():  # versions deployed together share one rule and one label
        names.setdefault(pd.Timestamp(row.first_seen), []).append(
            f"{labels.get(str(row.dimension), row.dimension)} {row.version}"
        )
    for when, parts in names.items():
        fig.add_shape(type="line", xref="x", yref="paper", x0=when, x1=when, y0=0, y1=1,
                      line={"color": "#616161", "width": 1, "dash": "dot"})  # fmt: skip
        fig.add_annotation(
            x=when, xref="x", y=1, yref="paper", yanchor="bottom", showarrow=False, font={"size": 11},
            text=plain(" · ".join(sorted(parts))), hovertext=f"first seen {when:%Y-%m-%d %H:%M} UTC",
        )  # fmt: skip
    return fig


def _outcome_line(df: pd.DataFrame, bucket: str, column: str, name: str, hover: str) -> go.Figure:
    fig = go.Figure()
    half = _BUCKET_LENGTH[bucket] / 2
    fig.add_scatter(
        x=df["bucket"] + half, y=df[column], mode="lines+markers", name=name, customdata=df["runs"],
        hovertemplate=hover + " over %{customdata} runs<extra></extra>",
    )  # fmt: skip
    if not df.empty:
        first, last = pd.Timestamp(df["bucket"].min()), pd.Timestamp(df["bucket"].max())
        length = _BUCKET_LENGTH[bucket]
        fig.update_xaxes(type="date", range=[first - length * 0.5, last + length * 1.5])
    return fig


def success_over_time(df: pd.DataFrame, bucket: str) -> go.Figure:
    """The share of finished runs that completed, per time bucket (``q.outcomes_over_time``)."""
    fig = _outcome_line(df, bucket, "success_rate", "success rate", "%{y:.1%} succeeded")
    fig.update_yaxes(tickformat=".0%", rangemode="tozero")
    return _layout(fig, f"Success rate per {bucket}", f"Time (UTC, per {bucket})", "Runs that completed")


def latency_over_time(df: pd.DataFrame, bucket: str) -> go.Figure:
    """The p95 run duration per time bucket, in seconds (``q.outcomes_over_time``)."""
    seconds = df.assign(p95_run_s=df["p95_run_ms"] / 1000)
    fig = _outcome_line(seconds, bucket, "p95_run_s", "p95 run duration", "p95 %{y:,.1f} s")
    fig.update_yaxes(rangemode="tozero")
    return _layout(fig, f"Run duration p95 per {bucket}", f"Time (UTC, per {bucket})", "Seconds (p95)")


def _bin_index(lo: float, per_decade: int) -> int:
    return round(math.log10(lo) * per_decade)


def cost_distribution(hist: pd.DataFrame, median: float | None, p95: float | None, per_decade: int) -> go.Figure:
    """Runs per log-spaced cost bin as a step histogram on a log axis, with median and p95 lines.

    Runs that cost $0 (unpriced models) cannot sit on a log axis; the caller says how many.
    """
    priced = hist[hist["lo_usd"] > 0]
    fig = go.Figure()
    if not priced.empty:
        counts = {_bin_index(lo, per_decade): int(n) for lo, n in zip(priced["lo_usd"], priced["runs"], strict=True)}
        first, last = min(counts), max(counts)
        xs, ys = [], []
        for i in range(first, last + 1):  # empty bins drawn as zero, not skipped
            xs.append(10 ** (i / per_decade))
            ys.append(counts.get(i, 0))
        xs.append(10 ** ((last + 1) / per_decade))
        ys.append(0)
        fig.add_scatter(
            x=xs,
            y=ys,
            mode="lines",
            line_shape="hv",
            fill="tozeroy",
            name="runs",
            hovertemplate="from $%{x:.4g}: %{y} runs<extra></extra>",
        )
        top = max(ys) or 1
        # The two labels sit on either side of their lines and at two heights: close values (a narrow
        # distribution) would otherwise print one label over the other.
        lines = ((median, "median", "#2E7D32", 1.05, "top left"), (p95, "p95", "#C62828", 1.18, "top right"))
        for value, name, color, height, side in lines:
            if value and value > 0:
                fig.add_scatter(
                    x=[value, value],
                    y=[0, top * height],
                    mode="lines+text",
                    line={"dash": "dash", "color": color, "width": 2},
                    text=["", f"{name} {usd(value)}"],
                    textposition=side,
                    name=f"{name} {usd(value)}",
                    hovertemplate=f"{name}: {usd(value)}<extra></extra>",
                )
        lo = math.log10(xs[0])
        hi = math.log10(max(xs[-1], (p95 or 0) * 1.5))
        fig.update_xaxes(range=[lo - 0.15, hi + 0.35])
    fig.update_xaxes(type="log")
    return _layout(fig, "Cost per run", "Cost of one run (USD, log scale)", "Runs", legend="")


def model_terms(df: pd.DataFrame) -> go.Figure:
    """Horizontal stacked bars per model: the price terms that make its spend, each in its own colour."""
    rows = df.sort_values("usd_total", ascending=True)
    labels = [
        plain(m) + (" (UNPRICED)" if n else "") for m, n in zip(rows["model"], rows["unpriced_calls"], strict=True)
    ]
    fig = go.Figure()
    for term in TERMS:
        fig.add_bar(
            y=labels,
            x=rows[term.usd_column],
            name=term.label,
            orientation="h",
            marker_color=term.colour,
            hovertemplate="%{y}<br>" + term.label + ": $%{x:.4f}<extra></extra>",
        )
    fig.update_layout(barmode="stack")
    return _layout(
        fig,
        "Spend per model, split by price term",
        "Spend (USD)",
        "",
        height=max(260, 80 + 40 * len(rows)),
        legend="price term",
    )


def spend_bars(df: pd.DataFrame, column: str, title: str) -> go.Figure:
    """Horizontal bars of spend per value of ``column`` (call site, tenant, agent): dollars and share."""
    rows = df.sort_values("usd_total", ascending=True)
    fig = go.Figure(
        go.Bar(
            y=[plain(s) for s in rows[column]],
            x=rows["usd_total"],
            orientation="h",
            text=[f"{usd(v)} · {s:.0%}" for v, s in zip(rows["usd_total"], rows["share"].fillna(0), strict=True)],
            textposition="auto",
            customdata=rows["calls"],
            hovertemplate="%{y}<br>$%{x:.4f} in %{customdata} calls<extra></extra>",
            marker_color="#4C78A8",
        )
    )
    return _layout(fig, title, "Spend (USD)", "", height=max(220, 80 + 40 * len(rows)))


def stop_causes(df: pd.DataFrame) -> go.Figure:
    rows = df.sort_values("runs", ascending=True)
    colors = ["#54A24B" if c == "completed" else "#E45756" for c in rows["stop_cause"]]
    fig = go.Figure(
        go.Bar(
            y=[plain(c) for c in rows["stop_cause"]],
            x=rows["runs"],
            orientation="h",
            marker_color=colors,
            text=[f"{n} · {s:.0%}" for n, s in zip(rows["runs"], rows["share"], strict=True)],
            textposition="auto",
            customdata=rows["usd"].fillna(0),
            hovertemplate="%{y}: %{x} runs, $%{customdata:.4f}<extra></extra>",
        )
    )
    return _layout(fig, "Why runs stopped", "Runs", "", height=max(220, 80 + 40 * len(rows)))


def turns_vs_cost(df: pd.DataFrame) -> go.Figure:
    """Median and p95 cost per turn count, with the a·n + b·n² least-squares curve."""
    fig = go.Figure()
    sizes = [8 + 22 * math.sqrt(n / max(df["runs"].max(), 1)) for n in df["runs"]]
    fig.add_scatter(
        x=df["turns"],
        y=df["median_usd"],
        mode="markers",
        name="median cost",
        marker={"size": sizes, "color": "#4C78A8", "opacity": 0.8},
        customdata=df["runs"],
        hovertemplate="%{x} turns: median $%{y:.4f} over %{customdata} runs<extra></extra>",
    )
    fig.add_scatter(
        x=df["turns"],
        y=df["p95_usd"],
        mode="markers",
        name="p95 cost",
        marker={"symbol": "triangle-up", "size": 9, "color": "#E45756"},
        hovertemplate="%{x} turns: p95 $%{y:.4f}<extra></extra>",
    )
    fit = quadratic_fit(df["turns"].tolist(), df["median_usd"].tolist())
    if fit:
        a, b = fit
        top = int(df["turns"].max())
        xs = list(range(0, top + 1, max(1, top // 80)))
        fig.add_scatter(
            x=xs,
            y=[a * n + b * n * n for n in xs],
            mode="lines",
            name=f"fit: {a:.3g}·n + {b:.3g}·n²",
            line={"dash": "dot", "color": "#555"},
            hoverinfo="skip",
        )
    return _layout(fig, "Turns vs cost per run", "Turns in the run (n)", "Cost per run (USD)", legend="")


def cumulative_cost(turns: pd.DataFrame, limits: Sequence[tuple[str, float]]) -> go.Figure:
    """Cumulative cost after each turn of one run, against its budget lines."""
    fig = go.Figure()
    fig.add_scatter(
        x=turns["turn"],
        y=turns["cumulative_usd"],
        mode="lines+markers",
        name="spent so far",
        customdata=turns["usd"],
        hovertemplate="after turn %{x}: $%{y:.4f} (this turn $%{customdata:.4f})<extra></extra>",
        line={"color": "#4C78A8"},
    )
    last = int(turns["turn"].max()) if not turns.empty else 1
    for name, value in limits:
        fig.add_scatter(
            x=[1, last],
            y=[value, value],
            mode="lines",
            name=f"{plain(name)} {usd(value)}",
            line={"dash": "dash", "color": "#C62828"},
            hovertemplate=f"{plain(name)}: {usd(value)}<extra></extra>",
        )
    return _layout(fig, "Cumulative cost per turn", "Turn", "Spent so far (USD)", legend="")


def trace_waterfall(rows: Sequence[tuple[int, Any]]) -> go.Figure:
    """One bar per span on a shared time axis (the trace tree as a timeline)."""
    labels, bases, widths, colors, hovers = [], [], [], [], []
    for i, (depth, s) in enumerate(rows):
        name = plain(s.get("name"))
        labels.append(f"{i + 1:>3}. " + "· " * depth + name)
        bases.append(float(s.get("offset_ms") or 0))
        widths.append(max(float(s.get("duration_ms") or 0), 0.5))
        if s.get("status_code") == "ERROR":
            colors.append("#C62828")
        elif s.get("soft_failure"):
            colors.append("#F58518")
        else:
            colors.append(_OPERATION_COLORS.get(str(s.get("operation")), "#9D9DA6"))
        cost = s.get("usd")
        extra = f"<br>{usd(cost)}" if cost is not None and not (isinstance(cost, float) and math.isnan(cost)) else ""
        hovers.append(f"{name}<br>{float(s.get('duration_ms') or 0):,.0f} ms · {plain(s.get('status_code'))}{extra}")
    fig = go.Figure(
        go.Bar(
            y=labels,
            x=widths,
            base=bases,
            orientation="h",
            marker_color=colors,
            hovertext=hovers,
            hoverinfo="text",
        )
    )
    fig.update_yaxes(autorange="reversed")
    return _layout(
        fig,
        "Timeline (grey: run · blue: model call · teal: tool · orange: soft failure · red: error)",
        "Milliseconds since the run started",
        "",
        height=max(240, 70 + 22 * len(rows)),
    )


def loop_trips_over_time(df: pd.DataFrame, bucket: str) -> go.Figure:
    fig = go.Figure()
    half = _BUCKET_LENGTH[bucket] / 2
    df = df.assign(series=[f"{plain(s)} · {plain(t)}" for s, t in zip(df["shape"], df["tool"], strict=True)])
    for series, rows in df.groupby("series", sort=True):
        fig.add_bar(
            x=rows["bucket"] + half,
            y=rows["trips"],
            name=str(series),
            customdata=list(zip(rows["runs_affected"], rows["spend_in_affected_runs"].fillna(0), strict=True)),
            hovertemplate="%{y} trips in %{customdata[0]} runs that spent $%{customdata[1]:.4f}"
            "<extra>%{fullData.name}</extra>",
        )
    fig.update_layout(barmode="stack", showlegend=True)  # the legend names the series even when there is one
    _time_bars(fig, df, bucket)
    return _layout(
        fig, f"Loop-detector trips per {bucket}", f"Time (UTC, per {bucket})", "Trips", legend="shape · tool"
    )


def retries_by_cause(df: pd.DataFrame) -> go.Figure:
    rows = df.sort_values("usd", ascending=True)
    fig = go.Figure(
        go.Bar(
            y=[plain(c) for c in rows["cause"]],
            x=rows["usd"],
            orientation="h",
            marker_color="#F58518",
            text=[f"{usd(v)} · {plural(n, 'attempt')}" for v, n in zip(rows["usd"], rows["attempts"], strict=True)],
            textposition="auto",
            hovertemplate="cause %{y}: $%{x:.4f}<extra></extra>",
        )
    )
    return _layout(
        fig, "Retry charges by cause", "Charged for retry attempts (USD)", "Cause", height=max(220, 80 + 40 * len(rows))
    )
