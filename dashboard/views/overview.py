"""Spend overview: where the money goes, under the sidebar's filters."""

from __future__ import annotations

from typing import Any

import streamlit as st

from dashboard import charts, ui
from dashboard.loaders import load
from dashboard.ui import count, first_row, metric, pct, plural, usd
from ledger import queries as q
from ledger.terms import TERMS, usd_columns

HIST_BINS_PER_DECADE = 5
VERDICT_COLOR = {"healthy": "green", "weak": "orange", "broken": "red"}


def _unknown_usage(f: q.Filters, guards: dict[str, Any]) -> None:
    """Charges whose source left a usage term unknown, with the most their price may be off (#43)."""
    if not guards.get("unknown_usage_calls"):
        return
    rows = load(q.unknown_usage_charges, f)
    bounded = rows["max_error_usd"].notna().all()
    error = f"by up to {usd(rows['max_error_usd'].sum())}" if bounded else "by an unbounded amount"
    sources = ", ".join(sorted({str(s) for s in rows["scope_name"].fillna("no scope")}))
    st.warning(
        f"{plural(guards['unknown_usage_calls'], 'model call')} came without a cache split or an output count "
        f"from their source ({sources}): priced as reported, their spend may be off {error}. "
        "`turnledger report` lists them."
    )


