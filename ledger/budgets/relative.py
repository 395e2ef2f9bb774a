"""Baseline-relative rules: a candidate version measured against the baseline serving beside it.

The kill criteria of a rollout (the seeds, 004: "every threshold is measured
against the concurrently serving baseline … an alert that names the rollback
command") as rules: over the rule's window (a rolling hour, say) and scope, the
finished runs of the *candidate* (``prompt_version=v7``) and of the *baseline*
(``prompt_version=v6``) are measured with the definitions of ``turnledger
compare`` (``ledger.compare_stats.METRICS``), and the rule is exceeded when

* ``relative_to="baseline"``: candidate > factor x baseline, for a metric where
  lower is better (error rate, p95 latency, tool errors, escalations, steps per
  successful task, cost); candidate < factor x baseline where higher is better
  (success rate, cache hit rate);
* ``relative_to="forecast"`` (metric ``cost_per_hour``): the candidate's spend in
  the window > factor x its forecast, what the same runs would have cost at the
  baseline's cost per run (the window's length makes it "per hour").

A rule's ``limit`` is its factor and its value the candidate's figure over the
baseline's (None while the baseline's is 0: the rule compares candidate against
factor x baseline directly, so a candidate erring beside a flawless baseline is
still caught). Nothing is called until both versions have ``min_runs`` finished
runs in the window: a 5% canary's first ten runs say nothing. Relative rules
alert; they are never enforced by the gate, and have no warn band by default
(a kill criterion is met or not).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal

from ledger.errors import InputError

if TYPE_CHECKING:
    import duckdb

    from .rules import Level, Rule
    from .windows import Window

__all__ = [
    "DIMENSIONS",
    "RELATIVE_METRICS",
    "RELATIVE_TO",
    "TEMPLATES",
    "Relative",
    "Template",
    "Version",
    "measure_relative",
]

RELATIVE_TO = ("baseline", "forecast")
# The dimensions a version is a value of: ledger.queries.COMPARE_DIMENSIONS, spelled here without DuckDB
# for the parsers (`compare --by`, `budget add --candidate`); tests/ledger/test_compare.py checks they agree.
DIMENSIONS = (
    "prompt_version",
    "agent_version",
    "model",
    "tool_schema_version",
    "service_version",
    "environment",
    "variant",
)
# metric -> (is lower better, what it is): each a ``compare_stats`` metric of the same key, but
# ``cost_per_hour`` (the window's spend, against a forecast).
RELATIVE_METRICS: Mapping[str, tuple[bool, str]] = {
    "error_rate": (True, "share of finished runs that ended in error"),
    "latency_p95": (True, "95th-percentile run duration"),
    "tool_error_rate": (True, "share of tool calls that failed or found nothing"),
    "escalation_rate": (True, "share of runs handed to a person"),
    "steps_per_success": (True, "model calls per successful run"),
    "cost_p50": (True, "median cost per run"),
    "cost_p95": (True, "95th-percentile cost per run"),
    "cost_per_success": (True, "all spend over the successful runs"),
    "success_rate": (False, "share of runs that completed"),
    "cache_hit_rate": (False, "cache reads over input tokens"),
    "cost_per_hour": (True, "the candidate's spend in the window, against its forecast at the baseline's cost per run"),
}
DEFAULT_MIN_RUNS = 30  # as compare's MIN_RUNS: before it, no difference is called
_SCOPES = ("global", "tenant", "agent", "model")  # what the run filters (ledger.queries.Filters) can narrow to


@dataclass(frozen=True, slots=True)
class Version:
    """One side of the comparison: a value of a run dimension (``prompt_version=v7``)."""

    dimension: str
    value: str

    def __post_init__(self) -> None:
        if self.dimension not in DIMENSIONS:
            raise InputError(f"version dimension {self.dimension!r}: choose one of {', '.join(DIMENSIONS)}")
        if not self.value:
            raise InputError(f"version {self.dimension}= needs a value, e.g. {self.dimension}=v7")

    @classmethod
    def parse(cls, text: str) -> Version:
        dimension, sep, value = str(text).strip().partition("=")
        if not sep:
            raise InputError(f"version {text!r}: write DIMENSION=VALUE, e.g. prompt_version=v7")
        return cls(dimension.strip().replace("-", "_"), value.strip())

    def __str__(self) -> str:
        return f"{self.dimension}={self.value}"


@dataclass(frozen=True, slots=True)
class Relative:
    """What makes a rule baseline-relative: the two versions, how many runs each needs, the rollback text."""

    candidate: Version
    baseline: Version
    to: Literal["baseline", "forecast"] = "baseline"
    min_runs: int = DEFAULT_MIN_RUNS
    rollback: str = ""

    def __post_init__(self) -> None:
        if self.to not in RELATIVE_TO:
            raise InputError(f"relative to {self.to!r}: choose one of {', '.join(RELATIVE_TO)}")
        if self.candidate.dimension != self.baseline.dimension:
            raise InputError(f"candidate {self.candidate} and baseline {self.baseline} must be values of one dimension")
        if self.candidate.value == self.baseline.value:
            raise InputError(f"candidate and baseline are both {self.candidate}: pick two versions")
        if not isinstance(self.min_runs, int) or not 1 <= self.min_runs <= 1_000_000:
            raise InputError(f"min_runs={self.min_runs!r}: choose a whole number of runs from 1")
        if len(self.rollback) > 2_000:
            raise InputError(f"rollback text of {len(self.rollback)} characters: keep it under 2000")

    def check(self, metric: str, window: str, scope_kind: str) -> None:
        """Refuse a metric, window or scope this comparison cannot be measured over (the message names it)."""
        if metric not in RELATIVE_METRICS:
            raise InputError(f"metric {metric!r} for a relative rule: choose one of {', '.join(RELATIVE_METRICS)}")
        if (metric == "cost_per_hour") != (self.to == "forecast"):
            raise InputError(
                f"metric {metric!r}: cost_per_hour is measured relative to forecast, the others to baseline"
            )
        if window == "run":
            raise InputError("a relative rule compares many runs: choose a time window, e.g. rolling_hour")
        if scope_kind not in _SCOPES:
            raise InputError(f"a relative rule's scope is {', '.join(_SCOPES)}, not {scope_kind}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "to": self.to,
            "candidate": str(self.candidate),
            "baseline": str(self.baseline),
            "min_runs": self.min_runs,
            "rollback": self.rollback,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Relative:
        if not isinstance(d, Mapping):
            raise InputError(f"relative must be an object, got {type(d).__name__}")
        unknown = set(d) - {"to", "candidate", "baseline", "min_runs", "rollback"}
        if unknown:
            raise InputError(f"unknown relative field(s) {sorted(unknown)!r}")
        for required in ("candidate", "baseline"):
            if not d.get(required):
                raise InputError(f"a relative rule needs {required!r} (DIMENSION=VALUE)")
        raw = d.get("min_runs", DEFAULT_MIN_RUNS)
        if isinstance(raw, bool) or not isinstance(raw, int | str) or not str(raw).strip().isdigit():
            raise InputError(f"min_runs={raw!r}: choose a whole number of runs from 1")
        return cls(
            candidate=Version.parse(str(d["candidate"])),
            baseline=Version.parse(str(d["baseline"])),
            to=str(d.get("to") or "baseline"),  # type: ignore[arg-type]  # checked on construction
            min_runs=int(raw),
            rollback=str(d.get("rollback") or ""),
        )


@dataclass(frozen=True, slots=True)
class Template:
    """A kill criterion ready to use (``budget add NAME --template error-rate …``); every part can be overridden."""

    metric: str
    factor: Decimal
    to: Literal["baseline", "forecast"] = "baseline"
    window: str = "rolling_hour"

    def describe(self) -> str:
        spec = RELATIVE_METRICS[self.metric]
        if self.to == "forecast":
            return f"cost per hour > {self.factor}x forecast"
        if spec[0] and self.factor >= 2:
            return f"{self.metric} > {self.factor}x baseline"
        change = (self.factor - 1) * 100
        return f"{self.metric} {'+' if change >= 0 else ''}{change.normalize():f}% over baseline"


# The seeds' kill criteria (004, "Kill criteria"), over the rolling hour.
TEMPLATES: Mapping[str, Template] = {
    "error-rate": Template("error_rate", Decimal(2)),
    "p95-latency": Template("latency_p95", Decimal(2)),
    "cost-per-hour": Template("cost_per_hour", Decimal(3), "forecast"),
    "tool-errors": Template("tool_error_rate", Decimal("1.5")),
    "escalations": Template("escalation_rate", Decimal("1.3")),
    "steps-per-success": Template("steps_per_success", Decimal("1.4")),
}


# --- measurement --------------------------------------------------------------------------
def _exact(x: float) -> Decimal | None:
    """A compare estimate as Decimal, rounded as ``compare --json`` prints it (NaN: no data)."""
    return None if x != x else Decimal(str(round(x, 10)))


def _estimates(rule: Rule, rows: list[dict[str, Any]]) -> tuple[Decimal | None, Decimal | None, int, int]:
    """(candidate figure, baseline figure, candidate runs, baseline runs), compare's definitions."""
    from ledger.compare_stats import METRICS, Runs  # scipy loads with the first relative rule, not the budgets

    rel = rule.relative
    assert rel is not None
    cand = Runs.of([r for r in rows if r["version"] == rel.candidate.value])
    base = Runs.of([r for r in rows if r["version"] == rel.baseline.value])
    if rule.metric == "cost_per_hour":  # the candidate's spend, against the same runs at the baseline's cost per run
        spend, base_usd = (
            sum((Decimal(r["usd_total"]) for r in rows if r["version"] == side.value), Decimal(0))
            for side in (rel.candidate, rel.baseline)
        )
        forecast = base_usd / base.n * cand.n if base.n else None
        return spend, forecast, cand.n, base.n
    metric = next(m for m in METRICS if m.key == rule.metric)
    return _exact(metric.estimate(cand)), _exact(metric.estimate(base)), cand.n, base.n


