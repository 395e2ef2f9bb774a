"""Where the money goes: cost per run, per model and call site, per price term, over time, on retries."""

from __future__ import annotations

from ledger import terms
from ledger.terms import usd_columns

from .core import (
    BUCKETS,
    HIT_RATE,
    INPUT_TOKENS,
    NO_FILTERS,
    Filters,
    Query,
    choose,
    filtered,
    query,
    sums,
    verdict_sql,
)

__all__ = [
    "cache_hit_rate",
    "call_site_attribution",
    "charge_totals",
    "cost_per_run",
    "cost_per_successful_run",
    "incomplete_usage_charges",
    "invalid_usage_charges",
    "model_attribution",
    "retry_charges",
    "runs_without_model_calls",
    "spend_over_time",
    "unpriced_models",
    "where_the_money_went",
]


@query
def cost_per_run(f: Filters = NO_FILTERS) -> Query:
    w, p = filtered(f)
    return Query(
        w
        + """SELECT count(*) AS runs, coalesce(sum(usd_total), 0) AS total_usd,
       quantile_disc(usd_total, 0.5) AS median_usd, quantile_disc(usd_total, 0.95) AS p95_usd,
       quantile_disc(usd_total, 0.99) AS p99_usd, max(usd_total) AS max_usd, avg(usd_total) AS mean_usd
FROM fr""",
        p,
    )


@query
def cost_per_successful_run(f: Filters = NO_FILTERS) -> Query:
    """All spend (failed runs included) divided by the runs that completed."""
    w, p = filtered(f)
    return Query(
        w
        + """SELECT count(*) FILTER (WHERE stop_cause = 'completed') AS successful_runs, count(*) AS runs,
       coalesce(sum(usd_total), 0) AS total_usd,
       sum(usd_total) / nullif(count(*) FILTER (WHERE stop_cause = 'completed'), 0) AS usd_per_successful_run,
       quantile_disc(usd_total, 0.5) FILTER (WHERE stop_cause = 'completed') AS median_successful_usd
FROM fr""",
        p,
    )


_HIT_GROUPS = {"overall": None, "model": "model", "run": "trace_id", "tenant": "tenant", "call_site": "call_site"}


@query
def cache_hit_rate(f: Filters = NO_FILTERS, by: str = "overall") -> Query:
    """Hit rate overall or per model / run / tenant / call site (see ``run_turns`` for per turn)."""
    choose("by", by, _HIT_GROUPS)
    w, p = filtered(f)
    group = _HIT_GROUPS[by]
    select = f"{group} AS {by}, " if group else ""
    tail = f" GROUP BY {group} ORDER BY hit_rate NULLS LAST" if group else ""
    return Query(
        w
        + f"""SELECT {select}{HIT_RATE} AS hit_rate, {sums(terms.input_token_columns())},
       {verdict_sql(HIT_RATE)} AS verdict
FROM fc{tail}""",
        p,
    )


def _term_shares() -> str:
    # share_uncached_input, share_output, ...: one per term, read when the query is built
    return ",\n       ".join(f"sum({t.usd_column}) / nullif(sum(usd), 0) AS share_{t.key}" for t in terms.TERMS)


@query
def where_the_money_went(f: Filters = NO_FILTERS) -> Query:
    w, p = filtered(f)
    return Query(
        w
        + f"""SELECT coalesce(sum(usd), 0) AS total_usd,
       {_term_shares()},
       {HIT_RATE} AS cache_hit_rate
FROM fc""",
        p,
    )


def _attribution(f: Filters, column: str) -> Query:
    w, p = filtered(f)
    return Query(
        w
        + f"""SELECT {column}, count(*) AS calls, {sums(usd_columns())}, sum(usd) AS usd_total,
       sum(usd) / nullif(sum(sum(usd)) OVER (), 0) AS share, count(*) FILTER (WHERE unpriced) AS unpriced_calls
FROM fc GROUP BY {column} ORDER BY usd_total DESC, {column}""",
        p,
    )


@query
def model_attribution(f: Filters = NO_FILTERS) -> Query:
    """Per model: calls and the USD of each price term, with the share of total spend."""
    return _attribution(f, "model")


@query
def call_site_attribution(f: Filters = NO_FILTERS) -> Query:
    """Per call-site label (the agent loop, a summarizer inside a tool, a router...)."""
    return _attribution(f, "call_site")


@query
def retry_charges(f: Filters = NO_FILTERS) -> Query:
    """Attempts after the first, by retry cause, with their USD and share of all spend."""
    w, p = filtered(f)
    return Query(
        w
        + """SELECT coalesce(nullif(retry_cause, ''), 'unknown') AS cause, count(*) AS attempts, sum(usd) AS usd,
       sum(usd) / nullif((SELECT sum(usd) FROM fc), 0) AS share_of_spend, count(DISTINCT trace_id) AS runs
FROM fc WHERE attempt > 1 GROUP BY 1 ORDER BY usd DESC""",
        p,
    )


