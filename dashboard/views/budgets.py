"""Budgets & alerts: each budget rule against its limit, the alerts fired, and the rules managed here.

Rules are added, edited, switched off and removed on this page (``dashboard.budget_edits``:
the same operations as ``turnledger budget add|edit|rm``, through the server when the
dashboard reads through one). Every figure is in its rule's unit, formatted as
``budget list`` prints it (``ledger.budgets.rules.format_metric``): USD for spend and
cost metrics, a percentage for the cache hit rate and the other rates.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import budget_edits, ui
from dashboard.loaders import budgets as load_budgets
from dashboard.loaders import load
from ledger import queries as q
from ledger.budgets.alerts import format_figure
from ledger.budgets.rules import METRICS, WINDOWS, Rule, format_money
from ledger.budgets.service import budget_row, target_states
from ledger.errors import TurnledgerError

EMPTY = (
    "**No budgets yet.** A budget rule watches spend (or the cache hit rate, or another rate) in a scope (global, "
    "tenant, agent, model, call site or run) over a window (per run, rolling hour/day, calendar day/month), warns at "
    "its soft limit and stops at its hard one. Add one below, or with `turnledger budget add acme-daily --scope "
    "tenant=acme --limit 25 --webhook URL` (`turnledger budget add --help`); the server evaluates rules as spans "
    "arrive, and this page then shows each one against its limit and every alert fired."
)
_DONE_KEY = "_tl_budget_done"
_WARNED_KEY = "_tl_budget_warned"


def _in_unit(metric: Any, value: Any, relative: Any) -> str:
    """An alert's figure in its rule's unit (a factor for a baseline-relative rule); "—" when missing."""
    if value is None or pd.isna(value):
        return "—"
    return format_figure(str(metric), Decimal(str(value)), relative=bool(relative))


def _burn_rate(now: dict[str, Any]) -> str:
    rate = (now.get("projection") or {}).get("rate_usd_per_hour")
    return "" if rate is None else f"{format_money(Decimal(rate))}/h"


def _budget_table(statuses: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per rule: ``budget list``'s row (same value, limit and level), plus the numbers behind the bar."""
    rows = []
    for status in statuses:
        row, now, last = budget_row(status), status["now"] or {}, status["last_alert"] or {}
        ceiling = Rule.from_dict(status).spec.direction == "ceiling"  # a floor's "share used" means nothing
        rows.append(
            {
                **row,
                "window_key": (now.get("window") or {}).get("key"),
                "used": now.get("fraction") if ceiling else None,
                "burn_rate": _burn_rate(now),
                "last_level": last.get("level") or "",
                "last_alert_at": pd.to_datetime(last.get("fired_at")),
                "alerts": status["alerts_fired"],
            }
        )
    return pd.DataFrame(rows)


def _alert_summary(figures: Any) -> str:
    """The figures an alert recorded, in words: the level it found and the window's spend breakdown."""
    if not isinstance(figures, dict):
        return ""
    parts = []
    if figures.get("level_now"):
        parts.append(f"level then: {figures['level_now']}")
    inner = figures.get("figures")
    if isinstance(inner, dict):
        parts += [f"{k.replace('_', ' ')}: {_figure(k, v)}" for k, v in inner.items() if v is not None]
    projection = figures.get("projection")
    if isinstance(projection, dict) and projection.get("text"):
        parts.append(str(projection["text"]))
    return "; ".join(parts)


def _figure(key: str, value: Any) -> str:
    """One recorded figure: money as money (``spend``, ``*_usd``), counts with separators."""
    if key == "spend" or key.endswith("_usd"):
        return format_money(Decimal(str(value)))
    return ui.count(value) if isinstance(value, int) else str(value)


