"""The ledger report: the figures ``turnledger report`` prints, as one stable dict.

``report --json`` emits exactly ``build_report(...)``; its schema is documented
in README.md ("Report JSON schema") and versioned by ``schema``. USD values are
JSON numbers rounded to 10 decimal places from exact DECIMAL sums.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

import duckdb

from . import queries as q
from . import terms
from .queries.health import LEVELS
from .sources import ConnectionSource, Source
from .wording import duration, plural

__all__ = ["REPORT_SCHEMA", "build_report", "format_report", "latency_figures"]

REPORT_SCHEMA = "turnledger.report/2"  # 2: latency, errors, tools (operations health), cost_anomalies


def _num(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(round(value, 10))
    if isinstance(value, float):
        return round(value, 10)
    return value


def build_report(
    source: Source | duckdb.DuckDBPyConnection, f: q.Filters = q.NO_FILTERS, *, top: int = 10
) -> dict[str, Any]:
    """The report of the runs ``f`` selects, read from a source (the file, a server) or an open connection."""
    if isinstance(source, duckdb.DuckDBPyConnection):
        source = ConnectionSource(source)

    def rows(builder: Callable[..., q.Query], **kwargs: Any) -> list[dict[str, Any]]:
        return [{k: _num(v) for k, v in row.items()} for row in source.records(builder, f, **kwargs)]

    cost = rows(q.cost_per_run)[0]
    success = rows(q.cost_per_successful_run)[0]
    money = rows(q.where_the_money_went)[0]
    retries = rows(q.retry_charges)
    trips = rows(q.loop_trips)
    guards = rows(q.guard_summary)[0]
    hit = money["cache_hit_rate"]
    long_tail = rows(q.long_tail, limit=top)
    anomalies = rows(q.cost_anomalies, limit=top)
    for row in (*long_tail, *anomalies):
        row["started_at"] = row["started_at"].isoformat() if row["started_at"] else None
    return {
        "schema": REPORT_SCHEMA,
        "runs": cost["runs"],
        "total_usd": cost["total_usd"],
        "cost_per_run": {k: cost[f"{k}_usd"] for k in ("median", "p95", "p99", "max", "mean")},
        "successful_runs": success["successful_runs"],
        "cost_per_successful_run": success["usd_per_successful_run"],
        "cache": {"hit_rate": hit, "verdict": q.cache_verdict(hit)},
        "where_the_money_went": {f"share_{t.key}": money[f"share_{t.key}"] for t in terms.TERMS},
        "retries": {
            "attempts": sum(r["attempts"] for r in retries),
            "usd": _num(sum(Decimal(str(r["usd"] or 0)) for r in retries)),
            "share_of_spend": sum(r["share_of_spend"] or 0 for r in retries),
            "by_cause": retries,
        },
        "loop_trips": {
            "trips": guards["loop_trips"],
            "detected": sum(t["detected"] for t in trips),  # seen in the spans; the rest the agents reported
            "runs_affected": guards["runs_with_loop_trips"],
            "spend_in_affected_runs": guards["spend_in_looping_runs"],
            "by_shape": trips,
        },
        "step_cap_halts": guards["step_cap_halts"],
        "step_cap_rate": guards["step_cap_rate"],
        "budget_stop_rate": guards["budget_stop_rate"],
        "unpriced_calls": guards["unpriced_calls"],
        "invalid_usage_calls": guards["invalid_usage_calls"],
        "incomplete_usage_calls": guards["incomplete_usage_calls"],
        "stop_causes": rows(q.stop_causes),
        "models": rows(q.model_attribution),
        "call_sites": rows(q.call_site_attribution),
        "unpriced": rows(q.unpriced_models),
        "invalid_usage": rows(q.invalid_usage_charges),
        "incomplete_usage": rows(q.incomplete_usage_charges),
        "runs_without_model_calls": rows(q.runs_without_model_calls),
        "long_tail": long_tail,
        "cost_anomalies": {
            "factor": q.ANOMALY_FACTOR,
            "window_runs": q.ANOMALY_WINDOW,
            "min_baseline_runs": q.ANOMALY_MIN_BASELINE,
            "runs": anomalies,
        },
        **_health(rows),
        "reported_cost": rows(q.reported_cost)[0],
    }


def latency_figures(run: Mapping[str, Any], calls: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``run_ms``, ``model_call_ms``, ``time_to_first_token_ms``, each ``{p50, p95, p99}``: from ``run_latency``'s
    row and ``model_call_latency``'s overall row (None for a measure without data)."""
    sources = {"run_ms": (run, "_ms"), "model_call_ms": (calls, "_ms"), "time_to_first_token_ms": (calls, "_ttft_ms")}
    return {name: {f"p{n}": row.get(f"p{n}{suffix}") for n in LEVELS} for name, (row, suffix) in sources.items()}


