"""Long tail: the most expensive runs, why they cost what they did, and how cost grows with turns."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, ui
from dashboard.analysis import expense_reasons
from dashboard.loaders import load
from dashboard.ui import count, first_row, metric, pct, plural, usd
from ledger import queries as q

TOP = 20
# Two tables over the same rows, each narrow enough for a laptop screen (no column cut off): why each
# run was expensive, then who ran it and its other figures.
WHY_COLUMNS = ["open", "who", "usd_total", "times_median", "turns", "why"]
MORE_COLUMNS = ["open", "usd_total", "hit_rate", "retry_attempts", "loop_trips", "stop_cause", "models", "agent_name",
                "tenant", "started_at", "trace_id"]  # fmt: skip
WHY_WIDTH_PX = 480  # the "why" column; what it holds beyond one line wraps onto up to three
_ONE_LINE_CHARS = 68  # about what fits in one line of it
_WRAPPED_ROW_PX = 72  # Streamlit wraps a cell's text only in rows taller than 4 rem


def render() -> None:
    st.title("Long tail")
    st.caption(
        "A few runs cost many times the median; a mean hides them. This page lists them with what made them "
        "expensive. Follows the sidebar filters."
    )
    f = ui.current_filters()
    if not ui.has_runs(f):
        return
    typical = first_row(load(q.typical_run, f))
    cost = first_row(load(q.cost_per_run, f))
    c = st.columns(5)
    metric(c[0], "Median cost per run", usd(cost["median_usd"]), "Half the runs cost less than this.")
    metric(c[1], "p95 cost per run", usd(cost["p95_usd"]), "95% of runs cost less than this.")
    metric(c[2], "p99 cost per run", usd(cost["p99_usd"]), "99% of runs cost less than this.")
    metric(c[3], "Most expensive run", usd(cost["max_usd"]), "The single most expensive run.")
    metric(
        c[4],
        "Spend in the tail",
        pct(typical.get("share_of_spend_from_p95")),
        "Share of all spend from the runs costing at least the p95 "
        f"({count(typical.get('runs_from_p95'))} of {count(typical.get('runs'))} runs).",
    )

    listed = load(q.long_tail, f, limit=TOP)
    tail = listed[~(listed["times_median"] <= 1)].copy()  # a run at or below the median cost is not the tail
    # A run far above its own agent's recent p95 says so first (q.cost_anomalies: no dollar threshold).
    flagged = load(q.cost_anomalies, f, limit=TOP).set_index("trace_id")["times_baseline_p95"]
    tail["why"] = [
        "; ".join(
            (
                [f"cost anomaly: {flagged[row['trace_id']]:.1f}× its agent's recent p95"]
                if row["trace_id"] in flagged
                else []
            )
            + expense_reasons(row, typical)
        )
        for row in tail.to_dict("records")
    ]
    tail["open"] = ui.run_links(tail["trace_id"])
    tail["who"] = ui.run_who(tail)
    st.subheader(f"The {len(tail)} most expensive runs", anchor=False)
    st.caption(
        f"Median run: {count(typical.get('median_turns'))} turns, {count(typical.get('median_input_tokens'))} input "
        f"tokens, {usd(typical.get('median_usd'))}. 'why' compares each run to that. Open a run to see its trace and "
        "the exact context of each turn. A cost anomaly cost more than "
        f"{q.ANOMALY_FACTOR:g}× the p95 of its agent's previous {q.ANOMALY_WINDOW} runs."
        + (
            f" Only {plural(len(tail), 'run')} cost more than the median, so the list stops there."
            if len(tail) < len(listed)
            else ""
        )
    )
    height = min(36 * (len(tail) + 1) + 3, 760)  # every listed run visible without scrolling
    wrapped = len(tail) and int(tail["why"].str.len().max()) > _ONE_LINE_CHARS
    row = _WRAPPED_ROW_PX if wrapped else 35
    ui.table(
        tail,
        column_order=WHY_COLUMNS,
        hide_index=True,
        row_height=row,
        height=min(row * len(tail) + 39, 900),
        column_config={
            "open": ui.run_link_column(),
            "who": st.column_config.TextColumn("agent · tenant · stop", width="medium"),
            "usd_total": st.column_config.NumberColumn("cost", format="$%.4f"),
            "times_median": st.column_config.NumberColumn("× median", format="%.1f×"),
            "why": st.column_config.TextColumn("why it was expensive", width=WHY_WIDTH_PX),
        },
        key="tail_table",
    )
    with st.expander("Their other figures: cache, retries, loops, stop cause, who ran them"):
        ui.table(
            tail,
            column_order=MORE_COLUMNS,
            hide_index=True,
            height=height,
            column_config={
                "open": ui.run_link_column(),
                "usd_total": st.column_config.NumberColumn("cost", format="$%.4f"),
                "hit_rate": st.column_config.NumberColumn("cache hit rate", format="percent"),
                "retry_attempts": "retries",
                "loop_trips": "loop trips",
                "started_at": st.column_config.DatetimeColumn("started (UTC)", format="YYYY-MM-DD HH:mm:ss"),
            },
            key="tail_more",
        )

    left, right = st.columns(2)
    with left:
        by_turns = load(q.cost_by_turns, f)
        st.plotly_chart(charts.turns_vs_cost(by_turns), key="turns_vs_cost")
        st.caption(
            "Each dot is every run with that many turns (size: how many runs); the y value is their median cost, "
            "triangles their p95. Cost grows faster than the turn count because every turn re-sends the whole "
            "history: the dotted a·n + b·n² fit shows the curve."
        )
    with right:
        options = tail["trace_id"].tolist()
        labels = {t: f"{t[:12]}… · {usd(v)} · {plural(n, 'turn')}" for t, v, n in zip(tail["trace_id"], tail["usd_total"], tail["turns"], strict=True)}  # fmt: skip
        chosen = st.selectbox("Run", options, format_func=lambda t: labels.get(t, t), key="tail_run")
        if chosen:
            turns = load(q.run_turns, trace_id=chosen)
            limits = [
                (f"{'budget' if r['source'] == 'budget' else 'limit'} ({r['name']})", float(r["limit_usd"]))
                for r in load(q.run_budget_limits, trace_id=chosen).to_dict("records")
            ]
            reference = not limits
            if reference and cost.get("p95_usd"):
                limits = [("p95 of all runs", float(cost["p95_usd"]))]
            st.plotly_chart(charts.cumulative_cost(turns, limits), key="cumulative")
            st.caption(
                "What the run had spent after each turn. The dashed line is "
                + (
                    "the p95 cost per run for reference: this run has no budget events and no per-run budget applies."
                    if reference
                    else "the budget limit that applied to this run."
                )
            )


ui.guarded(render)
