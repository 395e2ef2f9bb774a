"""The one writer of the ledger: a bounded queue in front of a single DuckDB writer thread.

Requests are decoded and their rows built (``ledger.ingest.prepare``, the
Python half of ingest) before they reach the writer: in a decoder process or
on the HTTP thread (``submit``). The writer thread takes everything queued (up
to ``max_batch_spans``), makes ONE ``ledger.ingest.write`` of it (one
transaction, one commit), and only then completes each request's ``Ticket``.
So a request is acknowledged only after its spans are committed; requests that
arrive while a commit runs are coalesced into the next one (a commit has a
large fixed cost); and the next requests are decoded while DuckDB commits.

Rebuilding the ``runs`` rows of the touched traces is a fixed cost per commit
too: while more requests are queued or being decoded, it is deferred
(``write(defer_runs=True)``) to a later commit, at most ``runs_lag_s`` later.

Poison is isolated, and a store fault is nobody's: whose fault a failed commit is
is decided by ``ledger.faults``, by the error's class. A fault of the store (disk
full or nearly, I/O, memory, a lake's catalog or write lock) fails every request of
the batch retryable (``WriterUnavailable``, 503 with Retry-After), none blamed.
Otherwise every request of it is written again on its own, and one that fails is
tried once more after the others; only then, a request whose own rows fail (or that
fails with an error of no known kind while others commit) is refused
(``RequestRejected``, 400: retrying cannot help). Nothing is written twice: a failed
commit was rolled back whole.

The writer is the only one writing the file, so it keeps the ledger's
``CopyIndex`` (``ledger.dedup``: the keys and traces of the model-call copies
stored lately, loaded at start): a commit whose copies meet none of them skips
the lookup of stored copies that one charge per billed call otherwise costs.

Memory is bounded: spans count against ``max_queued_spans`` from ``submit``
until their batch has committed; past the bound ``submit`` raises ``QueueFull``
and the HTTP layer answers 429 with ``Retry-After``.

After each committed batch the writer hands the ``IngestReport`` to the
``on_ingested`` callbacks (budgets come next). They run on their own thread with
their own DuckDB connection, so a slow callback never holds up ingest: reports
that arrive while the callbacks are busy are merged into one.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import duckdb

from ledger import lake
from ledger.dedup import CopyIndex
from ledger.errors import InputError, Unavailable
from ledger.faults import Fault, fault_of, refused
from ledger.ingest import IngestReport, PreparedBatch, prepare, refresh_pending_runs, write
from ledger.lake import lock as lake_lock
from ledger.pricing import PriceBook
from ledger.spans import SpanRecord

from . import heap
from .readers import drop_pending_result

__all__ = [
    "Accepted",
    "IngestHook",
    "LedgerWriter",
    "QueueFull",
    "RequestRejected",
    "Ticket",
    "WriterStats",
    "WriterUnavailable",
    "merge_reports",
]

log = logging.getLogger("turnledger.server")

IngestHook = Callable[[duckdb.DuckDBPyConnection, IngestReport], None]
_MAX_MERGED_REJECTIONS = 100
# A request's rows past this (a large body's, not many small ones'): trim the heap after its commit
# (malloc_trim holds glibc's arenas for ms; after every commit of many small requests it is not worth it).
GIVE_BACK_AFTER_BYTES = 16 << 20


class QueueFull(Unavailable):
    """The ingest queue is at its bound; retry after ``retry_after`` seconds."""

    def __init__(self, queued: int, limit: int, retry_after: int) -> None:
        super().__init__(f"ingest queue full ({queued} of {limit} spans queued)")
        self.retry_after = retry_after


class WriterUnavailable(Unavailable):
    """The writer is closed, or the batch holding the spans failed to commit (nothing of it was written)."""


class RequestRejected(InputError):
    """This request's rows cannot be committed (the others of its batch were): 400, do not retry."""


