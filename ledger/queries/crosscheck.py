"""What producers said their calls cost, beside what the ledger charged: a cross-check, never a charge.

Two figures come from the producer itself: the ``cost_usd`` a charged call's log event carried
(Claude Code's ``api_request``, kept on its span as ``turnledger.cost.usd``: ``ledger.claude_code``),
and the sum of its cost metric (``claude_code.cost.usage`` in ``metric_points``: ``ledger.metrics``).
Ours is priced from the token counts by our price book; the figures agree when both price books
agree, and a gap shows a price (or a lost call) to look at.

A metric's total over its points: every delta point summed; for a cumulative series, its last
point per start time (a restart begins a new count). The metric is narrowed to the filter's time
window and, when the filters select runs, to the sessions those runs belong to (their
conversation id, Claude Code's ``session.id``).
"""

from __future__ import annotations

from ledger import conventions as c

from .core import NO_FILTERS, Filters, Query, filtered, query, run_filtered

__all__ = ["COST_METRIC", "reported_cost"]

COST_METRIC = "claude_code.cost.usage"
_REPORTED = f"TRY_CAST(json_extract_string(s.attributes, '$.\"{c.COST_USD}\"') AS DECIMAL(38,12))"


@query
def reported_cost(f: Filters = NO_FILTERS, metric: str = COST_METRIC) -> Query:
    """One row: ``ours_usd`` (every charge), ``reported_calls`` and ``ours_for_reported_usd`` (the charges
    whose producer gave a cost, and ours for them), ``reported_usd`` (the producer's sum for those),
    ``metric_usd`` (``metric``'s total; NULL with no point) and ``metric_points``."""
    w, p = filtered(f)
    window, window_params = [], []
    if f.since is not None:
        window.append("time >= ?")
        window_params.append(f.since)
    if f.until is not None:
        window.append("time < ?")
        window_params.append(f.until)
    if run_filtered(f):
        window.append("session_id IN (SELECT conversation_id FROM fr)")
    where = "".join(f" AND {clause}" for clause in window)
    sql = (
        w
        + f""", reported AS (SELECT fc.usd, {_REPORTED} AS theirs FROM fc JOIN spans s USING (trace_id, span_id)),
points AS (SELECT * FROM metric_points WHERE name = ?{where}),
last_cumulative AS (
    SELECT value FROM points WHERE temporality = 'cumulative'
    QUALIFY row_number() OVER (PARTITION BY series, start_time ORDER BY time DESC) = 1
)
SELECT (SELECT coalesce(sum(usd), 0) FROM fc) AS ours_usd,
       (SELECT count(*) FROM reported WHERE theirs IS NOT NULL) AS reported_calls,
       (SELECT coalesce(sum(usd), 0) FROM reported WHERE theirs IS NOT NULL) AS ours_for_reported_usd,
       (SELECT sum(theirs) FROM reported) AS reported_usd,
       CASE WHEN (SELECT count(*) FROM points) > 0 THEN
           coalesce((SELECT sum(value) FROM points WHERE temporality = 'delta'), 0)
           + coalesce((SELECT sum(value) FROM last_cumulative), 0) END AS metric_usd,
       (SELECT count(*) FROM points) AS metric_points"""
    )
    return Query(sql, [*p, metric, *window_params])
