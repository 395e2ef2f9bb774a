"""Guards: what the loop detector and the retry policy did, and what it cost."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, ui
from dashboard.loaders import load
from dashboard.ui import count, first_row, metric, pct, plural, usd
from ledger import queries as q


def render() -> None:
    st.title("Guards")
    st.caption(
        "The harness's guards stop runs from burning money: the loop detector (nudge, then halt, when a run "
        "repeats itself) and the retry policy (each retried attempt is charged). Follows the sidebar filters."
    )
    f = ui.current_filters()
    if not ui.has_runs(f):
        return
    loops = first_row(load(q.loop_spend, f))
    guards = first_row(load(q.guard_summary, f))
    retry = first_row(load(q.charge_totals, f))
    c = st.columns(5)
    metric(
        c[0],
        "Loop-detector trips",
        count(guards.get("loop_trips")),
        "Nudges and halts by the agent's loop detector, and loops turnledger found in the spans of runs that "
        f"report none (the same tool call again: {count(loops.get('detected_trips'))} of these trips); "
        "step-cap halts are counted apart.",
        delta=f"+ {plural(guards.get('step_cap_halts'), 'step-cap halt')}",
        delta_color="gray",
        delta_arrow="off",
    )
    metric(c[1], "Runs that looped", count(loops.get("runs_affected")), "Runs with at least one loop-detector trip.")
    metric(
        c[2],
        "Spent inside loops",
        usd(loops.get("loop_usd")),
        "Model calls made between the run's first call of the tripped tool and the trip (or its last "
        "repeated call, when nothing stopped the run): the calls that kept choosing the same tool again.",
    )
    metric(
        c[3],
        "Spend of looping runs",
        usd(loops.get("spend_in_affected_runs")),
        "Everything those runs cost, loop included.",
    )
    metric(c[4], "Step-cap stops", pct(guards.get("step_cap_rate")), "Share of runs stopped by the step limit.")
    c = st.columns(5)
    metric(c[0], "Retried attempts", count(retry.get("retry_attempts")), "Attempts after the first of a model call.")
    metric(
        c[1],
        "Retry charges (answered)",
        usd(retry.get("retry_usd")),
        "What the retried attempts that were answered cost. A failed attempt (429, 529, a timeout) got no answer "
        "and is billed nothing by the provider.",
        delta=f"{plural(retry.get('failed_attempts'), 'failed attempt')} at $0",
        delta_color="gray",
        delta_arrow="off",
    )
    metric(c[2], "Share of spend", pct(retry.get("retry_share_of_spend"), 2), "Retry charges as a share of all spend.")
    metric(
        c[3], "Runs with retries", count(retry.get("runs_with_retries")), "Runs in which at least one call was retried."
    )
    metric(
        c[4],
        "Budget stops",
        pct(guards.get("budget_stop_rate")),
        "Share of runs stopped because a hard budget ran out.",
    )

    st.subheader("Loop-detector trips", anchor=False)
    bounds = first_row(load(q.time_bounds, f))
    bucket = ui.bucket_for(bounds["last_run"] - bounds["first_run"])
    over_time = load(q.loop_trips_over_time, f, bucket=bucket)
    if over_time.empty:
        st.info("No loop-detector trips in this selection: no run repeated a tool call often enough to be nudged.")
    else:
        st.plotly_chart(charts.loop_trips_over_time(over_time, bucket), key="loop_time")
        st.caption(
            f"Trips per {bucket} (UTC), one colour per loop shape and tool (repeat: the same call again; cycle: "
            "A→B→A→B; stall: no progress). Hover for the runs hit and what they spent."
        )
        runs = load(q.loop_trip_runs, f, limit=100)
        runs["open"] = ui.run_links(runs["trace_id"])
        st.caption(
            "Runs that looped, per tool. 'inside the loop' counts the model calls between the repeated tool calls."
        )
        ui.table(
            runs[
                [
                    "open",
                    "tool",
                    "shapes",
                    "actions",
                    "trips",
                    "repeated_calls",
                    "loop_usd",
                    "run_usd",
                    "stop_cause",
                    "agent_name",
                    "tenant",
                    "trace_id",
                ]
            ],
            hide_index=True,
            column_config={
                "open": ui.run_link_column(),
                "repeated_calls": "repeated calls",
                "loop_usd": st.column_config.NumberColumn("inside the loop", format="$%.4f"),
                "run_usd": st.column_config.NumberColumn("whole run", format="$%.4f"),
            },
            key="loop_runs",
        )

    st.subheader("Retries by cause", anchor=False)
    causes = load(q.retry_charges, f)
    if causes.empty:
        st.info("No retried model calls in this selection.")
    else:
        left, right = st.columns([3, 2])
        with left:
            st.plotly_chart(charts.retries_by_cause(causes), key="retry_causes")
            st.caption(
                "What retried attempts were charged, by the cause of the retry (HTTP 429 rate limit, 529 overloaded, connection…)."
            )
        with right:
            ui.table(
                causes,
                hide_index=True,
                column_config={
                    "usd": st.column_config.NumberColumn("charged", format="$%.4f"),
                    "share_of_spend": st.column_config.NumberColumn("share of spend", format="percent"),
                },
                key="retry_table",
            )


ui.guarded(render)