def _limit_input(where: Any, label: str, unit: str, value: Decimal | None, key: str) -> Decimal:
    """A limit typed in its rule's unit (USD, a percentage for a rate, ms, a count, a factor); returned as the rule stores it."""
    if unit == "factor":  # a relative rule's factor, or the cost anomaly's multiple of the baseline p95
        typed = where.number_input(f"{label} (x)", min_value=0.0, value=float(value or 5), step=0.1, key=key)
        return Decimal(str(typed))
    if unit == "usd":
        typed = where.number_input(
            f"{label} (USD)", min_value=0.0, value=float(value or 10), step=1.0, format="%.4f", key=key
        )
        return Decimal(str(typed))
    if unit in ("ms", "count"):  # p99 latency in ms; violations counted (1: the first one)
        ms = unit == "ms"
        typed = where.number_input(
            f"{label} ({'ms' if ms else 'count'})", min_value=0 if ms else 1, value=int(value or (3000 if ms else 1)),
            step=100 if ms else 1, key=key,
        )  # fmt: skip
        return Decimal(int(typed))
    shown = float((value if value is not None else Decimal("0.7")) * 100)
    typed = where.number_input(
        f"{label} (%)", min_value=0.0, max_value=100.0, value=shown, step=1.0, format="%.1f", key=key
    )
    return Decimal(str(typed)) / 100


def _warn_input(where: Any, soft: float, key: str) -> float:
    typed = where.number_input(
        "Warn at (% of the limit; 100 = no warning)",
        min_value=1.0,
        max_value=100.0,
        value=round(soft * 100, 1),
        step=5.0,
        format="%.1f",
        key=key,
    )
    return round(float(typed) / 100, 6)


def _apply(action: str, operation: Any, clear: tuple[str, ...] = ()) -> None:
    """Run one change; on success remember what was done, empty the form's fields ``clear`` (a full form
    invited a second submit of the same rule; on an error they keep what was typed), and redraw the page."""
    try:
        doc = operation()
    except TurnledgerError as exc:
        st.error(f"The budget was not {action}.", icon=":material/error:")
        st.text(str(exc))  # may quote what was typed: shown as text
        return
    st.session_state[_DONE_KEY] = f"{action}: {doc['description']}"
    st.session_state[_WARNED_KEY] = doc.get("warning")  # a scope no run has yet: kept, said
    for key in clear:
        st.session_state.pop(key, None)  # the widget starts from its default on the redraw
    st.rerun()


def _add_form() -> None:
    metric = st.selectbox(
        "Measure",
        list(METRICS),
        format_func=lambda m: f"{m}: {METRICS[m].description}",
        key="budget_add_metric",
        help="Spend is the budget the harness enforces; the other measures alert.",
    )
    with st.form("budget_add"):
        c = st.columns(4)
        name = c[0].text_input("Name", placeholder="acme-daily", key="budget_add_name")
        scope = c[1].text_input(
            "Scope", value="global", help="global, or tenant=X, agent=X, model=X, call_site=X", key="budget_add_scope"
        )
        window = c[2].selectbox("Window", WINDOWS, index=WINDOWS.index("day"), key="budget_add_window")
        limit = _limit_input(c[3], "Limit", METRICS[metric].unit, None, key=f"budget_add_limit_{metric}")
        c = st.columns(4)
        soft = _warn_input(c[0], METRICS[metric].default_soft, key=f"budget_add_warn_{metric}")
        hook = c[1].text_input("Webhook URL (optional)", key="budget_add_hook")
        tz = c[2].text_input("Time zone of calendar windows", value="UTC", key="budget_add_tz")
        if st.form_submit_button("Add budget", icon=":material/add:"):
            request = {
                "name": name.strip(),
                "limit": str(limit),
                "scope": scope,
                "window": window,
                "metric": metric,
                "soft_fraction": soft,
                "timezone": tz,
                "webhooks": [{"url": hook.strip(), "format": "json"}] if hook.strip() else [],
            }
            typed = ("budget_add_name", "budget_add_scope", "budget_add_window", f"budget_add_limit_{metric}",
                     f"budget_add_warn_{metric}", "budget_add_hook", "budget_add_tz")  # fmt: skip
            _apply("added", lambda: budget_edits.add(request), clear=typed)