@dataclass(frozen=True)
class Accepted:
    """What became of one submitted request once its batch committed."""

    received: int
    rejected: list[str]  # "trace/span: reason" for this request's invalid spans
    flagged: list[str] = field(default_factory=list)  # "trace/span: what" for spans kept with a part left out


class Ticket:
    """A submitted request; ``wait`` returns once its batch has committed (or failed)."""

    def __init__(self, batch: PreparedBatch) -> None:
        self.batch = batch
        self.size = batch.received
        self._done = threading.Event()
        self._result: Accepted | None = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[], object]] = []
        self._lock = threading.Lock()

    def _finish(self, result: Accepted | None = None, error: BaseException | None = None) -> None:
        self._result, self._error = result, error
        with self._lock:
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def when_done(self, callback: Callable[[], object]) -> None:
        """Call ``callback()`` (on the writer's thread) once the batch has committed or failed;
        at once if it has. An event loop waits this way without a thread per request."""
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(callback)
                return
        callback()

    def wait(self, timeout: float | None = None) -> Accepted:
        if not self._done.wait(timeout):
            raise TimeoutError(f"spans not committed within {timeout} s")
        if isinstance(self._error, RequestRejected):
            raise self._error
        if self._error is not None:
            raise WriterUnavailable(f"ingest failed, nothing of the batch was written: {self._error}")
        assert self._result is not None
        return self._result


@dataclass
class WriterStats:
    batches: int = 0
    requests: int = 0
    spans_received: int = 0
    spans_written: int = 0
    duplicates: int = 0
    rejected: int = 0
    failed_batches: int = 0
    last_error: str = ""
    last_commit_at: float = 0.0
    recent_rate: float = 0.0  # spans/s of the latest batches, for Retry-After estimates


@dataclass
class _Pending:
    tickets: deque[Ticket] = field(default_factory=deque)
    spans: int = 0  # spans submitted and not yet committed (queued + in the running batch)


def merge_reports(a: IngestReport, b: IngestReport) -> IngestReport:
    """One report covering two committed batches (used when callbacks fall behind)."""
    return IngestReport(
        received=a.received + b.received,
        spans_written=a.spans_written + b.spans_written,
        charges_written=a.charges_written + b.charges_written,
        judgments_written=a.judgments_written + b.judgments_written,
        rejected=(a.rejected + b.rejected)[:_MAX_MERGED_REJECTIONS],
        unpriced_models=a.unpriced_models | b.unpriced_models,
        traces=a.traces | b.traces,
    )


