"""Sampling span detail, never money: which runs keep their full spans and captured content.

Every run keeps its charges and its runs row whatever is decided here. Its
*detail* (``ledger.retention.drop_detail``) is kept for 100% of the runs that

* errored (any ERROR span), stopped other than ``completed`` (step cap, budget
  stop, error) or had a guard halt (loop halt, step-cap halt);
* got a failed judgment: negative feedback or a failed evaluation
  (``evaluations.failed``);
* are the first run of their version (agent, agent version, prompt version,
  tool schema version: earliest start, then trace id);

and for a share (``keep_ordinary``) of the other, ordinary successful runs,
chosen by a hash of the trace id (:func:`kept_by_hash`), so every collector and
every pass decides the same for a run, whatever order its spans came in.

When: a run's outcome is known only once its root span ended, and feedback or an
evaluation may follow, so a run is decided by a periodic pass
(:func:`apply_sampling`; the server runs it, ``turnledger serve --keep-ordinary``)
once its root span ended ``grace`` ago (default 1 hour). The decision is stored
(``sampling_decisions``, migration 15) and taken once: feedback arriving after it
finds the charges, the run and the span skeleton, but no longer the content.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import duckdb

from . import DropReport, drop_detail

__all__ = ["DEFAULT_GRACE", "Sampler", "SamplingPolicy", "SamplingReport", "apply_sampling", "kept_by_hash"]

log = logging.getLogger(__name__)

DEFAULT_GRACE = timedelta(hours=1)
_SCALE = 2**64


def kept_by_hash(trace_id: str, share: float) -> bool:
    """Is this ordinary run in the kept share? The first 8 bytes of SHA-256(trace id) against ``share``."""
    if share >= 1:
        return True
    digest = int.from_bytes(hashlib.sha256(trace_id.encode()).digest()[:8], "big")
    return digest < share * _SCALE


@dataclass(frozen=True, slots=True)
class SamplingPolicy:
    keep_ordinary: float = 1.0  # share of ordinary successful runs whose detail is kept (1: all, locally)
    grace: timedelta = DEFAULT_GRACE

    def __post_init__(self) -> None:
        if not 0 <= self.keep_ordinary <= 1:
            raise ValueError(f"keep_ordinary={self.keep_ordinary}: a share between 0 and 1")

    @property
    def samples(self) -> bool:
        return self.keep_ordinary < 1


@dataclass
class SamplingReport:
    decided: int = 0
    kept: int = 0
    dropped: DropReport | None = None


# Why a run keeps its detail whatever the share (NULL: an ordinary successful run).
_DUE = """
WITH firsts AS (
    SELECT trace_id FROM runs WHERE root_span_id IS NOT NULL
    QUALIFY row_number() OVER (
        PARTITION BY agent_name, agent_version, prompt_version, tool_schema_version ORDER BY started_at, trace_id) = 1
)
SELECT r.trace_id, CASE
    WHEN r.status_code = 'ERROR' OR r.error_spans > 0 THEN 'errored'
    WHEN r.stop_cause IS DISTINCT FROM 'completed' THEN 'stopped: ' || r.stop_cause
    WHEN r.step_cap_halts > 0 OR EXISTS (SELECT 1 FROM guard_events g WHERE g.trace_id = r.trace_id AND g.action = 'halt')
        THEN 'guard halt'
    WHEN EXISTS (SELECT 1 FROM evaluations e WHERE e.trace_id = r.trace_id AND e.failed) THEN 'failed judgment'
    WHEN r.trace_id IN (SELECT trace_id FROM firsts) THEN 'new version'
    END AS reason
FROM runs r
WHERE r.root_span_id IS NOT NULL AND r.ended_at < ?
  AND NOT EXISTS (SELECT 1 FROM sampling_decisions d WHERE d.trace_id = r.trace_id)
ORDER BY r.trace_id
"""


def apply_sampling(con: duckdb.DuckDBPyConnection, policy: SamplingPolicy, now: datetime) -> SamplingReport:
    """Decide every run whose root ended ``grace`` before ``now`` and drop the detail of those sampled out.

    One transaction: the decisions and the drops land together or not at all.
    Nothing to do while the policy keeps every run.
    """
    if not policy.samples:
        return SamplingReport()
    horizon = (now - policy.grace).astimezone(UTC).replace(tzinfo=None)
    con.execute("BEGIN TRANSACTION")
    try:
        due = con.execute(_DUE, [horizon]).fetchall()
        decisions = []
        for trace_id, reason in due:
            kept = reason is not None or kept_by_hash(trace_id, policy.keep_ordinary)
            decisions.append((trace_id, kept, reason or ("sampled in" if kept else "sampled out")))
        if decisions:
            con.executemany("INSERT INTO sampling_decisions VALUES (?, ?, ?, now())", decisions)
        dropped = drop_detail(con, [t for t, kept, _ in decisions if not kept])
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    return SamplingReport(len(decisions), sum(1 for _, kept, _ in decisions if kept), dropped)


class Sampler:
    """The periodic pass on a thread of its own, through a cursor of the writer's connection.

    Its transaction touches only runs past their grace period, which ingest no longer
    writes to in the normal course; a conflict with a late span is logged and the run
    decided on the next pass.
    """

    def __init__(self, policy: SamplingPolicy, *, clock: Callable[[], datetime] | None = None) -> None:
        self.policy = policy
        self.clock = clock or (lambda: datetime.now(UTC))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, con: duckdb.DuckDBPyConnection, interval: float = 60.0) -> None:
        if self._thread is not None or not self.policy.samples:
            return
        cursor = con.cursor()

        def loop() -> None:
            while not self._stop.wait(interval):
                try:
                    apply_sampling(cursor, self.policy, self.clock())
                except duckdb.Error:
                    log.exception("sampling pass failed; the runs are decided on the next one")

        self._thread = threading.Thread(target=loop, name="turnledger-sampling", daemon=True)
        self._thread.start()

    def close(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
