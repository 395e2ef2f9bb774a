"""Budgets & alerts: spend against each budget and the alerts fired.

Budget rules arrive with the budgets feature (``turnledger budget ...``); until
a rule exists this page says what it will hold, and shows the budget events the
harness already records on runs.
"""

from __future__ import annotations

import streamlit as st

from dashboard import ui
from dashboard.loaders import load
from ledger import queries as q

EMPTY = (
    "**No budgets yet.** Once budget rules exist, this page shows each one (scope: global, tenant, agent, model, "
    "call site or run; window: per run, rolling hour/day, calendar day/month) with the spend in its current "
    "window against its soft (warn) and hard (stop) limits, and below it every alert fired with its level, "
    "value and webhook delivery status. Rules are added with the `turnledger budget` command "
    "(`turnledger budget --help`) once the budgets feature ships; the server evaluates them as spans arrive."
)


def render() -> None:
    st.title("Budgets & alerts")
    st.caption("Will we overspend? Current spend against each budget, and the alerts fired.")
    budgets = load(q.budget_status)
    alerts = load(q.alert_history, limit=200)
    if budgets.empty:
        st.info(EMPTY, icon=":material/savings:")
    else:
        budgets["used"] = budgets["current_usd"] / budgets["limit_usd"]
        st.subheader("Budgets in force", anchor=False)
        st.caption(
            "Spend in each budget's current window (UTC) against its limit; the bar turns the corner at the soft "
            "fraction. Per-run and non-spend budgets show their latest alert instead."
        )
        st.dataframe(
            budgets[
                [
                    "name",
                    "scope_kind",
                    "scope_value",
                    "time_window",
                    "metric",
                    "current_usd",
                    "limit_usd",
                    "used",
                    "soft_fraction",
                    "last_level",
                    "last_alert_at",
                    "alerts",
                ]
            ],
            hide_index=True,
            column_config={
                "current_usd": st.column_config.NumberColumn("spent in window", format="$%.4f"),
                "limit_usd": st.column_config.NumberColumn("limit", format="$%.2f"),
                "used": st.column_config.ProgressColumn("used", format="percent", min_value=0, max_value=1),
                "soft_fraction": st.column_config.NumberColumn("warn at", format="percent"),
            },
            key="budgets_table",
        )
    st.subheader("Alert history", anchor=False)
    if alerts.empty:
        st.caption("No alerts have fired.")
    else:
        st.dataframe(
            alerts,
            hide_index=True,
            column_config={
                "value": st.column_config.NumberColumn(format="$%.4f"),
                "limit_usd": st.column_config.NumberColumn("limit", format="$%.2f"),
                "figures": st.column_config.TextColumn(width="large"),
            },
            key="alerts_table",
        )

    f = ui.current_filters()
    events = load(q.budget_events, f, limit=200)
    st.subheader("Budget events recorded on runs", anchor=False)
    if events.empty:
        st.caption("No run has recorded a budget warning or stop (these come from the harness's per-run budgets).")
    else:
        st.caption(
            "Warnings and stops the harness's per-run budget guard recorded as it ran: spent so far against the "
            "run's limit when it fired. Follows the sidebar filters."
        )
        events["open"] = ui.run_links(events["trace_id"])
        st.dataframe(
            events[
                [
                    "open",
                    "time",
                    "level",
                    "spent_usd",
                    "limit_usd",
                    "fraction",
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
                "time": st.column_config.DatetimeColumn("at (UTC)", format="YYYY-MM-DD HH:mm:ss"),
                "spent_usd": st.column_config.NumberColumn("spent", format="$%.4f"),
                "limit_usd": st.column_config.NumberColumn("limit", format="$%.2f"),
                "fraction": st.column_config.NumberColumn("of limit", format="percent"),
                "run_usd": st.column_config.NumberColumn("run total", format="$%.4f"),
            },
            key="budget_events",
        )


ui.guarded(render)
