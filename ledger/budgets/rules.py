"""Budget rules: what is measured, over which spend, in which window, against what limit.

A rule is a *scope* (whose charges count), a *window* (which time span), a
*metric* (what is computed over them) and a *limit* with a *soft fraction*.

* Spend rules (``metric="spend"``) are budgets in USD: warn at ``soft × limit``,
  exceeded at ``limit``, both inclusive (the seed's ``spent >= 0.8 * limit``).
  They are the only rules the harness enforces.
* Metric rules put the same machinery on a run-level figure: p95 cost per run,
  cost per successful run, loop-trip rate, step-cap rate (ceilings, like spend)
  and the cache hit rate (a floor: exceeded *below* the limit, warned below
  ``limit ÷ soft``; floors default to ``soft = 1``, i.e. no warn band, because a
  hit rate just above its floor is healthy, not nearly spent).
* Health and quality rules (``HEALTH_METRICS``): p99 run latency in ms, the
  model-call error rate, a tool's failure rate (``tool=NAME`` scope, or every
  tool), safety violations (a count: ``--limit 1`` fires at the first one) and
  the task-success floor; usually over ``rolling_5m``.

Money and ratios are Decimal; nothing is compared in float.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Mapping
from dataclasses import InitVar, dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ledger.errors import InputError, NotFound

from .relative import RELATIVE_METRICS, Relative

__all__ = [
    "HEALTH_METRICS",
    "LEVELS",
    "METRICS",
    "SCOPE_KINDS",
    "WINDOWS",
    "BudgetError",
    "Level",
    "MetricSpec",
    "Rule",
    "Scope",
    "ScopeValues",
    "UnknownBudget",
    "WebhookTarget",
    "covers",
    "decimal_str",
    "format_metric",
    "format_money",
    "format_ratio",
    "level_for",
    "parse_money",
]

Level = Literal["ok", "warn", "exceeded"]
LEVELS: tuple[str, ...] = ("ok", "warn", "exceeded")  # in order of severity
SCOPE_KINDS: tuple[str, ...] = ("global", "tenant", "agent", "model", "call_site", "run", "tool")
WINDOWS: tuple[str, ...] = ("run", "rolling_5m", "rolling_hour", "rolling_day", "day", "month")


class BudgetError(InputError):
    """A budget rule or request is invalid; the message names the bad value."""


class UnknownBudget(NotFound):
    """No budget rule with that id or name."""


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str
    unit: Literal["usd", "ratio", "ms", "count", "factor"]  # factor: a relative rule's candidate over its baseline
    direction: Literal["ceiling", "floor"]
    default_soft: float
    description: str


# Health and quality (issue #15): measured over runs, charges, tool spans or evaluations (``evaluate``).
HEALTH_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec(
        "p99_run_latency", "ms", "ceiling", 0.8, "99th-percentile wall time (ms) of the runs started in the window"
    ),
    MetricSpec("model_call_error_rate", "ratio", "ceiling", 0.8, "failed model-call attempts / all attempts"),
    MetricSpec("tool_failure_rate", "ratio", "ceiling", 0.8, "tool calls failed (hard or soft) / tool calls"),
    MetricSpec("safety_violations", "count", "ceiling", 1.0, "failed safety evaluations judged in the window"),
    MetricSpec("task_success_rate", "ratio", "floor", 1.0, "finished runs that completed with no failed evaluation"),
)

METRICS: Mapping[str, MetricSpec] = {
    m.name: m
    for m in (
        MetricSpec("spend", "usd", "ceiling", 0.8, "USD charged in the window (all four price terms)"),
        MetricSpec("p95_run_cost", "usd", "ceiling", 0.8, "95th-percentile cost of the runs started in the window"),
        MetricSpec(
            "cost_per_successful_run",
            "usd",
            "ceiling",
            0.8,
            "all spend of the window's runs divided by the runs that completed",
        ),
        MetricSpec("cache_hit_rate", "ratio", "floor", 1.0, "cache_read / (uncached + cache_write + cache_read)"),
        MetricSpec("loop_trip_rate", "ratio", "ceiling", 0.8, "share of runs with at least one loop-detector trip"),
        MetricSpec("step_cap_rate", "ratio", "ceiling", 0.8, "share of runs stopped by the step cap (max_steps)"),
        MetricSpec(
            "cost_anomaly", "factor", "ceiling", 1.0, "a run's cost over the p95 of its agent's previous runs"
        ),  # ledger.budgets.anomaly
        *HEALTH_METRICS,
    )
}


MAX_MONEY = Decimal(10**15)  # a budget amount: DECIMAL(38, 12) holds 10^26; no budget is near 10^15


def parse_money(value: str | int | float | Decimal, what: str = "limit") -> Decimal:
    """A non-negative exact amount; floats go through ``str`` so 0.1 stays 0.1."""
    try:
        amount = value if isinstance(value, Decimal) else Decimal(str(value).strip().lstrip("$"))
    except InvalidOperation:
        raise BudgetError(f"{what}={value!r} is not a number") from None
    if not amount.is_finite() or not 0 <= amount <= MAX_MONEY:  # past DECIMAL(38, 12) was a 500
        raise BudgetError(f"{what}={value!r} must be a finite number from 0 to {MAX_MONEY:,}")
    return amount


def decimal_str(amount: Decimal | None) -> str | None:
    """Exact, without the ledger's 12 trailing places or an exponent: ``0.82``, ``1``."""
    if amount is None:
        return None
    return format(amount.normalize(), "f")


