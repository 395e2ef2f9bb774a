"""The budget hook of the ledger's writer: evaluate after each ingest, alert, deliver.

Wiring (the collector server, or any single writer)::

    governor = Governor()                                    # one per ledger
    governor.attach(con)            # the writer's own connection (it outlives every hook cursor)
    CollectorServer(config, on_ingested=[governor.on_ingested])  # after each COMMITTED batch
    governor.start_sweeper(con)     # or call governor.sweep(cursor) every ~15 s yourself
    on shutdown, after the writer stops, before the connection closes: governor.close()

(``CollectorServer(config, governor=governor)`` does all of that itself.)

``on_ingested(con, report)`` (an ``IngestHook``: returns None; ``after_ingest``
is the same and returns the alerts fired) runs after the batch is committed, on
the writer's thread or a callback thread, with a connection to the ledger. It
re-evaluates only the rules whose scope the batch's runs touch, stores the
alert events it produces and hands them to the
:class:`~ledger.budgets.delivery.Deliverer`, whose threads do the HTTP; it
never raises (a failure is logged) and never waits for a webhook. Delivery
attempts are recorded in small batches (every ``record_interval``) through a
separate cursor of the same database, so a burst of deliveries costs the
ledger a few short commits, not one per attempt. That cursor comes from the
connection given to :meth:`attach` (or else the first one a hook or sweep
passes in): give the writer's own connection, because a cursor derived from a
hook's cursor dies with it, and the last attempts would go unrecorded.

Alert latency is dominated by the writer's commit: one ingest transaction
costs tens of milliseconds whatever its size, so a writer that coalesces queued
requests into one ``ingest`` call keeps latency flat under a burst.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any

import duckdb

from ledger.ingest import IngestReport
from ledger.lake import lock as lake_lock

from .alerts import AlertBook, AlertEvent
from .delivery import Deliverer, DeliveryAttempt
from .evaluate import PROJECTION_LOOKBACK, Evaluation, current, evaluate, evaluate_runs, touched_by
from .rules import Rule, WebhookTarget
from .store import has_rules, insert_attempts, list_rules
from .windows import Clock, system_clock

__all__ = ["Governor"]

log = logging.getLogger(__name__)
_CAUSE_TRACES = 10  # trace ids named in an alert's cause (a group commit can hold hundreds)


class Governor:
    """Budget evaluation, alert state and webhook delivery for one ledger."""

    def __init__(
        self,
        *,
        clock: Clock = system_clock,
        deliverer: Deliverer | None = None,
        webhooks: Sequence[WebhookTarget] = (),
        lookback: timedelta = PROJECTION_LOOKBACK,
        record_interval: float = 0.2,
    ) -> None:
        self.clock = clock
        self.record_interval = record_interval
        self.webhooks = tuple(webhooks)
        self.lookback = lookback
        self.book = AlertBook()
        self.deliverer = deliverer if deliverer is not None else Deliverer(clock=clock)
        if self.deliverer.record is None:
            self.deliverer.record = self._record_attempt
        self._lock = threading.RLock()
        self._record_lock = threading.Lock()
        self._record_con: duckdb.DuckDBPyConnection | None = None
        self._pending: list[DeliveryAttempt] = []
        self._pending_cv = threading.Condition()
        self._recorder: threading.Thread | None = None
        self._sweeper: threading.Thread | None = None
        self._stop = threading.Event()

    # --- hooks ----------------------------------------------------------------------------
    def on_ingested(self, con: duckdb.DuckDBPyConnection, report: IngestReport) -> None:
        """The writer's callback (``IngestHook``): :meth:`after_ingest`, result dropped."""
        self.after_ingest(con, report)

    def after_ingest(self, con: duckdb.DuckDBPyConnection, report: IngestReport) -> list[AlertEvent]:
        """After a committed ingest: evaluate the touched rules; returns the events fired."""
        if not report.traces or not (report.spans_written or report.judgments_written):
            return []  # invalid or already-seen spans (and feedback) change nothing
        cause = {
            "traces": sorted(report.traces)[:_CAUSE_TRACES],
            "traces_in_batch": len(report.traces),
            "spans_written": report.spans_written,
            "charges_written": report.charges_written,
            "judgments_written": report.judgments_written,
        }
        return self._evaluate_touched(con, report.traces, cause)

    def _evaluate_touched(
        self, con: duckdb.DuckDBPyConnection, traces: Iterable[str], cause: dict[str, Any]
    ) -> list[AlertEvent]:
        if self._stop.is_set():
            return []  # a closed governor does nothing
        try:
            with self._lock:
                self._adopt(con)
                if not has_rules(con):  # measuring what a batch touched costs a scan of its runs
                    return []
                touched = touched_by(con, traces)
                rules = list_rules(con, covering=touched, enabled_only=True)
                if not rules:
                    return []
                # On a lake, figures and alerts are read and stored with the lake's write lock held, so
                # no collector alerts on figures older than the alerts another one stored (ledger.lake.lock).
                with lake_lock.exclusive(con):
                    now = self.clock()
                    evaluations: list[Evaluation] = []
                    for rule in rules:
                        if rule.window == "run":
                            evaluations += evaluate_runs(con, rule, touched.traces, now)
                        else:
                            evaluations.append(evaluate(con, rule, now, lookback=self.lookback))
                    events = self._observe(con, evaluations, cause)
                self._deliver(events)
                return events
        except Exception:
            log.exception("budget evaluation after ingest failed; ingest is unaffected")
            return []

    def sweep(self, con: duckdb.DuckDBPyConnection, rule_id: str | None = None) -> list[AlertEvent]:
        """Re-evaluate every time-windowed rule (calendar rollovers, rolling windows draining), or only
        ``rule_id``: a rule just added or edited is judged at once, not at the next sweep."""
        if self._stop.is_set():
            return []
        try:
            with self._lock:
                self._adopt(con)
                with lake_lock.exclusive(con):
                    now = self.clock()
                    evaluations = [
                        evaluate(con, rule, now, lookback=self.lookback)
                        for rule in list_rules(con, enabled_only=True)
                        if rule.window != "run"  # a run's figures change only when its spans arrive
                        and rule_id in (None, rule.id)
                    ]
                    cause = {"sweep": now.isoformat()} if rule_id is None else {"rule_saved": now.isoformat()}
                    events = self._observe(con, evaluations, cause)
                self._deliver(events)
                return events
        except Exception:
            log.exception("budget sweep failed")
            return []

    def evaluate_all(self, con: duckdb.DuckDBPyConnection, rules: Iterable[Rule] | None = None) -> list[Evaluation]:
        """Current figures of every (or these) rule(s), without alerting."""
        now = self.clock()
        found = (
            current(con, rule, now, lookback=self.lookback)
            for rule in (list_rules(con, enabled_only=True) if rules is None else rules)
        )
        return [ev for ev in found if ev is not None]

    # --- periodic sweep on its own thread (embedded use, when no server loop calls sweep) ----
    def start_sweeper(self, con: duckdb.DuckDBPyConnection, interval: float = 15.0) -> None:
        if self._sweeper is not None:
            return
        cursor = con.cursor()

        def loop() -> None:
            while not self._stop.wait(interval):
                self.sweep(cursor)

        self._sweeper = threading.Thread(target=loop, name="turnledger-budget-sweep", daemon=True)
        self._sweeper.start()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for every scheduled delivery (retries included) and record its attempts."""
        done = self.deliverer.join(timeout)
        self.flush_attempts()
        return done

    def flush_attempts(self) -> None:
        """Write the delivery attempts recorded so far (normally done every ``record_interval``)."""
        with self._pending_cv:
            batch, self._pending = self._pending, []
        if not batch:
            return
        with self._record_lock:
            if self._record_con is None:  # closed, or never saw a ledger: log, never raise
                log.warning("%d delivery attempt(s) not recorded: the ledger is closed", len(batch))
                return
            try:
                insert_attempts(self._record_con, batch)
            except duckdb.ConnectionException:
                log.warning("%d delivery attempt(s) not recorded: the ledger was closed first", len(batch))
            except Exception:
                log.exception("recording %d delivery attempt(s) failed", len(batch))

    def close(self, timeout: float = 2.0) -> None:
        """Stop evaluating, stop the sweeper and the delivery threads (after in-flight
        attempts) and record what is left. Call it before the ledger connection closes."""
        self._stop.set()
        if self._sweeper is not None:
            self._sweeper.join(timeout)
        self.deliverer.close(timeout)
        with self._pending_cv:
            self._pending_cv.notify_all()
        if self._recorder is not None:
            self._recorder.join(timeout)
        self.flush_attempts()
        with self._record_lock:
            if self._record_con is not None:
                self._record_con.close()
                self._record_con = None

    def attach(self, con: duckdb.DuckDBPyConnection) -> None:
        """Record delivery attempts through a cursor of ``con`` (keep it open until :meth:`close`)."""
        self._adopt(con)

    # --- internals ------------------------------------------------------------------------
    def _adopt(self, con: duckdb.DuckDBPyConnection) -> None:
        """Delivery attempts are written through our own cursor of the writer's database."""
        with self._record_lock:
            if self._record_con is None:
                self._record_con = con.cursor()

    def _observe(
        self, con: duckdb.DuckDBPyConnection, evaluations: list[Evaluation], cause: dict[str, Any]
    ) -> list[AlertEvent]:
        """Apply evaluations to the alert book; the events they fire are stored by one INSERT
        (atomic on its own), and the book's memory moves only once that succeeded."""
        return self.book.observe_all(con, evaluations, cause)

    def _deliver(self, events: list[AlertEvent]) -> None:
        for event in events:
            targets = dict.fromkeys([*event.rule.webhooks, *self.webhooks])
            self.deliverer.submit(event, targets)

    def _record_attempt(self, attempt: DeliveryAttempt) -> None:
        """Called on a delivery thread: queue the row; the recorder writes rows in batches,
        so a burst of deliveries costs the ledger a few small commits, not one each."""
        if self._stop.is_set() and self._record_con is None:
            log.warning("delivery attempt %s/%d (%s) after close: not recorded", attempt.alert_id, attempt.attempt,
                        attempt.status)  # fmt: skip
            return
        with self._pending_cv:
            self._pending.append(attempt)
            if self._recorder is None and not self._stop.is_set():
                self._recorder = threading.Thread(target=self._record_loop, name="turnledger-alert-log", daemon=True)
                self._recorder.start()
            self._pending_cv.notify()

    def _record_loop(self) -> None:
        while not self._stop.is_set():
            with self._pending_cv:
                while not self._pending and not self._stop.is_set():
                    self._pending_cv.wait()
            self._stop.wait(self.record_interval)  # gather what arrives meanwhile
            self.flush_attempts()
