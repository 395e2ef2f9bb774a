"""Two versions compared honestly: each metric's difference, its interval, and a plain verdict.

``A`` is the baseline, ``B`` the candidate; every difference is B - A and every
verdict says what B is relative to A. Each metric declares once which
direction is better and how its 95% interval is had (``METRICS``):

* rates (success, error, escalation): each side's Wilson interval
  (``scipy.stats.binomtest``) combined into an interval for the difference by
  MOVER, which for two proportions is Newcombe's hybrid score interval; it
  stays sound at 0 events, where a bootstrap of a rate collapses to a point;
* percentiles (cost p50/p95, run duration p95): each side's distribution-free
  interval for its quantile (``scipy.stats.quantile_test``, order statistics),
  combined by MOVER. A p95 has an upper bound only from about 60 runs: with
  fewer, that metric says so instead of calling anything;
* model calls per successful run: Welch's interval for a difference of means
  (``scipy.stats.ttest_ind``);
* ratios of sums (cost per successful run: all spend over the successes; cache
  hit rate: cache reads over input tokens; tool error rate: failed or empty tool
  calls over tool calls): a percentile bootstrap of B - A
  (``scipy.stats.bootstrap``, each version's runs resampled on their own, a
  fixed seed, so the same ledger always prints the same interval);
* tool selection: a chi-square test of homogeneity over the tool-call counts
  (``scipy.stats.chi2_contingency``). Calls of one run are not independent, so
  its p-value is optimistic: read "different" as "look here".

MOVER (the method of variance estimates recovery, Zou & Donner 2008) needs only
each side's own interval, so every per-side interval above is exact or
well-studied and costs one pass over the runs, not thousands of resamples.

A difference is called (``better``/``worse``) only when its interval excludes
zero, and only when both versions have at least ``MIN_RUNS`` finished runs:
below that a nearest-rank p95 is one of the two largest runs and a rate moves
by several points per run (the seeds: "a 5% canary produces 10 samples and you
cannot conclude anything from 10 samples").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from scipy import stats

from . import queries as q
from .errors import InputError
from .sources import Source

__all__ = [
    "COMPARE_SCHEMA",
    "CONFIDENCE",
    "METRICS",
    "MIN_RUNS",
    "RESAMPLES",
    "SEED",
    "Metric",
    "Runs",
    "compare",
    "compare_rows",
    "difference_text",
    "format_comparison",
    "value_text",
]

COMPARE_SCHEMA = "turnledger.compare/1"
MIN_RUNS = 30  # finished runs per version before any difference is called
CONFIDENCE = 0.95
RESAMPLES = 2000  # bootstrap resamples (the ratios): enough that the 2.5% tails rest on 50 resamples each
SEED = 16  # the bootstrap's fixed seed: the same rows always give the same interval
_ELEMENTS_PER_BATCH = 2_000_000  # resampled values held at once (memory), whatever the versions' sizes

Verdict = Literal["better", "worse", "no detectable difference", "too few runs", "no data"]


@dataclass(frozen=True)
class Runs:
    """One version's finished runs as arrays (the columns of ``q.compare_runs``)."""

    usd: np.ndarray
    success: np.ndarray
    error: np.ndarray
    escalated: np.ndarray
    steps: np.ndarray
    duration_s: np.ndarray
    cache_read: np.ndarray
    input_tokens: np.ndarray
    tool_calls: np.ndarray
    tool_errors: np.ndarray  # tool calls that failed or found nothing (``runs.soft_failures``)

    @classmethod
    def of(cls, rows: Sequence[Mapping[str, Any]]) -> Runs:
        def column(name: str) -> np.ndarray:
            return np.array([float(r[name] or 0) for r in rows], dtype=float)

        def outcome(cause: str) -> np.ndarray:
            return np.array([r["stop_cause"] == cause for r in rows], dtype=float)

        return cls(
            usd=column("usd_total"),
            success=outcome("completed"),  # the ledger's one definition of a successful run
            error=outcome("error"),  # a model call failed for good, or the root span ended in ERROR
            escalated=outcome("handoff"),  # the model handed the task to a person
            steps=column("model_calls"),
            duration_s=column("duration_s"),
            cache_read=column("cache_read_tokens"),
            input_tokens=column("input_tokens"),
            tool_calls=column("tool_calls"),
            tool_errors=column("tool_errors"),
        )

    @property
    def n(self) -> int:
        return len(self.usd)


Interval = tuple[float, float]


