"""Budgets & alerts: each budget rule against its limit, and the alerts fired.

Rules are added with ``turnledger budget add`` (or ``POST /api/budgets``); until
one exists this page says how, and shows the budget events the harness records
on runs. Every figure is shown in its rule's unit: USD for spend, a percentage
for a cache-hit-rate floor.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from dashboard import ui
from dashboard.loaders import budgets as load_budgets
from dashboard.loaders import load
from ledger import queries as q
from ledger.budgets.rules import METRICS
from ledger.budgets.service import budget_row

EMPTY = (
    "**No budgets yet.** A budget rule watches spend (or the cache hit rate) in a scope (global, tenant, agent, "
    "model, call site or run) over a window (per run, rolling hour/day, calendar day/month), warns at its soft "
    "limit and stops at its hard one. Add one with `turnledger budget add acme-daily --scope tenant=acme "
    "--limit 25 --webhook URL` (`turnledger budget add --help`); the server evaluates rules as spans arrive, and "
    "this page then shows each one against its limit and every alert fired."
)


def _in_unit(metric: Any, value: Any) -> str:
    """A rule's figure in its own unit: $ for spend, a percentage for a ratio such as the cache hit rate."""
    if value is None or pd.isna(value):
        return "—"
    spec = METRICS.get(str(metric))
    return ui.usd(value) if spec is None or spec.unit == "usd" else ui.pct(value)


def _budget_table(statuses: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per rule: ``budget list``'s row (same value and level), plus the numbers behind the bar."""
    rows = []
    for status in statuses:
        row, now, last = budget_row(status), status["now"] or {}, status["last_alert"] or {}
        usd = METRICS[row["metric"]].unit == "usd"
        value = now.get("value")
        rows.append(
            {
                **row,
                "window_key": (now.get("window") or {}).get("key"),
                "current_usd": float(value) if usd and value is not None else None,
                "limit_usd": float(status["limit"]) if usd else None,
                "used": now.get("fraction"),
                "last_level": last.get("level"),
                "last_alert_at": pd.to_datetime(last.get("fired_at")),
                "alerts": status["alerts_fired"],
            }
        )
    return pd.DataFrame(rows)


def render() -> None:
    st.title("Budgets & alerts")
    st.caption("Will we overspend? Current spend against each budget, and the alerts fired.")
    statuses = load_budgets()
    alerts = load(q.alert_history, limit=200)
    if not statuses:
        st.info(EMPTY, icon=":material/savings:")
    else:
        budgets = _budget_table(statuses)
        st.subheader("Budgets in force", anchor=False)
        st.caption(
            "Each rule's value in its current window (calendar windows in the rule's time zone) against its limit, "
            "as the governor judges it and `turnledger budget list` prints it; a per-run rule shows its latest run."
        )
        st.dataframe(
            budgets[
                [
                    "name",
                    "scope",
                    "window_key",
                    "metric",
                    "value",
                    "level",
                    "current_usd",
                    "limit_usd",
                    "used",
                    "soft",
                    "projection",
                    "last_level",
                    "last_alert_at",
                    "alerts",
                ]
            ],
            hide_index=True,
            column_config={
                "window_key": st.column_config.TextColumn("window"),
                "current_usd": st.column_config.NumberColumn("spent in window", format="$%.4f"),
                "limit_usd": st.column_config.NumberColumn("limit", format="$%.2f"),
                "used": st.column_config.ProgressColumn("used", format="percent", min_value=0, max_value=1),
                "soft": st.column_config.NumberColumn("warn at", format="percent"),
                "last_alert_at": st.column_config.DatetimeColumn("last alert (UTC)", format="YYYY-MM-DD HH:mm:ss"),
            },
            key="budgets_table",
        )
    st.subheader("Alert history", anchor=False)
    if alerts.empty:
        st.caption("No alerts have fired.")
    else:
        alerts["value"] = [_in_unit(m, v) for m, v in zip(alerts["metric"], alerts["value"], strict=True)]
        alerts["limit"] = [_in_unit(m, v) for m, v in zip(alerts["metric"], alerts["limit_value"], strict=True)]
        st.dataframe(
            alerts.drop(columns=["limit_value"]),
            hide_index=True,
            column_config={
                "fired_at": st.column_config.DatetimeColumn("fired (UTC)", format="YYYY-MM-DD HH:mm:ss"),
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
