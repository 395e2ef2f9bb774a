"""The long tail: the most expensive runs, how run costs are distributed, and what a typical run looks like."""

from __future__ import annotations

from .core import INPUT_TOKENS, NO_FILTERS, ROW_HIT_RATE, Filters, Query, filtered, query

__all__ = ["cost_by_turns", "cost_histogram", "long_tail", "typical_run"]


@query
def long_tail(f: Filters = NO_FILTERS, limit: int = 20) -> Query:
    """The most expensive runs, with what made them expensive."""
    w, p = filtered(f)
    return Query(
        w
        + f"""SELECT trace_id, agent_name, tenant, started_at, stop_cause, turns, model_calls, tool_calls,
       {INPUT_TOKENS} AS input_tokens, output_tokens, {ROW_HIT_RATE} AS hit_rate,
       retry_attempts, loop_trips, models, usd_total,
       usd_total / nullif(quantile_disc(usd_total, 0.5) OVER (), 0) AS times_median
FROM fr ORDER BY usd_total DESC, trace_id LIMIT ?""",
        [*p, int(limit)],
    )


@query
def cost_histogram(f: Filters = NO_FILTERS, bins_per_decade: int = 5) -> Query:
    """Runs per cost bin on a log scale; runs that cost $0 (unpriced) form one bin with lo = hi = 0."""
    n = int(bins_per_decade)
    if not 1 <= n <= 50:
        raise ValueError(f"bins_per_decade={bins_per_decade!r}: choose 1..50")
    w, p = filtered(f)
    return Query(
        w
        + """, b AS (SELECT CASE WHEN usd_total > 0 THEN floor(log10(usd_total::DOUBLE) * ?) END AS bin, count(*) AS runs
           FROM fr GROUP BY 1)
SELECT coalesce(power(10, bin / ?), 0) AS lo_usd, coalesce(power(10, (bin + 1) / ?), 0) AS hi_usd, runs
FROM b ORDER BY bin NULLS FIRST""",
        [*p, n, n, n],
    )


@query
def cost_by_turns(f: Filters = NO_FILTERS) -> Query:
    """Cost per run by number of turns (agent-loop model calls): the quadratic-growth view."""
    w, p = filtered(f)
    return Query(
        w
        + f"""SELECT turns, count(*) AS runs, quantile_disc(usd_total, 0.5) AS median_usd,
       quantile_disc(usd_total, 0.95) AS p95_usd, max(usd_total) AS max_usd, avg(usd_total) AS mean_usd,
       quantile_disc({INPUT_TOKENS}, 0.5) AS median_input_tokens
FROM fr GROUP BY turns ORDER BY turns""",
        p,
    )


@query
def typical_run(f: Filters = NO_FILTERS) -> Query:
    """The median run's shape, to say how an expensive run differs from it; and the tail's share (runs at or above p95)."""
    w, p = filtered(f)
    return Query(
        w
        + f"""SELECT count(*) AS runs, quantile_disc(turns, 0.5) AS median_turns,
       quantile_disc({INPUT_TOKENS}, 0.5) AS median_input_tokens,
       quantile_disc(usd_total, 0.5) AS median_usd, quantile_disc(usd_total, 0.95) AS p95_usd,
       sum(usd_total) FILTER (WHERE usd_total >= (SELECT quantile_disc(usd_total, 0.95) FROM fr))
           / nullif(sum(usd_total), 0) AS share_of_spend_from_p95,
       count(*) FILTER (WHERE usd_total >= (SELECT quantile_disc(usd_total, 0.95) FROM fr)) AS runs_from_p95
FROM fr""",
        p,
    )
