"""Cost anomalies: runs far above their own agent's recent runs, with no fixed dollar threshold.

Each run is measured against its baseline: the ``window`` runs of the same
agent that started just before it (itself excluded), over the whole ledger
whatever the filters (they choose which flagged runs are listed). A run is
flagged when it cost more than ``factor`` times that baseline's p95
(nearest-rank, as every percentile here) and the baseline holds at least
``min_baseline`` runs; fewer than that and the p95 is one of a handful of runs,
too unsteady to call anything an outlier.

The defaults: ``factor`` 5 (the seeds' long tail, a run at 38x the median, is
many times any p95 of ordinary runs, while a busy agent's ordinary spread
stays within a few times it); ``window`` 200 runs (recent enough to follow a
price or prompt change, large enough for a p95); ``min_baseline`` 20 runs.
"""

from __future__ import annotations

from .core import NO_FILTERS, Filters, Query, filtered, query

__all__ = ["ANOMALY_FACTOR", "ANOMALY_MIN_BASELINE", "ANOMALY_WINDOW", "baselines", "cost_anomalies"]

ANOMALY_FACTOR = 5.0
ANOMALY_WINDOW = 200
ANOMALY_MIN_BASELINE = 20


def baselines(window: int = ANOMALY_WINDOW, agents: str = "TRUE") -> str:
    """CTE ``b``: each finished run's cost beside the p95 and count of its agent's previous ``window`` runs.

    ``agents``: a condition on ``agent_name`` narrowing the partitions computed (the budget rule
    measures only the agents of the runs it judges); a run's baseline is the same either way.
    """
    # The frame size is a validated int: DuckDB takes no bound parameter there.
    return f"""b AS (
    SELECT trace_id, agent_name, started_at, usd_total,
           quantile_disc(usd_total, 0.95) OVER baseline AS baseline_p95_usd,
           count(*) OVER baseline AS baseline_runs
    FROM runs WHERE stop_cause IS NOT NULL AND {agents}
    WINDOW baseline AS (PARTITION BY agent_name ORDER BY started_at, trace_id
                        ROWS BETWEEN {int(window)} PRECEDING AND 1 PRECEDING)
)"""


@query
def cost_anomalies(
    f: Filters = NO_FILTERS,
    factor: float = ANOMALY_FACTOR,
    window: int = ANOMALY_WINDOW,
    min_baseline: int = ANOMALY_MIN_BASELINE,
    limit: int = 50,
) -> Query:
    """Runs above ``factor`` x the p95 of their agent's previous ``window`` runs, most anomalous first."""
    if not 1 <= int(window) <= 10_000:
        raise ValueError(f"window={window!r}: choose 1..10000 runs")
    if not 1 <= int(min_baseline) <= int(window):
        raise ValueError(f"min_baseline={min_baseline!r}: choose 1..window ({window})")
    if not float(factor) > 0:
        raise ValueError(f"factor={factor!r}: choose a positive multiple")
    w, p = filtered(f)
    return Query(
        w
        + f""", {baselines(window)}
SELECT fr.trace_id, fr.agent_name, fr.tenant, fr.started_at, fr.stop_cause, fr.turns, b.usd_total,
       b.baseline_p95_usd, b.baseline_runs, b.usd_total / b.baseline_p95_usd AS times_baseline_p95
FROM b JOIN fr USING (trace_id)
WHERE b.baseline_runs >= ? AND b.baseline_p95_usd > 0 AND b.usd_total > ? * b.baseline_p95_usd
ORDER BY times_baseline_p95 DESC, fr.trace_id LIMIT ?""",
        [*p, int(min_baseline), float(factor), int(limit)],
    )