@dataclass(frozen=True)
class Metric:
    """One compared figure: what it is computed from, and which direction is better."""

    key: str
    label: str
    unit: Literal["share", "usd", "steps", "seconds"]
    higher_is_better: bool
    kind: Literal["rate", "quantile", "mean_of_successes", "ratio"]
    column: str  # the Runs column (the numerator of a ratio)
    share: float = 0.0  # quantile: which one
    denominator: str = ""  # ratio: the Runs column summed below

    @property
    def method(self) -> str:
        return {
            "rate": "Wilson interval per version, MOVER (Newcombe) for the difference",
            "quantile": "order-statistic interval per version (scipy quantile_test), MOVER for the difference",
            "mean_of_successes": "Welch's interval for the difference of means",
            "ratio": f"percentile bootstrap of B - A, {RESAMPLES} resamples, seed {SEED}",
        }[self.kind]

    def estimate(self, r: Runs) -> float:
        x = getattr(r, self.column)
        if not r.n:
            return math.nan
        if self.kind == "rate":
            return float(x.mean())
        if self.kind == "quantile":
            # numpy's inverted_cdf is DuckDB's quantile_disc, the ledger's percentile: always a real run's value.
            return float(np.quantile(x, self.share, method="inverted_cdf"))
        if self.kind == "mean_of_successes":
            won = x[r.success > 0]
            return float(won.mean()) if len(won) else math.nan
        den = getattr(r, self.denominator).sum()
        return float(x.sum() / den) if den > 0 else math.nan

    def interval(self, a: Runs, b: Runs) -> Interval:
        """The interval of B - A (either end may be NaN when the runs cannot bound it); ratios: ``_bootstrap_ratios``."""
        if self.kind == "mean_of_successes":
            won_a, won_b = (getattr(r, self.column)[r.success > 0] for r in (a, b))
            ci = stats.ttest_ind(won_b, won_a, equal_var=False).confidence_interval(CONFIDENCE)
            return float(ci.low), float(ci.high)
        return _mover(self.estimate(a), self._side(a), self.estimate(b), self._side(b))

    def _side(self, r: Runs) -> Interval:
        x = getattr(r, self.column)
        if self.kind == "rate":
            ci = stats.binomtest(int(x.sum()), r.n).proportion_ci(CONFIDENCE, method="wilson")
        else:
            ci = stats.quantile_test(x, p=self.share).confidence_interval(CONFIDENCE)
        return float(ci.low), float(ci.high)


METRICS: tuple[Metric, ...] = (
    Metric("success_rate", "success rate", "share", True, "rate", "success"),
    Metric("error_rate", "error rate", "share", False, "rate", "error"),
    Metric("escalation_rate", "escalation (hand-off) rate", "share", False, "rate", "escalated"),
    Metric("cost_p50", "cost per run, p50", "usd", False, "quantile", "usd", share=0.5),
    Metric("cost_p95", "cost per run, p95", "usd", False, "quantile", "usd", share=0.95),
    # All spend, failed runs included, over the runs that succeeded (as ``q.cost_per_successful_run``).
    Metric("cost_per_success", "cost per successful run", "usd", False, "ratio", "usd", denominator="success"),
    Metric("steps_per_success", "model calls per successful run", "steps", False, "mean_of_successes", "steps"),
    Metric("latency_p95", "run duration, p95", "seconds", False, "quantile", "duration_s", share=0.95),
    Metric("cache_hit_rate", "cache hit rate", "share", True, "ratio", "cache_read", denominator="input_tokens"),
    # A share of tool calls, not of runs: the calls of one run are resampled together (a ratio's bootstrap).
    Metric("tool_error_rate", "tool error rate", "share", False, "ratio", "tool_errors", denominator="tool_calls"),
)


def _mover(est_a: float, ci_a: Interval, est_b: float, ci_b: Interval) -> Interval:
    """B - A from each side's own interval (MOVER; for two Wilson intervals, Newcombe's method 10)."""
    d = est_b - est_a
    return d - math.hypot(est_b - ci_b[0], ci_a[1] - est_a), d + math.hypot(ci_b[1] - est_b, est_a - ci_a[0])