def format_money(amount: Decimal) -> str:
    """``$1.00`` for whole cents, else four places (``$0.8125``)."""
    cents = amount.quantize(Decimal("0.01"))
    return f"${cents}" if cents == amount else f"${amount.quantize(Decimal('0.0001'))}"


def format_ratio(value: Decimal) -> str:
    """A rate or the cache hit rate as a percentage with one decimal (``0.42`` -> ``42.0%``)."""
    return f"{value:.1%}"


def format_metric(metric: str, value: Decimal) -> str:
    """A metric's figure in its own unit: USD for spend and cost metrics, a percentage for rates,
    ms for latency, a whole count for violations, a multiple for factors (the one format of
    ``budget list``, alert texts and the dashboard)."""
    unit = spec.unit if (spec := METRICS.get(metric)) is not None else "usd"
    if unit == "ratio":
        return format_ratio(value)
    if unit == "ms":
        return f"{value:,.0f} ms"
    if unit == "count":
        return f"{value:,.0f}"
    if unit == "factor":
        return f"{value:.2f}x"
    return format_money(value)


@dataclass(frozen=True, slots=True)
class Scope:
    """Whose charges a rule counts: everything, or one tenant/agent/model/call site/run."""

    kind: str = "global"
    value: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in SCOPE_KINDS:
            raise BudgetError(f"scope kind {self.kind!r}: choose one of {', '.join(SCOPE_KINDS)}")
        if self.kind == "global" and self.value is not None:
            raise BudgetError(f"a global scope takes no value, got {self.value!r}")
        if self.kind != "global" and not self.value:
            raise BudgetError(f"scope {self.kind!r} needs a value, e.g. {self.kind}=NAME")

    @classmethod
    def parse(cls, text: str) -> Scope:
        """``global``, or ``KIND=VALUE`` (``tenant=acme``, ``model=claude-opus-5``, ``run=<trace id>``)."""
        text = text.strip()
        if text in ("global", "*", ""):
            return cls()
        kind, sep, value = text.partition("=")
        if not sep:
            raise BudgetError(f"scope {text!r}: write global or KIND=VALUE with KIND one of {', '.join(SCOPE_KINDS)}")
        return cls(kind.strip().replace("-", "_"), value.strip())

    def __str__(self) -> str:
        return "global" if self.kind == "global" else f"{self.kind}={self.value}"


ScopeValues = Mapping[str, Collection[str]]
"""What a model call or an ingested batch carries, by scope kind:
``{"tenant": {"acme"}, "model": {"claude-haiku-4-5"}, "run": {trace_id}}``."""