def render() -> None:
    st.title("Spend overview")
    st.caption("Where the money goes. Every figure on this page follows the filters in the sidebar.")
    f = ui.current_filters()
    if not ui.has_runs(f):
        return

    cost = first_row(load(q.cost_per_run, f))
    success = first_row(load(q.cost_per_successful_run, f))
    totals = first_row(load(q.charge_totals, f))  # cache hit rate and retry figures in one pass
    guards = first_row(load(q.guard_summary, f))

    c = st.columns(5)
    metric(c[0], "Runs", count(cost["runs"]), "Runs (traces) that started in the selected range and match the filters.")
    metric(c[1], "Total spend", usd(cost["total_usd"]), "Sum of every charge: every price term, every attempt.")
    metric(
        c[2],
        "Median cost per run",
        usd(cost["median_usd"]),
        "Half the runs cost less than this (nearest rank: a real run's cost).",
    )
    metric(
        c[3], "p95 cost per run", usd(cost["p95_usd"]), "95% of runs cost less than this. The long tail starts here."
    )
    metric(c[4], "p99 cost per run", usd(cost["p99_usd"]), "99% of runs cost less than this.")
    c = st.columns(5)
    metric(c[0], "Most expensive run", usd(cost["max_usd"]), "The single most expensive run (see Long tail for why).")
    metric(
        c[1],
        "Cost per successful run",
        usd(success.get("usd_per_successful_run")),
        "All spend, failed runs included, divided by the runs whose stop cause is `completed` "
        f"({count(success.get('successful_runs'))} of {count(success.get('runs'))}).",
    )
    verdict = totals.get("verdict") or q.cache_verdict(totals.get("hit_rate"))
    metric(
        c[2],
        "Cache hit rate",
        pct(totals.get("hit_rate")),
        "cache_read / (uncached input + cache write + cache read) input tokens. "
        "Above 70% is healthy, above 10% weak, else broken: a prefix that keeps changing.",
        delta=verdict,
        delta_color=VERDICT_COLOR.get(verdict, "gray"),
        delta_arrow="off",
    )
    metric(
        c[3],
        "Retry charges (answered)",
        usd(totals.get("retry_usd")),
        "The cost of the retries that were answered: what the attempts after the first of a retried call were "
        f"charged ({plural(totals.get('retry_attempts'), 'attempt')} in {plural(totals.get('runs_with_retries'), 'run')}). "
        "An attempt that failed (429, 529, a timeout) got no answer and is billed nothing by the provider: "
        f"{plural(totals.get('failed_attempts'), 'failed attempt')} here, at $0 each.",
        delta=f"{pct(totals.get('retry_share_of_spend'), 2)} of spend",
        delta_color="gray",
        delta_arrow="off",
    )
    metric(
        c[4],
        "Loop-detector trips",
        count(guards.get("loop_trips")),
        "Times a run kept repeating itself: its loop detector nudged or halted it, or turnledger found the "
        "repeat in the spans of a run that reports none (see Guards). A run stopped "
        "by the step limit is not a loop: it counts under Step-cap stops.",
        delta=f"in {plural(guards.get('runs_with_loop_trips'), 'run')}",
        delta_color="gray",
        delta_arrow="off",
    )
    guard_row = st.columns(6)
    metric(
        guard_row[0],
        "Step-cap stops",
        pct(guards.get("step_cap_rate")),
        "Share of runs stopped by the step limit (stop cause max_steps).",
    )
    metric(
        guard_row[1],
        "Budget stops",
        pct(guards.get("budget_stop_rate")),
        "Share of runs stopped because a hard budget ran out (stop cause budget_exceeded).",
    )
    metric(
        guard_row[2],
        "Unpriced calls",
        count(guards.get("unpriced_calls")),
        "Model calls whose model has no known price: counted at $0 until priced (see Models & prices).",
        delta="needs a price" if guards.get("unpriced_calls") else None,
        delta_color="red",
        delta_arrow="off",
    )
    metric(
        guard_row[3],
        "Mean cost per run",
        usd(cost.get("mean_usd")),
        "Shown for comparison only: the mean hides the long tail.",
    )
    metric(
        guard_row[4],
        "Invalid usage",
        count(guards.get("invalid_usage_calls")),
        "Model calls whose reported token counts could not be taken (negative, not a number, past 10^9): "
        "those terms count $0 and the call is flagged, never silently free (turnledger report lists them).",
        delta="check the producer" if guards.get("invalid_usage_calls") else None,
        delta_color="red",
        delta_arrow="off",
    )
    metric(
        guard_row[5],
        "Incomplete usage",
        count(guards.get("incomplete_usage_calls")),
        "Model calls that reported output but no input: the usage of part of the call (a stream whose "
        "instrumentation kept only its last event). Charged as sent, so too little; never read as a cache break "
        "(turnledger report lists them).",
        delta="check the instrumentation" if guards.get("incomplete_usage_calls") else None,
        delta_color="red",
        delta_arrow="off",
    )
    _unknown_usage(f, guards)

    bounds = first_row(load(q.time_bounds, f))
    bucket = ui.bucket_for(bounds["last_run"] - bounds["first_run"])
    left, right = st.columns(2)
    with left:
        spend = charts.spend_over_time(load(q.spend_over_time, f, bucket=bucket), bucket)
        charts.mark_versions(spend, load(q.version_changes, f), q.MARKED_DIMENSIONS)
        st.plotly_chart(spend, key="spend_time")
        st.caption(
            f"Each bar is one {bucket} of model-call spend (UTC); colours split it by model. Taller = more money. "
            "A dotted rule names a prompt, agent, service or tool-schema version where it first appeared."
        )
    with right:
        hist = load(q.cost_histogram, f, bins_per_decade=HIST_BINS_PER_DECADE)
        st.plotly_chart(
            charts.cost_distribution(hist, cost["median_usd"], cost["p95_usd"], HIST_BINS_PER_DECADE), key="cost_dist"
        )
        free = int(hist.loc[hist["lo_usd"] == 0, "runs"].sum())
        st.caption(
            "How many runs cost how much; the x axis is logarithmic (each step is ×10). "
            "Dashed lines: median and p95. A far-right bump is the long tail."
            + (f" {free} run(s) at $0 (unpriced models) are not drawn." if free else "")
        )
    left, right = st.columns(2)
    with left:
        models = load(q.model_attribution, f)
        st.plotly_chart(charts.model_terms(models), key="model_terms")
        st.caption(
            "Spend per model split into its price terms. Much green (cache read) and little blue "
            "(uncached input) is what a working prompt cache looks like."
        )
    with right:
        sites = load(q.call_site_attribution, f)
        st.plotly_chart(charts.spend_bars(sites, "call_site", "Spend per call site"), key="call_sites")
        st.caption("Spend per call site: the code path that made the model call (agent loop, summarizer, router…).")
    left, right = st.columns(2)
    with left:
        tenants = load(q.spend_by, f, by="tenant")
        st.plotly_chart(charts.spend_bars(tenants, "tenant", "Spend per tenant"), key="spend_tenant")
        st.caption("Spend per tenant, the customer or team a run served: who the money went to.")
    with right:
        agents = load(q.spend_by, f, by="agent")
        st.plotly_chart(charts.spend_bars(agents, "agent", "Spend per agent"), key="spend_agent")
        st.caption("Spend per agent: which of your agents costs what.")
    left, right = st.columns(2)
    with left:
        stops = load(q.stop_causes, f)
        st.plotly_chart(charts.stop_causes(stops), key="stop_causes")
        st.caption("How runs ended: green completed, red anything else (step cap, loop halt, budget stop, error).")
    with right:
        st.markdown("**Per model: calls, spend and each price term**")
        ui.table(
            models[["model", "calls", "usd_total", "share", *usd_columns(), "unpriced_calls"]],
            hide_index=True,
            column_config={
                "usd_total": st.column_config.NumberColumn("spend", format="$%.4f"),
                "share": st.column_config.ProgressColumn("share", format="percent", min_value=0, max_value=1),
                **{t.usd_column: st.column_config.NumberColumn(t.label, format="$%.4f") for t in TERMS},
                "unpriced_calls": st.column_config.NumberColumn("unpriced calls"),
            },
            key="models_table",
        )


ui.guarded(render)