def _scope_filters(rule: Rule) -> dict[str, str]:
    """The rule's scope as run filters (``Relative.check`` admitted only those ``Filters`` has)."""
    kind, value = rule.scope.kind, rule.scope.value
    return {} if kind == "global" or value is None else {kind: value}


def measure_relative(
    con: duckdb.DuckDBPyConnection, rule: Rule, window: Window
) -> tuple[Decimal | None, Level, dict[str, Any]]:
    """The rule's value (candidate over baseline), its level and the figures an alert carries."""
    from ledger import queries as q

    from .windows import naive_utc

    rel = rule.relative
    assert rel is not None
    f = q.Filters(
        since=naive_utc(window.start) if window.start else None,
        until=naive_utc(window.end) if window.end else None,
        **_scope_filters(rule),
    )
    query = q.compare_runs(f, by=rel.candidate.dimension, a=rel.baseline.value, b=rel.candidate.value)
    cand, base, n_cand, n_base = _estimates(rule, q.records(con, query))
    against = "forecast" if rel.to == "forecast" else "baseline"
    figures: dict[str, Any] = {
        "relative_to": rel.to,
        "factor": str(rule.limit.normalize()),
        "candidate": {"version": str(rel.candidate), "runs": n_cand, "value": _text(cand)},
        "baseline": {"version": str(rel.baseline), "runs": n_base, "value": _text(base), "is": against},
        "min_runs": rel.min_runs,
        "rollback": rel.rollback,
    }
    enough = min(n_cand, n_base) >= rel.min_runs
    figures["waiting_for_runs"] = not enough
    if not enough or cand is None or base is None:
        return None, "ok", figures
    return (cand / base if base else None), _level(rule, cand, base), figures


def _level(rule: Rule, cand: Decimal, base: Decimal) -> Level:
    """Strictly beyond the factor (the seeds' "above 2x baseline"); warn beyond the soft line, if the rule has one."""
    lower_is_better = RELATIVE_METRICS[rule.metric][0]

    def beyond(factor: Decimal) -> bool:
        return cand > factor * base if lower_is_better else cand < factor * base

    if beyond(rule.limit):
        return "exceeded"
    soft = rule.soft_threshold
    return "warn" if soft is not None and beyond(soft) else "ok"


def _text(v: Decimal | None) -> str | None:
    return None if v is None else format(v.normalize(), "f")