_FORMATS = ("json", "slack")


@dataclass(frozen=True, slots=True)
class WebhookTarget:
    """Where alerts go: a URL and the body it expects (generic JSON or Slack ``{"text"}``)."""

    url: str
    format: str = "json"

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise BudgetError(f"webhook url {self.url!r} must be an http(s) URL")
        if self.format not in _FORMATS:
            raise BudgetError(f"webhook format {self.format!r}: choose one of {', '.join(_FORMATS)}")

    @classmethod
    def parse(cls, text: str) -> WebhookTarget:
        """``URL`` (generic JSON) or ``slack:URL`` / ``json:URL``."""
        fmt, sep, rest = text.partition(":")
        if sep and fmt in _FORMATS and rest.startswith(("http://", "https://")):
            return cls(rest, fmt)
        return cls(text)

    @property
    def label(self) -> str:
        """The URL without its secret part (a Slack webhook's path *is* the credential):
        scheme, host, the first path segment and a short digest telling targets apart."""
        parts = urlsplit(self.url)
        first = parts.path.strip("/").split("/", 1)[0]
        hidden = "/…" if parts.path.strip("/").count("/") or parts.query else ""
        digest = hashlib.sha256(self.url.encode()).hexdigest()[:8]
        return f"{self.format}:{parts.scheme}://{parts.netloc}/{first}{hidden}#{digest}"

    def to_dict(self) -> dict[str, str]:
        return {"url": self.url, "format": self.format}


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,99}$")