def _edit_form(statuses: list[dict[str, Any]]) -> None:
    names = [s["name"] for s in statuses]
    picked = st.selectbox("Rule", names, key="budget_edit_pick")
    status = next(s for s in statuses if s["name"] == picked)
    rule_id = status["id"]
    with st.form(f"budget_edit_{rule_id}"):
        c = st.columns(4)
        unit = Rule.from_dict(status).spec.unit
        limit = _limit_input(c[0], "New limit", unit, Decimal(status["limit"]), key=f"budget_edit_limit_{rule_id}")
        soft = _warn_input(c[1], float(status["soft_fraction"]), key=f"budget_edit_warn_{rule_id}")
        enabled = c[2].toggle(
            "Enabled",
            value=bool(status.get("enabled", True)),
            key=f"budget_edit_on_{rule_id}",
            help="A disabled rule is kept, with its alerts, but neither evaluated nor enforced.",
        )
        confirm = c[3].checkbox("Yes, remove this rule", key=f"budget_edit_confirm_{rule_id}")
        save, remove = st.columns([1, 5])
        if save.form_submit_button("Save changes", icon=":material/save:"):
            changes = {"limit": str(limit), "soft_fraction": soft, "enabled": enabled}
            _apply("edited", lambda: budget_edits.edit(rule_id, changes))
        if remove.form_submit_button("Remove rule", icon=":material/delete:"):
            if confirm:
                _apply("removed", lambda: budget_edits.remove(rule_id))
            else:
                st.warning("Tick 'Yes, remove this rule' first: its alerts stay as history, the rule goes.")


def _manage(statuses: list[dict[str, Any]]) -> None:
    st.subheader("Manage rules", anchor=False)
    st.caption(
        "The same changes as `turnledger budget add|edit|rm`, saved where this page reads from (the server, or "
        "the ledger file). The governor judges a rule by its new figures from its next evaluation."
    )
    add, edit = st.tabs(["Add a rule", "Edit or remove a rule"])
    with add:
        _add_form()
    with edit:
        if statuses:
            _edit_form(statuses)
        else:
            st.caption("No rule to edit yet.")


def _rules(statuses: list[dict[str, Any]]) -> None:
    budgets = _budget_table(statuses)
    st.subheader("Budgets in force", anchor=False)
    st.caption(
        "Each rule's value in its current window (calendar windows in the rule's time zone) against its limit, "
        "as the governor judges it and `turnledger budget list` prints it; a per-run rule shows its latest run. "
        "The burn rate is the spend of the last hour (or of the window so far), per hour; the projection says "
        "when the budget runs out at that rate."
    )
    columns = ["name", "level", "value", "limit", "used", "soft", "burn_rate", "projection", "scope", "window_key",
               "metric", "last_level", "last_alert_at", "alerts"]  # fmt: skip
    ui.table(
        budgets[columns],
        hide_index=True,
        column_config={
            "value": st.column_config.TextColumn("now"),
            "window_key": st.column_config.TextColumn("window"),
            "used": st.column_config.ProgressColumn("used", format="percent", min_value=0, max_value=1),
            "soft": st.column_config.NumberColumn("warn at", format="percent"),
            "burn_rate": st.column_config.TextColumn("burn rate"),
            "projection": st.column_config.TextColumn("run-out projection", width="large"),
            "last_level": st.column_config.TextColumn("last alert"),
            "last_alert_at": st.column_config.DatetimeColumn("last alert (UTC)", format="YYYY-MM-DD HH:mm:ss"),
        },
        key="budgets_table",
    )


def _alerts() -> None:
    alerts = load(q.alert_history, limit=200)
    st.subheader("Alert history", anchor=False)
    if alerts.empty:
        st.caption("No alerts have fired.")
        return
    for shown_as, column in (("value", "value"), ("limit", "limit_value")):
        alerts[shown_as] = [
            _in_unit(m, v, r) for m, v, r in zip(alerts["metric"], alerts[column], alerts["relative"], strict=True)
        ]
    alerts["figures"] = [_alert_summary(x) for x in alerts["figures"].map(ui.parsed_json)]
    alerts["budget"] = alerts["budget"].fillna("(removed)")
    shown = ["fired_at", "level", "budget", "metric", "value", "limit", "time_window", "scope_kind", "scope_value",
             "figures", "delivery_attempts", "last_delivery"]  # fmt: skip
    ui.table(
        alerts[shown],
        hide_index=True,
        column_config={
            "fired_at": st.column_config.DatetimeColumn("fired (UTC)", format="YYYY-MM-DD HH:mm:ss"),
            "time_window": "window",
            "figures": st.column_config.TextColumn("figures when it fired", width="large"),
        },
        key="alerts_table",
    )
    _webhook_targets()


