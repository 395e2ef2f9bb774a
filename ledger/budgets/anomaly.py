"""The cost-anomaly metric rule: a run far above its own agent's recent runs, alerted as it arrives.

``budget add runaway --metric cost_anomaly --limit 5 --window run`` judges every finished run
against its baseline as ``report``'s cost anomalies do (``ledger.queries.anomaly``: the p95 of the
agent's previous 200 finished runs, once they number 20); the value is the run's cost over that p95,
so no dollar threshold is needed. Over a time window the value is the window's most anomalous run.
"""

from __future__ import annotations

from typing import Any

from ledger.queries import ANOMALY_MIN_BASELINE, ANOMALY_WINDOW, Query, baselines

__all__ = ["ANOMALY_METRIC", "anomaly_query"]

ANOMALY_METRIC = "cost_anomaly"
_TIMES = "CASE WHEN b.baseline_runs >= ? AND b.baseline_p95_usd > 0 THEN b.usd_total / b.baseline_p95_usd END"


def anomaly_query(where: list[str], params: list[Any], select_trace: str, group: str) -> Query:
    """The rule's figures over the runs ``where`` selects (alias ``r``, as ``measure_query`` builds it)."""
    condition = " AND ".join(where)
    agents = f"agent_name IN (SELECT r.agent_name FROM runs r WHERE {condition})"
    picked = ", ".join(
        f"arg_max(b.{column}, {_TIMES}) AS {column}" for column in ("usd_total", "baseline_p95_usd", "baseline_runs")
    )
    sql = (
        f"WITH {baselines(ANOMALY_WINDOW, agents)}\n"
        f"SELECT {select_trace}count(*) AS runs, max({_TIMES}) AS times_baseline_p95, {picked}\n"
        f"FROM runs r JOIN b USING (trace_id) WHERE {condition}{group}"
    )
    return Query(sql, [*params, *[ANOMALY_MIN_BASELINE] * 4, *params])