@query
def charge_totals(f: Filters = NO_FILTERS) -> Query:
    """One pass over the charges for the headline figures: cache hit rate (and verdict), retry
    attempts with their USD and share of all spend, failed attempts (billed nothing), unpriced calls."""
    w, p = filtered(f)
    return Query(
        w
        + f"""SELECT coalesce(sum(usd), 0) AS total_usd, {HIT_RATE} AS hit_rate,
       {verdict_sql(HIT_RATE)} AS verdict,
       count(*) FILTER (WHERE attempt > 1) AS retry_attempts,
       coalesce(sum(usd) FILTER (WHERE attempt > 1), 0) AS retry_usd,
       coalesce(sum(usd) FILTER (WHERE attempt > 1), 0) / nullif(sum(usd), 0) AS retry_share_of_spend,
       -- distinct over the few retried rows only: a FILTERed DISTINCT aggregate hashes every row
       (SELECT count(DISTINCT trace_id) FROM fc WHERE attempt > 1) AS runs_with_retries,
       count(*) FILTER (WHERE status_code = 'ERROR') AS failed_attempts,
       count(*) FILTER (WHERE unpriced) AS unpriced_calls
FROM fc""",
        p,
    )


@query
def unpriced_models(f: Filters = NO_FILTERS) -> Query:
    w, p = filtered(f)
    return Query(
        w
        + f"""SELECT provider, model, count(*) AS calls, count(DISTINCT trace_id) AS runs,
       sum({INPUT_TOKENS}) AS input_tokens, sum(output_tokens) AS output_tokens
FROM fc WHERE unpriced GROUP BY provider, model ORDER BY calls DESC""",
        p,
    )


@query
def runs_without_model_calls(f: Filters = NO_FILTERS) -> Query:
    """Runs whose source reported tool calls but no model call, by the instrumentation scopes that sent
    them, with the latest such run to look at: an agent traced without its model client (CrewAI under
    OpenInference's documented setup) spends money the ledger never sees. Unknown, never a $0 run."""
    w, p = filtered(f)
    return Query(
        w
        + """, blind AS (
    SELECT r.trace_id, r.started_at, r.tool_calls,
           (SELECT string_agg(DISTINCT nullif(s.scope_name, ''), ', ' ORDER BY nullif(s.scope_name, ''))
            FROM spans s WHERE s.trace_id = r.trace_id AND s.start_time >= r.started_at) AS scopes
    FROM fr r WHERE coalesce(r.model_calls, 0) = 0 AND r.tool_calls > 0
)
SELECT coalesce(scopes, '') AS scopes, count(*) AS runs, sum(tool_calls) AS tool_calls,
       arg_max(trace_id, started_at) AS last_trace_id
FROM blind GROUP BY ALL ORDER BY runs DESC, scopes""",
        p,
    )


@query
def incomplete_usage_charges(f: Filters = NO_FILTERS) -> Query:
    """Charges flagged incomplete_usage (usage of part of the call: output with no input), by provider,
    model and instrumentation, with the latest such span to look at: charged as sent, so too little."""
    w, p = filtered(f)
    return Query(
        w
        + """SELECT c.provider, c.model, s.scope_name, count(*) AS calls, count(DISTINCT c.trace_id) AS runs,
       sum(c.output_tokens) AS output_tokens,
       arg_max(c.trace_id, c.start_time) AS last_trace_id, arg_max(c.span_id, c.start_time) AS last_span_id
FROM fc c JOIN spans s USING (trace_id, span_id)
WHERE c.incomplete_usage GROUP BY c.provider, c.model, s.scope_name ORDER BY calls DESC, c.provider, c.model""",
        p,
    )


@query
def invalid_usage_charges(f: Filters = NO_FILTERS) -> Query:
    """Charges flagged invalid_usage (token counts that could not be taken), by provider, model and
    instrumentation: who sends them, with the latest such span to look at."""
    w, p = filtered(f)
    return Query(
        w
        + """SELECT c.provider, c.model, s.scope_name, count(*) AS calls, count(DISTINCT c.trace_id) AS runs,
       arg_max(c.trace_id, c.start_time) AS last_trace_id, arg_max(c.span_id, c.start_time) AS last_span_id
FROM fc c JOIN spans s USING (trace_id, span_id)
WHERE c.invalid_usage GROUP BY c.provider, c.model, s.scope_name ORDER BY calls DESC, c.provider, c.model""",
        p,
    )


@query
def spend_over_time(f: Filters = NO_FILTERS, bucket: str = "day") -> Query:
    choose("bucket", bucket, BUCKETS)
    w, p = filtered(f)
    return Query(
        w + f"SELECT date_trunc('{bucket}', start_time) AS bucket, model, sum(usd) AS usd, count(*) AS calls "
        "FROM fc GROUP BY 1, 2 ORDER BY 1, 2",
        p,
    )