def _webhook_targets() -> None:
    """Each webhook target's circuit breaker, replayed from its recorded attempts as `turnledger alerts` does."""
    attempts = load(q.webhook_attempts)
    if attempts.empty:
        return
    st.subheader("Webhook targets", anchor=False)
    st.caption(
        "A target that failed 5 attempts in a row is paused (open) for 60 s, then probed with its next alert "
        "(half-open); its alerts wait meanwhile. One slow target never delays another."
    )
    states = pd.DataFrame(target_states(attempts.to_dict("records"), datetime.now(UTC)))
    ui.table(
        states[["state", "target", "failures_in_a_row", "probe_in_s", "last_detail", "dropped"]],
        hide_index=True,
        column_config={
            "failures_in_a_row": "failed in a row",
            "probe_in_s": st.column_config.NumberColumn("next probe in", format="%.0f s"),
            "last_detail": st.column_config.TextColumn("last attempt", width="large"),
            "dropped": "dropped (queue full)",
        },
        key="webhook_targets_table",
    )


def _spent(amount: Any, tokens: Any) -> str:
    """A harness budget's figure: dollars, or tokens for a token budget."""
    if not ui.missing(amount):
        return ui.usd(amount)
    return "" if ui.missing(tokens) else f"{ui.count(tokens)} tokens"


def _budget_events() -> None:
    f = ui.current_filters()
    st.subheader("Budget events recorded on runs", anchor=False)
    if not ui.has_runs(f):
        return
    events = load(q.budget_events, f, limit=200)
    if events.empty:
        st.caption("No run has recorded a budget warning or stop (these come from the harness's per-run budgets).")
        return
    st.caption(
        "Warnings and stops the harness's per-run budget guard recorded as it ran: spent so far against the "
        "run's limit when it fired (dollars, or tokens for a token budget). Follows the sidebar filters."
    )
    events["open"] = ui.run_links(events["trace_id"])
    events["spent"] = [_spent(u, t) for u, t in zip(events["spent_usd"], events["spent_tokens"], strict=True)]
    events["limit"] = [_spent(u, t) for u, t in zip(events["limit_usd"], events["limit_tokens"], strict=True)]
    shown = ["open", "time", "level", "spent", "limit", "fraction", "run_usd", "stop_cause", "agent_name",
             "tenant", "trace_id"]  # fmt: skip
    ui.table(
        events[shown],
        hide_index=True,
        column_config={
            "open": ui.run_link_column(),
            "time": st.column_config.DatetimeColumn("at (UTC)", format="YYYY-MM-DD HH:mm:ss"),
            "fraction": st.column_config.NumberColumn("of limit", format="percent"),
            "run_usd": st.column_config.NumberColumn("run total", format="$%.4f"),
        },
        key="budget_events",
    )


def render() -> None:
    st.title("Budgets & alerts")
    st.caption("Will we overspend? Current spend against each budget, and the alerts fired.")
    done = st.session_state.pop(_DONE_KEY, None)
    if done:
        st.success("Budget " + done.split(":", 1)[0] + ".", icon=":material/check_circle:")
        st.text(done)  # the rule's description holds its name: text, not markdown
        if warned := st.session_state.pop(_WARNED_KEY, None):
            st.warning("Its scope names nothing seen yet: a typo?", icon=":material/warning:")
            st.text(warned)  # quotes what was typed: text, not markdown
    statuses = load_budgets()
    if not statuses:
        st.info(EMPTY, icon=":material/savings:")
    else:
        _rules(statuses)
    _manage(statuses)
    _alerts()
    _budget_events()


ui.guarded(render)