def _health(rows: Callable[..., list[dict[str, Any]]]) -> dict[str, Any]:
    """The operations figures: latency percentiles, model-call errors by cause, per-tool failures."""
    calls = rows(q.model_call_latency)
    latency = latency_figures(rows(q.run_latency)[0], calls[0])
    overall = rows(q.error_rates)[0]  # the overall row comes first
    tools = [
        {k: t[k] for k in ("tool", "calls", "failures", "hard_failures", "soft_failures", "failure_rate", "p50_ms",
                           "p95_ms", "runs", "share_of_runs")}
        for t in rows(q.tool_health)
    ]  # fmt: skip
    runs = rows(q.run_errors)
    return {
        "latency": latency,
        "errors": {
            "model_call_error_rate": overall["error_rate"],
            "by_cause": rows(q.error_causes),
            "run_error_rate": runs[0]["share_of_runs"],
            "runs_by_error_type": runs[1:],
        },
        "tools": tools,
    }


def _usd(v: Any) -> str:
    return "—" if v is None else f"${v:,.4f}"


def _pct(v: Any) -> str:
    return "—" if v is None else f"{v:.1%}"


# What adds the model calls to a source that traces only the agent (its tools and steps).
_NO_MODEL_CALLS_HINT = (
    "Trace the model client too: the anthropic or openai SDK's own tracing (OTEL on), or the OpenInference / "
    "OpenLLMetry instrumentation of the provider SDK or of LiteLLM beside the framework's"
)
_HEALTH_TOOLS = 10  # the most-called tools the human report lists (the JSON has them all)


def _format_health(r: dict[str, Any]) -> list[str]:
    """The short health section: latency percentiles, the model-call error rate and its causes, the tools."""
    lat = r["latency"]
    causes = r["errors"]["by_cause"]
    return [
        "",
        "health",
        *(
            f"  {label:<22} p50 {duration(lat[key]['p50'])}   p95 {duration(lat[key]['p95'])}   p99 {duration(lat[key]['p99'])}"
            for key, label in (("run_ms", "run"), ("model_call_ms", "model call"),
                               ("time_to_first_token_ms", "time to first token"))
        ),
        f"  model-call errors      {_pct(r['errors']['model_call_error_rate'])} of attempts"
        + "".join(f"; {e['cause']} {e['failed']} ({e['recovered']} recovered)" for e in causes),
        *(
            f"  tool {t['tool']:<20} {plural(t['calls'], 'call'):>10}  {t['failures']} failed ({_pct(t['failure_rate'])})"
            f"   p50 {duration(t['p50_ms'])}   p95 {duration(t['p95_ms'])}"
            for t in r["tools"][:_HEALTH_TOOLS]
        ),
    ]  # fmt: skip