def _bootstrap_ratios(ratios: Sequence[Metric], a: Runs, b: Runs) -> dict[str, Interval]:
    """Every ratio's interval of B - A from one bootstrap: the resamples are drawn once for all of them."""

    def values(r: Runs, i: np.ndarray) -> np.ndarray:
        out = []
        for m in ratios:
            num, den = getattr(r, m.column)[i].sum(axis=-1), getattr(r, m.denominator)[i].sum(axis=-1)
            out.append(np.divide(num, den, out=np.full(np.shape(den), np.nan), where=den > 0))
        return np.stack(out)

    result = stats.bootstrap(
        (np.arange(a.n), np.arange(b.n)),
        lambda i_a, i_b, axis=-1: values(b, i_b) - values(a, i_a),
        n_resamples=RESAMPLES,
        batch=max(1, _ELEMENTS_PER_BATCH // max(a.n, b.n)),
        confidence_level=CONFIDENCE,
        method="percentile",
        rng=np.random.default_rng(SEED),
    )
    ends = zip(
        np.atleast_1d(result.confidence_interval.low), np.atleast_1d(result.confidence_interval.high), strict=True
    )
    return {m.key: (float(low), float(high)) for m, (low, high) in zip(ratios, ends, strict=True)}


def _intervals(a: Runs, b: Runs) -> dict[str, Interval]:
    """Each metric's interval of B - A."""
    out = _bootstrap_ratios([m for m in METRICS if m.kind == "ratio"], a, b)
    return out | {m.key: m.interval(a, b) for m in METRICS if m.kind != "ratio"}


def _finite(x: float | None) -> float | None:
    return round(float(x), 10) if x is not None and math.isfinite(x) else None


def _verdict(m: Metric, interval: Interval) -> Verdict:
    low, high = interval
    if not (math.isfinite(low) and math.isfinite(high)):
        return "too few runs"  # the runs cannot bound it (a p95 of fewer than ~60 runs)
    if low <= 0 <= high:
        return "no detectable difference"
    return "better" if (low > 0) == m.higher_is_better else "worse"


def _says(verdict: Verdict, n_a: int, n_b: int) -> str:
    if verdict == "no detectable difference":
        return f"no detectable difference at n={n_a}/{n_b}"
    if verdict == "too few runs":
        if min(n_a, n_b) >= MIN_RUNS:
            return f"too few runs to bound this metric (n={n_a}/{n_b})"
        return f"too few runs to call (n={n_a}/{n_b}; at least {MIN_RUNS} per version)"
    if verdict == "no data":
        return "no data on one side"
    return verdict


def _metric(m: Metric, a: Runs, b: Runs, intervals: Mapping[str, Interval] | None) -> dict[str, Any]:
    """One metric's figures; ``intervals`` is None when there are too few runs to compute any."""
    value_a, value_b = m.estimate(a), m.estimate(b)
    interval: Interval | None = None
    verdict: Verdict
    if not (math.isfinite(value_a) and math.isfinite(value_b)):
        verdict = "no data"
    elif intervals is None:
        verdict = "too few runs"
    else:
        interval = intervals[m.key]
        verdict = _verdict(m, interval)
    return {
        "metric": m.key,
        "label": m.label,
        "unit": m.unit,
        "better": "higher" if m.higher_is_better else "lower",
        "a": _finite(value_a),
        "b": _finite(value_b),
        "difference": _finite(value_b - value_a),
        "interval": None if interval is None else [_finite(interval[0]), _finite(interval[1])],
        "method": m.method,
        "verdict": verdict,
        "says": _says(verdict, a.n, b.n),
    }


def _tool_selection(tools: Sequence[Mapping[str, Any]], a: str, b: str, enough: bool) -> dict[str, Any]:
    names = sorted({str(t["tool"]) for t in tools})
    table = np.zeros((2, len(names)), dtype=int)
    for t in tools:
        table[0 if t["version"] == a else 1, names.index(str(t["tool"]))] += int(t["calls"])
    calls = table.sum(axis=1)
    shares = {
        side: {n: _finite(table[row, j] / calls[row]) for j, n in enumerate(names)} if calls[row] else {}
        for row, side in enumerate(("a", "b"))
    }
    p_value: float | None = None
    verdict: str
    if not enough:
        verdict = "too few runs"
    elif len(names) < 2 or not calls.all():
        verdict = "no detectable difference"  # one tool, or one side called none: no distribution to compare
    else:
        p_value = float(stats.chi2_contingency(table).pvalue)
        verdict = "different" if p_value < 1 - CONFIDENCE else "no detectable difference"
    return {
        "calls": {"a": int(calls[0]), "b": int(calls[1])},
        "shares": shares,
        "p_value": _finite(p_value) if p_value is not None else None,
        "method": "chi-square test of homogeneity over tool-call counts",
        "verdict": verdict,
    }


def compare_rows(
    runs: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], by: str, a: str, b: str
) -> dict[str, Any]:
    """The comparison of versions ``a`` (baseline) and ``b`` (candidate) from ``q.compare_runs``/``compare_tools`` rows."""
    side_a = Runs.of([r for r in runs if r["version"] == a])
    side_b = Runs.of([r for r in runs if r["version"] == b])
    enough = min(side_a.n, side_b.n) >= MIN_RUNS
    intervals = _intervals(side_a, side_b) if enough else None
    return {
        "schema": COMPARE_SCHEMA,
        "by": by,
        "a": a,
        "b": b,
        "runs": {"a": side_a.n, "b": side_b.n},
        "min_runs": MIN_RUNS,
        "confidence": CONFIDENCE,
        "metrics": [_metric(m, side_a, side_b, intervals) for m in METRICS],
        "tool_selection": _tool_selection(tools, a, b, enough),
    }