class _HookRunner:
    """Runs the ``on_ingested`` callbacks off the writer thread, merging reports that pile up."""

    def __init__(self, con: duckdb.DuckDBPyConnection, hooks: list[IngestHook]) -> None:
        self.hooks = hooks
        self._con = con.cursor()
        self._cond = threading.Condition()
        self._pending: IngestReport | None = None
        self._closed = False
        self._busy = False
        self._thread = threading.Thread(target=self._run, name="turnledger-hooks", daemon=True)
        self._thread.start()

    def notify(self, report: IngestReport) -> None:
        if not self.hooks:
            return
        with self._cond:
            self._pending = report if self._pending is None else merge_reports(self._pending, report)
            self._cond.notify_all()  # the runner, and any idle() waiter

    def idle(self, timeout: float) -> bool:
        """True once no report is waiting or being handled (tests and shutdown use it)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending is not None or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._pending is None and not self._closed:
                    self._cond.wait()
                if self._pending is None:
                    return
                report, self._pending = self._pending, None
                self._busy = True
            for hook in list(self.hooks):
                try:
                    hook(self._con, report)
                except Exception:  # a callback's bug must never stop ingest
                    log.exception("on_ingested callback %r failed", hook)
                drop_pending_result(self._con)  # any half-read result the callback left
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def close(self, timeout: float) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout)
        with contextlib.suppress(duckdb.Error):
            self._con.close()


class LedgerWriter:
    """Owns the write connection; everything that changes the ledger goes through ``submit``."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        prices: PriceBook | None = None,
        *,
        max_queued_spans: int = 200_000,
        max_batch_spans: int = 25_000,
        min_batch_spans: int = 2_048,
        linger_s: float = 0.1,
        runs_lag_s: float = 0.5,
        redact_content: bool = True,
        on_ingested: Iterable[IngestHook] = (),
    ) -> None:
        if max_queued_spans < 1 or max_batch_spans < 1:
            raise ValueError(f"{max_queued_spans=} and {max_batch_spans=} must be positive")
        self.con = con
        self.prices = prices or PriceBook.default()
        self.max_queued_spans = max_queued_spans
        self.max_batch_spans = max_batch_spans
        self.min_batch_spans = min_batch_spans
        self.linger_s = linger_s
        self.runs_lag_s = runs_lag_s
        self.redact_content = redact_content
        self.on_ingested: list[IngestHook] = list(on_ingested)
        self.stats = WriterStats()
        self._pending = _Pending()
        self._incoming = 0  # requests being decoded that will submit in a moment
        # Committed batches whose runs rows are not rebuilt yet (merged), and since when.
        self._runs_behind: IngestReport | None = None
        self._behind_since = 0.0
        self._cond = threading.Condition()
        self._closed = False
        self._hooks = _HookRunner(con, self.on_ingested)
        self._catch_up_runs()  # before the thread starts: nothing else uses the connection yet
        # The one writer of the file, so it may answer "is this call stored?" from memory. Not on a
        # lake: other collectors store copies too, so every commit asks the lake (under its write lock).
        self._copies = None if lake.is_lake(con) else CopyIndex.load(con)
        self._thread = threading.Thread(target=self._run, name="turnledger-writer", daemon=True)
        self._thread.start()

    # --- producer side (HTTP threads) ---------------------------------------------------
    @property
    def queued_spans(self) -> int:
        return self._pending.spans

    @contextlib.contextmanager
    def incoming(self) -> Iterator[None]:
        """Mark a request being decoded: the writer may wait for it (``linger_s``) and defer runs for it."""
        with self._cond:
            self._incoming += 1
        try:
            yield
        finally:
            with self._cond:
                self._incoming -= 1
                self._cond.notify_all()  # a lingering writer

    def submit(self, spans: list[SpanRecord]) -> Ticket:
        """Build the spans' rows on the caller's thread and queue them (see ``submit_prepared``)."""
        self._check_room(len(spans))  # before building rows that could not be queued
        return self.submit_prepared(prepare(spans, self.prices, redact_content=self.redact_content))

    def submit_prepared(self, batch: PreparedBatch) -> Ticket:
        """Queue a batch's rows for the next commit. Raises QueueFull or WriterUnavailable, never blocks."""
        ticket = Ticket(batch)
        with self._cond:
            self._check_room(ticket.size)
            pending = self._pending
            pending.tickets.append(ticket)
            pending.spans += ticket.size
            self._cond.notify_all()  # the writer, and any drained() waiter
        return ticket

    def _check_room(self, n: int) -> None:
        if self._closed:
            raise WriterUnavailable("the collector is shutting down")
        # An oversized request on an empty queue is still taken (the body
        # size limit bounds it), so no request can be refused forever.
        queued = self._pending.spans
        if queued and queued + n > self.max_queued_spans:
            raise QueueFull(queued, self.max_queued_spans, self._retry_after())

    def _retry_after(self) -> int:
        rate = self.stats.recent_rate
        if rate <= 0:
            return 1
        return max(1, min(30, math.ceil(self._pending.spans / rate)))

    # --- the writer thread ------------------------------------------------------------------
    def _take(self) -> list[Ticket] | None:
        with self._cond:
            while not self._pending.tickets and not self._closed:
                self._cond.wait()
            if not self._pending.tickets:
                return None  # closed and drained
            # A commit has a fixed cost, so with little queued and more requests being
            # decoded, wait briefly (linger_s at most) for them. With min_batch_spans
            # queued, commit at once: the next requests build their rows meanwhile.
            deadline = time.monotonic() + self.linger_s
            while self._incoming and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0 or sum(t.size for t in self._pending.tickets) >= self.min_batch_spans:
                    break
                self._cond.wait(left)
            taken: list[Ticket] = []
            size = 0
            queue = self._pending.tickets
            while queue and (not taken or size + queue[0].size <= self.max_batch_spans):
                ticket = queue.popleft()
                taken.append(ticket)
                size += ticket.size
            return taken

    def _run(self) -> None:
        while True:
            tickets = self._take()
            if tickets is None:
                return
            self._commit(tickets)

    def _commit(self, tickets: list[Ticket]) -> None:
        n = sum(t.size for t in tickets)
        # Rebuilding runs rows is a fixed cost per commit: while more requests wait
        # or are being decoded, it is left for a later commit (at most runs_lag_s
        # later), so one rebuild covers many commits. Otherwise it is done in this one.
        defer = bool(self._pending.tickets or self._incoming) and (
            self._runs_behind is None or time.monotonic() - self._behind_since < self.runs_lag_s
        )
        started = time.perf_counter()
        try:
            report = write(self.con, [t.batch for t in tickets], defer_runs=defer, copy_index=self._copies)
        except Exception as exc:
            self._note_failure(exc, tickets)
            if fault_of(exc) is Fault.STORE:  # disk, I/O, catalog, lock: every request retries, none is blamed
                self._fail(tickets, exc, refuse=False)
                self._release(n)
                return
            isolated = self._one_by_one(tickets, exc, defer)
            if isolated is None:
                self._release(n)
                return
            self._committed([t for t in tickets if not t._done.is_set()], isolated, n, defer, started)
            return
        self._committed(tickets, report, n, defer, started)

    def _checkpoint(self) -> None:
        """Write what is committed to the ledger file now, after a large request's commit: until a checkpoint,
        DuckDB holds committed rows in memory (a 60 MiB-inflated body's ~30 MiB of Arrow rows took ~60-120
        MiB there, kept until the WAL passed its 64 MiB threshold, two such bodies later). The checkpoint
        would come a commit or two later anyway; here it comes before the next large body adds its own
        (#41 item 7). A lake writes its files at each commit. Skipped if it cannot run now (another
        transaction): the next one still comes at the WAL's threshold."""
        if lake.is_lake(self.con):
            return
        try:
            self.con.execute("CHECKPOINT")
        except duckdb.Error as exc:
            log.debug("no checkpoint after a large commit: %s", exc)

    def _one_by_one(self, tickets: list[Ticket], first: Exception, defer: bool) -> IngestReport | None:
        """After a coalesced commit failed with no fault of the store's: each request on its own, so
        only the one at fault fails (a batch of one has had that attempt: ``first``).

        A request that fails alone is tried once more after the others before ``ledger.faults``
        decides (``refused``): what the store did for a moment (a lake's catalog lost in the middle
        of a transaction) does not happen twice, while a request's own rows fail every time. Once
        a store fault shows, the requests not committed yet are all failed retryable (503), untried.
        Returns the merged report of those that committed (their tickets are left to
        ``_committed``), or None when none did (every ticket failed here).
        """
        committed: list[IngestReport] = []
        suspects = [(tickets[0], first)] if len(tickets) == 1 else self._each_alone(tickets, defer, committed)
        if suspects:
            suspects = self._each_alone([t for t, _ in suspects], defer, committed)
        report = None
        for one in committed:
            report = one if report is None else merge_reports(report, one)
        for t, error in suspects:  # failed alone, twice
            refuse = refused(error, others_committed=report is not None)
            if refuse:
                log.warning("a request of %d spans cannot be committed and is refused (400): %s", t.size, error)
            self._fail([t], error, refuse=refuse)
        return report

    def _each_alone(
        self, tickets: list[Ticket], defer: bool, committed: list[IngestReport]
    ) -> list[tuple[Ticket, Exception]]:
        """Commit each ticket on its own (reports appended to ``committed``); the ones that failed,
        with their errors. After a store fault the tickets not tried yet fail retryable, untried."""
        failed: list[tuple[Ticket, Exception]] = []
        for i, t in enumerate(tickets):
            try:
                committed.append(write(self.con, [t.batch], defer_runs=defer, copy_index=self._copies))
            except Exception as exc:
                if fault_of(exc) is Fault.STORE:
                    log.warning("the store failed while requests were committed one by one (503): %s", exc)
                    self._fail([u for u, _ in failed] + tickets[i:], exc, refuse=False)
                    return []
                failed.append((t, exc))
        return failed

    def _note_failure(self, exc: Exception, tickets: list[Ticket]) -> None:
        log.exception("ingest of %d request(s) failed; the commit was rolled back", len(tickets))
        self.stats.failed_batches += 1
        self.stats.last_error = f"{type(exc).__name__}: {exc}"

    def _fail(self, tickets: list[Ticket], exc: Exception, *, refuse: bool) -> None:
        for t in tickets:
            if refuse:
                t._finish(error=RequestRejected(f"these spans cannot be stored, nothing of them was written: {exc}"))
            else:  # disk full, I/O error...: retryable (503), and the writer keeps serving
                t._finish(error=exc)

    def _committed(self, tickets: list[Ticket], report: IngestReport, n: int, defer: bool, started: float) -> None:
        elapsed = max(time.perf_counter() - started, 1e-6)
        st = self.stats
        st.batches += 1
        st.requests += len(tickets)
        st.spans_received += report.received
        st.spans_written += report.spans_written
        st.duplicates += report.duplicates
        st.rejected += len(report.rejected)
        st.last_commit_at = time.time()
        st.last_error = ""
        rate = n / elapsed
        st.recent_rate = rate if not st.recent_rate else 0.7 * st.recent_rate + 0.3 * rate
        large = any(sum(table.nbytes for table in t.batch.tables.values()) >= GIVE_BACK_AFTER_BYTES for t in tickets)
        for t in tickets:
            t.batch.rows, t.batch.tables = {}, {}  # in the ledger now: their memory goes before the answer does
            t._finish(Accepted(received=t.size, rejected=t.batch.rejected, flagged=t.batch.flagged))
        if large:  # and goes back to the system (freed, glibc kept ~100 MiB of a 60 MiB body's; #41 item 7)
            self._checkpoint()
            heap.give_back()
        # Budgets look at every commit at once (spend rules read charges). Traces whose
        # runs were deferred are shown to them again once rebuilt (for run-level rules).
        behind = self._runs_behind
        if defer and report.spans_written:
            if behind is None:
                self._behind_since = time.monotonic()
            self._runs_behind = report if behind is None else merge_reports(behind, report)
            self._hooks.notify(report)
        else:
            self._runs_behind = None
            self._hooks.notify(report if behind is None else merge_reports(behind, report))
        self._release(n)

    def _catch_up_runs(self) -> None:
        """Rebuild runs left pending by a crash between a deferred commit and its rebuild."""
        try:
            traces = lake_lock.retrying_conflicts(self.con, lambda: refresh_pending_runs(self.con))
        except Exception:
            log.exception("rebuilding pending runs failed; the next commit retries")
            return
        if traces:
            log.info("rebuilt the runs of %d traces left pending by the last shutdown", len(traces))

    def _release(self, n: int) -> None:
        with self._cond:
            self._pending.spans -= n
            self._cond.notify_all()

    # --- lifecycle ------------------------------------------------------------------------------
    def drained(self, timeout: float = 10.0) -> bool:
        """True once every submitted span is committed and the callbacks have seen it."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending.spans:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return self._hooks.idle(max(0.0, deadline - time.monotonic()))

    def close(self, timeout: float = 30.0) -> None:
        """Refuse new spans, commit what is queued, stop the threads. The connection stays open."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout)
        self._hooks.close(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()
