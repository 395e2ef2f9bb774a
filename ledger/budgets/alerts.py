"""Alert events: a rule's level changes, deduplicated, with the figures behind them.

The state machine (:func:`transition`, pure) turns a stream of evaluations
into at most one event per (rule, level, window):

* Escalating (ok → warn → exceeded) fires each level crossed that has not fired
  in this window yet; a batch that jumps from ok straight past the limit fires
  warn *and* exceeded, so "exactly one of each" holds however spans are batched.
* Falling back to ok fires ``ok`` once; falling from exceeded to warn is silent.
* The dedup window is the calendar window (day/month), the run (per-run rules),
  or for rolling windows the *episode*: from leaving ok until returning to it.
* A calendar window rolling over starts afresh; if the old one ended above ok
  and the new one starts at ok, that is announced once as ``ok``.

:class:`AlertBook` keeps the state per (rule, state key), persists events in
``alerts`` and restores its state from there after a restart.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

import duckdb

from .. import lake
from ..lake import lock as lake_lock
from .evaluate import Evaluation
from .rules import LEVELS, Level, Rule, decimal_str, format_metric
from .store import alert_history, insert_alerts
from .windows import Window

__all__ = ["AlertBook", "AlertEvent", "AlertState", "format_figure", "format_value", "transition"]

_RANK = {name: i for i, name in enumerate(LEVELS)}
_ICON = {"ok": "✅", "warn": "⚠️", "exceeded": "🛑"}


@dataclass(frozen=True, slots=True)
class AlertState:
    level: Level = "ok"
    window_key: str | None = None  # the dedup window now open (None: none yet / rolling at rest)
    fired: frozenset[str] = frozenset()  # levels already announced in that window


def format_value(rule: Rule, value: Decimal | None) -> str:
    """A rule's figure in its unit, or "no data"."""
    return "no data" if value is None else format_figure(rule.metric, value, relative=rule.relative is not None)


def format_figure(metric: str, value: Decimal, *, relative: bool) -> str:
    """A figure of a rule on ``metric`` in its unit (``rules.format_metric``); a relative rule's
    value and limit are a factor of its baseline instead: ``2.35x``."""
    return f"{value:.2f}x" if relative else format_metric(metric, value)


@dataclass(frozen=True)
class AlertEvent:
    """One announced level change, as stored in ``alerts`` and sent to webhooks."""

    id: str
    rule: Rule
    level: Level
    previous_level: Level
    window: Window
    window_key: str
    state_key: str
    value: Decimal | None
    threshold: Decimal | None  # the figure crossed: the limit, or the soft threshold for warn
    fired_at: datetime
    figures: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        """One line for people (the Slack body and the CLI)."""
        r = self.rule
        if r.relative is not None:
            return _relative_text(self)
        where = f"{r.scope}, {self.window_key}"
        value = format_value(r, self.value)
        if r.spec.direction == "ceiling":
            against = f"{value} of {format_value(r, r.limit)}"
            if self.value is not None and r.limit:
                against += f" ({float(self.value / r.limit):.0%})"
        else:
            against = f"{value}, floor {format_value(r, r.limit)}"
        if self.level == "ok":
            head = f"back to ok: {against}"
        elif self.level == "warn":
            head = f"warning, past {format_value(r, self.threshold)}: {against}"
        else:
            head = f"EXCEEDED: {against}"
            if r.enforced:
                head += "; the harness refuses model calls in this scope"
        line = f"{_ICON[self.level]} turnledger {r.metric} rule '{r.name}' ({where}) {head}."
        projection = self.figures.get("projection")
        if self.level == "warn" and isinstance(projection, dict) and projection.get("text"):
            text = str(projection["text"])
            line += f" {text[:1].upper()}{text[1:]}."
        return line

    def to_dict(self) -> dict[str, Any]:
        """The generic JSON webhook body."""
        return {
            "type": "turnledger.alert",
            "alert_id": self.id,
            "level": self.level,
            "previous_level": self.previous_level,
            "rule": self.rule.to_dict(),
            "window": {**self.window.to_dict(), "dedup_key": self.window_key},
            "run": self.state_key or None,
            "value": decimal_str(self.value),
            "threshold": decimal_str(self.threshold),
            "limit": decimal_str(self.rule.limit),
            "fired_at": self.fired_at.isoformat(),
            "figures": self.figures,
            "text": self.text(),
        }


