"""Decoding OTLP bodies and building their ledger rows in worker processes.

That work (``collector.otlp`` + ``ledger.ingest.prepare``) is pure Python and
holds the GIL; in the server's own process it competes with the DuckDB writer
thread, which needs the GIL between statements. Worker processes take it out
of that process: a body goes in (bytes, still compressed: the worker inflates
it), a ``PreparedBatch`` comes back (its Arrow tables pickle as IPC buffers), and
the writer's process is left with socket I/O and commits.

With ``workers=0`` the work stays on the request's thread (tests, tiny setups).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from importlib.machinery import ModuleSpec
from types import ModuleType

import pyarrow as pa

from ledger.errors import Unavailable
from ledger.pricing import PriceBook
from ledger.redact import default_policy
from ledger.rows import PreparedBatch

from . import heap
from .defaults import DEFAULT_MAX_DECODED_BYTES, MiB
from .signals import TRACES, prepare_signal

__all__ = ["DecodePool", "DecoderUnavailable"]


class DecoderUnavailable(Unavailable):
    """A worker process died, or the server is stopping; nothing of the request was queued: 503."""


# Set once per worker process by the pool's initializer.
_prices: PriceBook | None = None
_redact = True


class _WithoutPandas:
    """An import finder that refuses pandas. pyarrow imports pandas on the first
    ``pa.array`` of a list, only to ask whether the list is a pandas object; that
    costs a worker ~0.15 s and ~45 MB for nothing (a refused import tells pyarrow
    that pandas is absent, which it handles). Workers never use pandas."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> ModuleSpec | None:
        if name == "pandas":
            raise ModuleNotFoundError("decoder workers do not load pandas", name=name)
        return None


def _init_worker(prices: PriceBook, redact_content: bool) -> None:
    global _prices, _redact
    _prices, _redact = prices, redact_content
    heap.map_large_blocks()
    # Arrow's buffers from glibc too: large ones mapped on their own (returned when freed), the rest
    # trimmed with the heap (mimalloc, Arrow's default, returns a thread's pages only on that thread).
    pa.set_memory_pool(pa.system_memory_pool())
    threading.Thread(target=_give_back_after_large_results, daemon=True).start()
    sys.meta_path.insert(0, _WithoutPandas())
    # Ctrl-C on `turnledger up` reaches the whole process group: the server stops its
    # workers itself, after committing what they decoded, so they ignore it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A worker blocks on its task queue, and that queue never reports EOF (the worker
    # holds both ends): if the server is killed (kill -9, OOM) the worker must notice.
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()


def _exit_with_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def _warm_up() -> None:
    if _redact:  # its detectors' database compiles in ~1 s: on the first request, that was its latency
        default_policy()
    time.sleep(0.05)  # long enough that each warm-up lands on a worker of its own


def _decode_and_prepare(body: bytes, kind: str, signal: str, encoding: str | None, limit: int) -> PreparedBatch:
    # Arrow here, not in the server: the conversion's work stays in the worker, and
    # Arrow buffers cross the process boundary cheaper than tuples of Python objects.
    batch = prepare_signal(
        body, kind, signal, _prices, redact_content=_redact, encoding=encoding, max_decoded_bytes=limit
    ).to_arrow()
    # The pool pickles it once returned (the rows are Arrow by then, nothing else is left of the body);
    # pickled here instead, the collector unpickled a copy of a copy (+30 MiB there for a 60 MiB body).
    if sum(t.nbytes for t in batch.tables.values()) >= _LARGE_RESULT:
        _sent.set()
    return batch


_LARGE_RESULT = 4 * MiB  # the rows of a ~8 MiB body; after smaller ones a trim is not worth its time
_sent = threading.Event()  # a large result was returned: give back its memory once it is sent


def _give_back_after_large_results() -> None:
    while True:
        _sent.wait()
        _sent.clear()
        # The pool sends the result (a pickled copy) after the task returns; a trim during the next
        # body instead does no harm.
        time.sleep(0.2)
        heap.give_back()


class DecodePool:
    """``prepare(body, kind)``: on a worker process if there are any, else right here."""

    def __init__(self, workers: int, prices: PriceBook, redact_content: bool) -> None:
        self.workers = workers
        self.prices = prices
        self.redact_content = redact_content
        self._pool: ProcessPoolExecutor | None = None
        self._warming: list[Future[None]] = []
        self._closed = False
        self._restart = threading.Lock()
        if workers > 0:
            self._pool = self._start()

    def _start(self) -> ProcessPoolExecutor:
        # "spawn", not fork: the server process runs threads and DuckDB's own.
        pool = ProcessPoolExecutor(
            self.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker,
            initargs=(self.prices, self.redact_content),
        )
        # Start every worker now (a spawned worker takes a second or two to import
        # its modules, and one more to compile its redaction detectors), not on the first requests.
        self._warming = [pool.submit(_warm_up) for _ in range(self.workers)]
        return pool

    def wait_ready(self, timeout: float) -> bool:
        """Wait until every worker has started and warmed up (False if ``timeout`` passed first).

        A collector that answers before its workers are up answers its first exports seconds late, and a
        client with a short exit budget (Claude Code gives its telemetry 2 s) loses what it sends last."""
        return not wait(self._warming, timeout).not_done

    def prepare(
        self,
        body: bytes,
        kind: str,
        signal: str = TRACES,
        *,
        encoding: str | None = None,
        max_decoded_bytes: int = DEFAULT_MAX_DECODED_BYTES,
    ) -> PreparedBatch:
        """Rows of an OTLP body of ``signal``, as received (inflated by the worker when ``encoding`` is set: the
        compressed bytes cross the pipe). Raises MalformedInput (bad body, BodyTooLarge...) or DecoderUnavailable."""
        if self._pool is None:
            return prepare_signal(
                body, kind, signal, self.prices, redact_content=self.redact_content,
                encoding=encoding, max_decoded_bytes=max_decoded_bytes,
            )  # fmt: skip
        if self._closed:
            raise DecoderUnavailable("the collector is shutting down; retry the export")
        pool = self._pool
        try:
            return pool.submit(_decode_and_prepare, body, kind, signal, encoding, max_decoded_bytes).result()
        except BrokenProcessPool:
            with self._restart:
                if self._pool is pool and not self._closed:  # the first request to see it starts a fresh pool
                    self._pool = self._start()
                    pool.shutdown(wait=False)
            raise DecoderUnavailable("a decoder process died; retry the export") from None
        except CancelledError:  # queued when the server stopped
            raise DecoderUnavailable("the collector is shutting down; retry the export") from None

    def close(self) -> None:
        self._closed = True
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