def format_report(r: dict[str, Any]) -> str:
    """The human table: headline figures first, then the breakdowns."""
    c = r["cost_per_run"]
    lines = [
        f"{plural(r['runs'], 'run')}   total spend {_usd(r['total_usd'])}   successful {r['successful_runs']}"
        f"   cost per successful run {_usd(r['cost_per_successful_run'])}",
        f"cost per run   median {_usd(c['median'])}   p95 {_usd(c['p95'])}   p99 {_usd(c['p99'])}   max {_usd(c['max'])}",
        f"cache hit rate {_pct(r['cache']['hit_rate'])} ({r['cache']['verdict']})",
        "where the money went   "
        + "   ".join(f"{k.removeprefix('share_')} {_pct(v)}" for k, v in r["where_the_money_went"].items()),
        f"retries  {plural(r['retries']['attempts'], 'attempt')}, {_usd(r['retries']['usd'])} ({_pct(r['retries']['share_of_spend'])} of spend)",
        f"loop-detector trips  {r['loop_trips']['trips']}"
        + (f" ({r['loop_trips']['detected']} detected in the spans)" if r["loop_trips"]["detected"] else ""),
        *_format_health(r),
        "",
        "stop causes",
        *(
            f"  {s['stop_cause']:<16} {plural(s['runs'], 'run'):>11}  {_pct(s['share']):>6}  {_usd(s['usd'])}"
            for s in r["stop_causes"]
        ),
        "",
        f"per model ({' / '.join(t.label for t in terms.TERMS)})",
        *(
            f"  {m['model']:<24} {plural(m['calls'], 'call'):>12}  {_usd(m['usd_total']):>12}   "
            + " / ".join(_usd(m[t.usd_column]) for t in terms.TERMS)
            + ("   UNPRICED" if m["unpriced_calls"] else "")
            for m in r["models"]
        ),
        "",
        "per call site",
        *(
            f"  {s['call_site']:<24} {plural(s['calls'], 'call'):>12}  {_usd(s['usd_total']):>12}  {_pct(s['share'])}"
            for s in r["call_sites"]
        ),
        "",
        f"most expensive runs (top {len(r['long_tail'])})",
        *(
            f"  {t['trace_id']}  {_usd(t['usd_total']):>10}  {plural(t['turns'], 'turn'):>9}  {t['stop_cause'] or 'in progress':<14} "
            f"{t['agent_name'] or ''} / {t['tenant'] or '-'}"
            for t in r["long_tail"]
        ),
    ]
    a = r["cost_anomalies"]
    if a["runs"]:
        lines += [
            "",
            f"cost anomalies (above {a['factor']:g}x the p95 of the agent's previous {a['window_runs']} runs)",
        ]
        lines += [
            f"  {t['trace_id']}  {_usd(t['usd_total']):>10}  {t['times_baseline_p95']:.1f}x p95 {_usd(t['baseline_p95_usd'])}"
            f"  {t['agent_name'] or ''}"
            for t in a["runs"]
        ]
    if r["unpriced"]:
        lines += ["", "UNPRICED models (charged $0 until priced; add them to a --prices file):"]
        lines += [
            f"  {u['provider']}/{u['model']}: {plural(u['calls'], 'call')} in {plural(u['runs'], 'run')}"
            for u in r["unpriced"]
        ]
    if r["invalid_usage"]:
        lines += ["", "INVALID USAGE (token counts that could not be taken; those terms count $0):"]
        lines += [
            f"  {u['provider'] or '?'}/{u['model'] or '?'} ({u['scope_name'] or 'no scope'}): "
            f"{plural(u['calls'], 'call')} in {plural(u['runs'], 'run')}, e.g. span {u['last_trace_id']}/{u['last_span_id']}"
            for u in r["invalid_usage"]
        ]
    if r["incomplete_usage"]:
        lines += ["", "INCOMPLETE USAGE (output with no input: part of the call's usage, charged as sent, too little):"]
        lines += [
            f"  {u['provider'] or '?'}/{u['model'] or '?'} ({u['scope_name'] or 'no scope'}): "
            f"{plural(u['calls'], 'call')} in {plural(u['runs'], 'run')}, e.g. span {u['last_trace_id']}/{u['last_span_id']}"
            for u in r["incomplete_usage"]
        ]
    if r["runs_without_model_calls"]:
        lines += ["", "NO MODEL CALLS REPORTED (tool calls but no model call: the source traces the agent, not its model "
                  "client, so their spend is unknown, not $0):"]  # fmt: skip
        lines += [
            f"  {u['scopes'] or 'no scope'}: {plural(u['runs'], 'run')}, {plural(u['tool_calls'], 'tool call')}, "
            f"e.g. run {u['last_trace_id']}"
            for u in r["runs_without_model_calls"]
        ]
        lines += ["  " + _NO_MODEL_CALLS_HINT]
    return "\n".join(lines)