def _relative_text(event: AlertEvent) -> str:
    """A relative rule's line: both versions' figures and runs, the factor, and the rollback to run."""
    r, f = event.rule, event.figures.get("figures") or {}  # the evaluation's own figures
    cand, base = f.get("candidate") or {}, f.get("baseline") or {}
    sign = ">" if r.spec.direction == "ceiling" else "<"
    ratio = "" if event.value is None else f" ({format_value(r, event.value)})"
    figures = (
        f"candidate {cand.get('version')} {cand.get('value')} over {cand.get('runs')} runs vs "
        f"{base.get('is', 'baseline')} {base.get('version')} {base.get('value')} over {base.get('runs')} runs{ratio}"
    )
    factor = f"{r.limit.normalize():f}x"
    head = {"ok": f"back to ok (within {factor})", "warn": f"warning, past {format_value(r, event.threshold)}"}
    line = (
        f"{_ICON[event.level]} turnledger {r.metric} rule '{r.name}' ({r.scope}, {event.window_key}) "
        f"{head.get(event.level, f'EXCEEDED: {r.metric} {sign} {factor}')}: {figures}."
    )
    rollback = f.get("rollback")
    return line + (f" Roll back: {rollback}" if rollback and event.level != "ok" else "")


def _threshold(rule: Rule, level: str) -> Decimal | None:
    if level == "warn":
        return rule.soft_threshold
    if level == "exceeded":
        return rule.limit
    return rule.soft_threshold if rule.soft_threshold is not None else rule.limit


def _event(ev: Evaluation, level: Level, previous: Level, window_key: str, extra: dict[str, Any]) -> AlertEvent:
    figures = {**ev.to_dict(), **extra}
    for k in ("rule", "window"):  # they travel on their own
        figures.pop(k, None)
    figures["level_now"] = figures.pop("level")  # a warn fired with an exceeded shares their figures
    return AlertEvent(
        id=uuid.uuid4().hex,
        rule=ev.rule,
        level=level,
        previous_level=previous,
        window=ev.window,
        window_key=window_key,
        state_key=ev.state_key,
        value=ev.value,
        threshold=_threshold(ev.rule, level),
        fired_at=ev.evaluated_at,
        figures=figures,
    )


def transition(
    state: AlertState, ev: Evaluation, cause: dict[str, Any] | None = None
) -> tuple[AlertState, list[AlertEvent]]:
    """The next state and the events to announce (pure: ids aside, everything comes from ``ev``)."""
    extra = {"cause": cause} if cause else {}
    new = ev.level
    events: list[AlertEvent] = []
    previous: Level
    if ev.window.rolling:
        key, fired, previous = state.window_key, state.fired, state.level
        if key is None and new != "ok":  # a new episode begins
            key, fired = f"{ev.window.kind}@{ev.evaluated_at.isoformat()}", frozenset()
    elif state.window_key != ev.window.key:
        # A window not seen before: the first evaluation, a calendar rollover, a new run.
        key, fired, previous = ev.window.key, frozenset(), "ok"
        if new == "ok":
            if state.window_key is not None and state.level != "ok":
                events.append(_event(ev, "ok", state.level, key, extra))
                return AlertState("ok", key, frozenset({"ok"})), events
            return AlertState("ok", key, frozenset()), events
    else:
        key, fired, previous = state.window_key, state.fired, state.level

    if _RANK[new] > _RANK[previous]:
        assert key is not None
        for level in LEVELS[_RANK[previous] + 1 : _RANK[new] + 1]:
            if level in fired or (level == "warn" and ev.rule.soft_threshold is None):
                continue
            events.append(_event(ev, level, previous, key, extra))  # type: ignore[arg-type]
            fired = fired | {level}
        return AlertState(new, key, fired), events
    if new == "ok" and previous != "ok":
        if "ok" not in fired and key is not None:
            events.append(_event(ev, "ok", previous, key, extra))
        if ev.window.rolling:
            return AlertState("ok", None, frozenset()), events  # the episode is over
        return AlertState("ok", key, fired | {"ok"}), events
    return AlertState(new, key, fired), events