@dataclass(frozen=True, slots=True)
class Rule:
    """One budget or metric rule, as stored in the ``budgets`` table."""

    id: str
    name: str
    scope: Scope
    window: str
    limit: Decimal
    metric: str = "spend"
    soft_fraction: float | None = None  # None: the metric's default (0.8; 1.0 for floors)
    timezone: str = "UTC"
    webhooks: tuple[WebhookTarget, ...] = ()
    enabled: bool = True  # a disabled rule is kept and listed, but neither evaluated nor enforced
    relative: Relative | None = None  # measured against a baseline (ledger.budgets.relative); limit is the factor
    created_at: datetime | None = field(default=None, compare=False)
    # A rule being created must have an addressable name; one read back from the table
    # (or a document of it) is taken as stored, so one odd row never hides the others.
    new: InitVar[bool] = True

    def __post_init__(self, new: bool) -> None:
        if new and not _NAME.match(self.name):
            raise BudgetError(
                f"budget name {self.name!r}: use letters, digits and _.:@/- (up to 100), starting with a letter or digit"
            )
        if self.window not in WINDOWS:
            raise BudgetError(f"window {self.window!r}: choose one of {', '.join(WINDOWS)}")
        if self.relative is not None:
            self.relative.check(self.metric, self.window, self.scope.kind)
        elif self.metric not in METRICS:
            raise BudgetError(f"metric {self.metric!r}: choose one of {', '.join(METRICS)}")
        object.__setattr__(self, "limit", parse_money(self.limit))
        if self.spec.unit == "ratio" and self.limit > 1:
            raise BudgetError(f"limit={self.limit} for {self.metric}: a rate is between 0 and 1")
        _check_health_rule(self)
        if self.soft_fraction is None:
            object.__setattr__(self, "soft_fraction", self.spec.default_soft)
        soft = float(self.soft_fraction)  # type: ignore[arg-type]
        if not 0 < soft <= 1:
            raise BudgetError(f"soft fraction {self.soft_fraction!r} must be in (0, 1]")
        object.__setattr__(self, "soft_fraction", soft)
        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise BudgetError(
                f"time zone {self.timezone!r} is not an IANA zone name (e.g. UTC, Europe/Paris)"
            ) from None
        if self.scope.kind == "run" and self.window != "run":
            object.__setattr__(self, "window", "run")  # one run is its own window

    @property
    def spec(self) -> MetricSpec:
        if self.relative is not None:
            lower_is_better, what = RELATIVE_METRICS[self.metric]
            return MetricSpec(self.metric, "factor", "ceiling" if lower_is_better else "floor", 1.0, what)
        return METRICS[self.metric]

    @property
    def enforced(self) -> bool:
        """Only spend is a budget a run can use up; metric rules alert."""
        return self.metric == "spend" and self.relative is None

    @property
    def soft_threshold(self) -> Decimal | None:
        """The value at which the rule warns (None: no warn band)."""
        soft = Decimal(str(self.soft_fraction))
        if soft == 1:
            return None
        if self.spec.direction == "ceiling":
            return self.limit * soft
        return self.limit / soft

    def describe(self) -> str:
        if self.relative is not None:
            r, off = self.relative, "" if self.enabled else ", disabled"
            sign = ">" if self.spec.direction == "ceiling" else "<"
            against = "forecast" if r.to == "forecast" else f"baseline {r.baseline}"
            return (
                f"{self.name} ({self.metric} of {r.candidate} {sign} {self.limit.normalize():f}x {against}, "
                f"{self.scope}, {self.window}, at least {r.min_runs} runs each{off})"
            )
        limit = f"${self.limit.normalize():f}" if self.spec.unit == "usd" else format_metric(self.metric, self.limit)
        off = "" if self.enabled else ", disabled"
        return f"{self.name} ({self.metric} {'>=' if self.spec.direction == 'ceiling' else '<'} {limit}, {self.scope}, {self.window}{off})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "scope": str(self.scope),
            "window": self.window,
            "metric": self.metric,
            "limit": decimal_str(self.limit),
            "soft_fraction": self.soft_fraction,
            "timezone": self.timezone,
            "webhooks": [w.label for w in self.webhooks],
            "enabled": self.enabled,
        } | ({"relative": self.relative.to_dict()} if self.relative is not None else {})

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Rule:
        """From :meth:`to_dict` output (webhook labels are not URLs, so they are dropped)."""
        return cls(
            id=str(d["id"]),
            name=str(d["name"]),
            scope=Scope.parse(str(d["scope"])),
            window=str(d["window"]),
            limit=parse_money(d["limit"]),
            metric=str(d.get("metric", "spend")),
            soft_fraction=d.get("soft_fraction"),
            timezone=str(d.get("timezone", "UTC")),
            enabled=bool(d.get("enabled", True)),
            relative=Relative.from_dict(d["relative"]) if d.get("relative") else None,
            new=False,
        )


def _check_health_rule(rule: Rule) -> None:
    """A count is a whole number of at least 1 (``--limit 1``: fire at the first violation);
    a tool scope means something only to the tool failure rate."""
    if rule.spec.unit == "count" and (rule.limit < 1 or rule.limit != rule.limit.to_integral()):
        raise BudgetError(f"limit={rule.limit} for {rule.metric}: a whole count >= 1 (1 fires at the first one)")
    if rule.scope.kind == "tool" and rule.metric != "tool_failure_rate":
        raise BudgetError(f"scope {rule.scope} counts tool calls: only the tool_failure_rate metric takes it")


def covers(rule: Rule, values: ScopeValues) -> bool:
    """Does the rule apply to a call or batch carrying ``values``? Global rules apply to everything.

    The one definition: ``store.list_rules(covering=...)`` narrows the table with the
    same test in SQL, then confirms each rule with this one.
    """
    kind, value = rule.scope.kind, rule.scope.value
    return kind == "global" or value in values.get(kind, ())


def level_for(rule: Rule, value: Decimal | None) -> Level:
    """ok / warn / exceeded for a measured value; no data is ok."""
    if value is None:
        return "ok"
    soft = rule.soft_threshold
    if rule.spec.direction == "ceiling":
        if value >= rule.limit:
            return "exceeded"
        return "warn" if soft is not None and value >= soft else "ok"
    if value < rule.limit:
        return "exceeded"
    return "warn" if soft is not None and value < soft else "ok"