def compare(source: Source, f: q.Filters, by: str, a: str, b: str) -> dict[str, Any]:
    """``compare_rows`` over the rows a source (the file, a server) holds for versions ``a`` and ``b``."""
    if a == b:
        raise InputError(f"compare needs two different versions; got {a!r} twice")
    if by in q.FILTER_DIMENSIONS:  # a typo'd version is named with the near ones, never an empty comparison
        options = source.records(q.filter_options)
        for version in (a, b):
            q.check_values({by: version}, options)
    runs = source.records(q.compare_runs, f, by=by, a=a, b=b)
    tools = source.records(q.compare_tools, f, by=by, a=a, b=b)
    return compare_rows(runs, tools, by, a, b)


# --- in words ------------------------------------------------------------------------------
def value_text(v: Any, unit: str) -> str:
    """A metric's figure in its unit: 12.0%, $0.0123, 4.2 s, 3.50."""
    if v is None:
        return "—"
    if unit == "share":
        return f"{v:.1%}"
    if unit == "usd":
        return f"${v:,.4f}"
    if unit == "seconds":
        return f"{v:,.1f} s"
    return f"{v:,.2f}"


def _signed(v: float, unit: str) -> str:
    if unit == "share":  # rates differ in percentage points
        return f"{v * 100:+.1f}"
    return ("-" if v < 0 else "+") + value_text(abs(v), unit)


def difference_text(m: dict[str, Any]) -> str:
    """A metric's B - A with its interval: "+8.0 pts [+3.6, +12.5]" for rates, "+$0.0040 [+$0.0031, +$0.0049]" else."""
    unit, d = m["unit"], m["difference"]
    if d is None:
        return "—"
    text = _signed(d, unit) + (" pts" if unit == "share" else "")
    if m["interval"] is not None:
        low, high = m["interval"]
        text += (
            f" [{_signed(low, unit) if low is not None else '?'}, {_signed(high, unit) if high is not None else '?'}]"
        )
    return text


def format_comparison(r: dict[str, Any]) -> str:
    """The human table: one line per metric (A, B, B - A [95% interval], verdict), then tool selection."""
    n_a, n_b = r["runs"]["a"], r["runs"]["b"]
    lines = [
        f"{r['by']}: A = {r['a']} ({n_a} runs) vs B = {r['b']} ({n_b} runs); B - A with 95% intervals",
        f"{'metric':<31} {'better':<7} {'A':>9} {'B':>9}  {'B - A [95% interval]':<34} verdict",
    ]
    for m in r["metrics"]:
        lines.append(
            f"{m['label']:<31} {m['better']:<7} {value_text(m['a'], m['unit']):>9} "
            f"{value_text(m['b'], m['unit']):>9}  {difference_text(m):<34} {m['says']}"
        )
    tools = r["tool_selection"]
    shares = tools["shares"]
    names = sorted(set(shares["a"]) | set(shares["b"]))
    lines += ["", f"tool selection ({tools['calls']['a']} vs {tools['calls']['b']} calls): {tools['verdict']}"]
    if tools["p_value"] is not None:
        lines[-1] += f" (chi-square p = {tools['p_value']:.3g})"
    lines += [
        f"  {n:<30} {value_text(shares['a'].get(n), 'share'):>8} {value_text(shares['b'].get(n), 'share'):>8}"
        for n in names
    ]
    return "\n".join(lines)