class AlertBook:
    """Alert state per (rule, state key), persisted through ``alerts``. Thread-safe."""

    def __init__(self, max_states: int = 20_000) -> None:
        self._states: OrderedDict[tuple[str, str], AlertState] = OrderedDict()
        self._max = max_states
        self._lock = threading.Lock()

    @staticmethod
    def _restored(rule: Rule, history: list[tuple[str, str | None]]) -> AlertState:
        if not history:
            return AlertState()
        level, key = history[0]
        if rule.window in ("rolling_hour", "rolling_day") and level == "ok":
            return AlertState()  # a rolling episode that ended
        fired = frozenset(lv for lv, k in history if k == key)
        return AlertState(level, key, fired)  # type: ignore[arg-type]

    def state(self, con: duckdb.DuckDBPyConnection, rule: Rule, state_key: str = "") -> AlertState:
        with self._lock:
            cached = self._states.get((rule.id, state_key))
        if cached is not None:
            return cached
        return self._restored(rule, alert_history(con, rule.id, [state_key])[state_key])

    def observe(
        self, con: duckdb.DuckDBPyConnection, ev: Evaluation, cause: dict[str, Any] | None = None
    ) -> list[AlertEvent]:
        """Apply one evaluation; new events are stored before they are returned."""
        return self.observe_all(con, [ev], cause)

    def observe_all(
        self, con: duckdb.DuckDBPyConnection, evaluations: Sequence[Evaluation], cause: dict[str, Any] | None = None
    ) -> list[AlertEvent]:
        """Apply evaluations in order; states missing from memory are restored with one
        query per rule, and the events are stored with one insert.

        On a lake other collectors fire alerts too: every state is restored from the stored
        alerts, read and written under the lake's write lock (``ledger.lake.lock``), so that
        "one alert per rule, level and window" holds across collectors."""
        with lake_lock.exclusive(con):
            return self._observe_all(con, evaluations, cause, cached=not lake.is_lake(con))

    def _observe_all(
        self,
        con: duckdb.DuckDBPyConnection,
        evaluations: Sequence[Evaluation],
        cause: dict[str, Any] | None,
        *,
        cached: bool,
    ) -> list[AlertEvent]:
        with self._lock:
            states = {
                (ev.rule.id, ev.state_key): self._states.get((ev.rule.id, ev.state_key)) if cached else None
                for ev in evaluations
            }
        missing: dict[str, tuple[Rule, set[str]]] = {}
        for ev in evaluations:
            if states[(ev.rule.id, ev.state_key)] is None:
                missing.setdefault(ev.rule.id, (ev.rule, set()))[1].add(ev.state_key)
        for rule_id, (rule, keys) in missing.items():
            for key, history in alert_history(con, rule_id, keys).items():
                states[(rule_id, key)] = self._restored(rule, history)
        events: list[AlertEvent] = []
        for ev in evaluations:
            k = (ev.rule.id, ev.state_key)
            states[k], fired = transition(states[k] or AlertState(), ev, cause)
            events += fired
        insert_alerts(con, events)
        with self._lock:
            for k, state in states.items():
                self._states[k] = state  # type: ignore[assignment]
                self._states.move_to_end(k)
            while len(self._states) > self._max:
                self._states.popitem(last=False)
        return events

    def clear(self) -> None:
        with self._lock:
            self._states.clear()

    def forget(self, rule_id: str) -> None:
        with self._lock:
            for k in [k for k in self._states if k[0] == rule_id]:
                del self._states[k]
