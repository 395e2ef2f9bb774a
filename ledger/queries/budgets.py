"""Budgets and alerts as recorded: budget events on runs, rules with their current spend, alerts fired."""

from __future__ import annotations

from ledger import conventions as c

from .core import NO_FILTERS, Filters, Query, filtered, query

__all__ = ["alert_history", "budget_events", "run_budget_limits", "webhook_attempts"]

_BUDGET_EVENTS = f"('{c.EVENT_BUDGET_WARN}', '{c.EVENT_BUDGET_STOP}')"


@query
def budget_events(f: Filters = NO_FILTERS, limit: int = 200) -> Query:
    """Budget warn/stop events the harness recorded on runs (before any budget rule exists)."""
    w, p = filtered(f)
    return Query(
        w
        + f"""SELECT g.time, g.trace_id, fr.agent_name, fr.tenant, replace(g.name, 'turnledger.budget.', '') AS level,
       json_extract_string(g.attributes, '$.kind') AS kind,
       TRY_CAST(json_extract_string(g.attributes, '$.spent_usd') AS DOUBLE) AS spent_usd,
       TRY_CAST(json_extract_string(g.attributes, '$.limit_usd') AS DOUBLE) AS limit_usd,
       TRY_CAST(json_extract_string(g.attributes, '$.spent_tokens') AS BIGINT) AS spent_tokens,
       TRY_CAST(json_extract_string(g.attributes, '$.limit_tokens') AS BIGINT) AS limit_tokens,
       TRY_CAST(json_extract_string(g.attributes, '$.fraction') AS DOUBLE) AS fraction,
       fr.usd_total AS run_usd, coalesce(fr.stop_cause, 'in progress') AS stop_cause
FROM guard_events g JOIN fr USING (trace_id) WHERE g.name IN {_BUDGET_EVENTS}
ORDER BY g.time DESC, g.trace_id LIMIT ?""",
        [*p, int(limit)],
    )


@query
def alert_history(limit: int = 200) -> Query:
    """Alerts fired, newest first, with their budget and how delivery went."""
    return Query(
        """SELECT a.fired_at, a.level, b.name AS budget, b.scope_kind, b.scope_value, b.time_window, b.metric,
       b.relative IS NOT NULL AS relative, a.value, b.limit_value AS limit_value, a.window_start, a.figures,
       (SELECT count(*) FROM alert_deliveries d WHERE d.alert_id = a.id) AS delivery_attempts,
       (SELECT arg_max(d.status, d.attempted_at) FROM alert_deliveries d WHERE d.alert_id = a.id) AS last_delivery
FROM alerts a LEFT JOIN budgets b ON b.id = a.budget_id ORDER BY a.fired_at DESC, a.id LIMIT ?""",
        [int(limit)],
    )


@query
def webhook_attempts(per_target: int = 50) -> Query:
    """Each webhook target's newest delivery attempts, oldest first: what its circuit breaker is
    replayed from (``ledger.budgets.service.target_states``; 50 covers the 5 failures that open it)."""
    return Query(
        """SELECT target, alert_id, attempt, attempted_at, status, http_status, detail FROM alert_deliveries
QUALIFY row_number() OVER (PARTITION BY target ORDER BY attempted_at DESC, attempt DESC) <= ?
ORDER BY target, attempted_at, attempt""",
        [int(per_target)],
    )


@query
def run_budget_limits(trace_id: str) -> Query:
    """USD limits that applied to one run: from its budget events, and per-run spend budgets in scope."""
    return Query(
        f"""SELECT 'event' AS source, replace(g.name, 'turnledger.', '') AS name,
       TRY_CAST(json_extract_string(g.attributes, '$.limit_usd') AS DOUBLE) AS limit_usd,
       TRY_CAST(json_extract_string(g.attributes, '$.fraction') AS DOUBLE) AS fraction
FROM guard_events g
WHERE g.trace_id = ? AND g.name IN {_BUDGET_EVENTS} AND json_extract_string(g.attributes, '$.limit_usd') IS NOT NULL
UNION ALL
SELECT 'budget' AS source, b.name, b.limit_value::DOUBLE AS limit_usd, b.soft_fraction AS fraction
FROM budgets b JOIN runs r ON r.trace_id = ?
WHERE b.time_window = 'run' AND b.metric = 'spend' AND b.limit_value IS NOT NULL
  AND (b.scope_kind IN ('global', 'run') OR (b.scope_kind = 'tenant' AND b.scope_value = r.tenant)
       OR (b.scope_kind = 'agent' AND b.scope_value = r.agent_name))""",
        [trace_id, trace_id],
    )
