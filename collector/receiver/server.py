"""``CollectorServer``: the receiver's lifecycle, storage and the state its routes share.

It opens the ledger, starts the one writer, the decode pool and the reader
cursors, binds the listeners (``.app``: OTLP/HTTP and the API) and, with a
budget governor, its sweeper; :meth:`CollectorServer.stop` takes them down in
the order that loses nothing. What each endpoint answers is in ``.routes``.

Requests are coroutines on the HTTP server's event loop (its own thread); their
decoding and queries run on threads. The DuckDB file is written only by the
``LedgerWriter`` thread and read through a small pool of cursors on the same
database instance (DuckDB's MVCC lets reads run while a batch commits).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import aiologic
import duckdb

from ledger import lake
from ledger.budgets.windows import system_clock
from ledger.exposure import collector_auth
from ledger.pricing import PriceBook
from ledger.retention.sampling import Sampler, SamplingPolicy
from ledger.settings import db_path
from ledger.store import open_ledger

from . import heap
from .app import ReceiverHTTPServer
from .decode_budget import DecodeBudget
from .decode_pool import DecodePool
from .defaults import DEFAULT_HOST, DEFAULT_MAX_DECODED_BYTES, DEFAULT_PORT, MiB
from .readers import ReaderPool
from .writer import IngestHook, LedgerWriter

if TYPE_CHECKING:
    from ledger.budgets import Governor

    from .grpc_receiver import GrpcReceiver

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "CollectorServer", "ServerConfig"]

_ALERT_GRACE_S = 2.0  # at shutdown, how long alerts of the last batch may take to go out
_WORKERS_READY_S = 120  # a hang guard: workers start in seconds (import, detector compile) even when loaded
log = logging.getLogger(__name__)


@dataclass
class ServerConfig:
    """Everything ``turnledger serve`` can be told. Limits bound the server's memory."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    grpc_port: int | None = None  # OTLP/gRPC as well (`turnledger serve`: 4317); 0: a free port; None: off
    db: Path | str | None = None  # default: $TURNLEDGER_DB or ./turnledger.duckdb
    token: str | None = None  # bearer token for ingest and queries (the CLI reads $TURNLEDGER_TOKEN)
    # No token on a non-loopback host: refused at start unless this is set (`serve --insecure-no-auth`).
    insecure_no_auth: bool = False
    max_body_bytes: int = 16 * MiB  # on the wire; larger → 413
    max_decoded_bytes: int = DEFAULT_MAX_DECODED_BYTES  # after gzip/deflate; larger → 413
    max_queued_spans: int = 200_000  # decoded, not yet committed; more → 429
    max_batch_spans: int = 25_000  # coalesced into one ingest call (one transaction)
    max_concurrent_decodes: int = 4  # complete request bodies being decoded at once
    # Inflated bytes being decoded or awaiting their commit at once (.decode_budget): one maximum-size
    # body at a time (~340 MiB in its worker); smaller ones side by side. A larger body is decoded alone.
    decode_budget_bytes: int = DEFAULT_MAX_DECODED_BYTES
    body_timeout_s: float = 30.0  # a request body not received within this → 408 (slow clients)
    decode_workers: int = 0  # processes that decode bodies and build rows; 0: on the request's thread
    ack_timeout_s: float = 20.0  # waiting for the commit longer than this → 503 (retry is safe)
    reader_connections: int = 4  # concurrent named queries
    redact_content: bool = True  # re-redact captured payloads at the door (third-party producers)
    prices: PriceBook | None = None
    keep_ordinary: float = 1.0  # share of ordinary successful runs keeping span detail (ledger.retention.sampling)
    sampling_grace_s: float = 3600.0  # a run is decided this long after its root span ended


class CollectorServer:
    """The collector: one DuckDB writer, an OTLP/HTTP receiver and the query API.

    >>> server = CollectorServer(ServerConfig(port=0)).start()   # doctest: +SKIP
    >>> server.url                                               # doctest: +SKIP
    'http://127.0.0.1:43817'
    >>> server.stop()                                            # doctest: +SKIP

    ``on_ingested`` callbacks receive ``(connection, IngestReport)`` after each
    committed batch, on a thread of their own (see ``LedgerWriter``); append to
    ``server.writer.on_ingested`` to add one later.

    ``governor`` (what ``turnledger serve`` passes) puts budgets under the
    server's care: its ``on_ingested`` runs first after each batch, its sweeper
    (every ``sweep_interval`` s, for window rollovers; 0 turns it off) starts with the server,
    its clock answers ``POST /v1/budgets/check``, and :meth:`stop` closes it
    after the writer's last batch and before the connection (so the last
    alerts are delivered and their attempts recorded).
    """

    def __init__(
        self,
        config: ServerConfig | None = None,
        *,
        con: duckdb.DuckDBPyConnection | None = None,
        on_ingested: Iterable[IngestHook] = (),
        governor: Governor | None = None,
        sweep_interval: float = 15.0,
    ) -> None:
        self.config = config or ServerConfig()
        cfg = self.config
        # Refused before anything opens: an open collector serves the ledger to anyone who reaches it.
        self.auth = collector_auth(cfg.host, token=cfg.token, insecure_no_auth=cfg.insecure_no_auth)
        self.db_path = Path(cfg.db) if cfg.db is not None else db_path()
        self.governor = governor
        self.sweep_interval = sweep_interval
        self.clock = governor.clock if governor is not None else system_clock
        hooks = [governor.on_ingested, *on_ingested] if governor is not None else list(on_ingested)
        self._owns_con = con is None
        self.con = con if con is not None else open_ledger(self.db_path)
        if governor is not None:
            governor.attach(self.con)  # its delivery records must outlive the writer's hook cursor
        self.writer = LedgerWriter(
            self.con,
            cfg.prices,
            max_queued_spans=cfg.max_queued_spans,
            max_batch_spans=cfg.max_batch_spans,
            redact_content=cfg.redact_content,
            on_ingested=hooks,
        )
        self.decoder = DecodePool(cfg.decode_workers, self.writer.prices, cfg.redact_content)
        heap.map_large_blocks()  # a large body's buffers are returned once freed, here as in the workers
        self.readers = ReaderPool(self.con, cfg.reader_connections)
        self.sampler = Sampler(SamplingPolicy(cfg.keep_ordinary, timedelta(seconds=cfg.sampling_grace_s)))
        # Complete bodies being decoded at once, whichever listener took them (usable from
        # threads and from the event loop): each is held inflated in memory meanwhile.
        self.decode_slots = aiologic.BoundedSemaphore(max(1, cfg.max_concurrent_decodes))
        self.decode_budget = DecodeBudget(cfg.decode_budget_bytes)
        try:
            self.httpd = ReceiverHTTPServer((cfg.host, cfg.port), self)
        except OSError:
            self._close_storage()
            raise
        self.grpc: GrpcReceiver | None = None
        if cfg.grpc_port is not None:
            from .grpc_receiver import GrpcReceiver  # grpcio is imported only when gRPC is on

            try:
                self.grpc = GrpcReceiver(self, cfg.host, cfg.grpc_port)
            except OSError:
                self.httpd.shutdown(0)  # never started: closes its socket and decode threads
                self._close_storage()
                raise
        self.started_at = time.monotonic()
        self._stopped = False

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def grpc_port(self) -> int | None:
        """The OTLP/gRPC port bound (None: gRPC is off)."""
        return self.grpc.port if self.grpc is not None else None

    @property
    def grpc_url(self) -> str | None:
        """The OTLP/gRPC endpoint as exporters take it (``http://``: no TLS), or None when off."""
        if self.grpc is None:
            return None
        host = self.httpd.server_address[0]
        return f"http://{host!s}:{self.grpc.port}"

    def start(self) -> CollectorServer:
        """Serve on a background thread (and start the budget sweeper); returns self."""
        if self.governor is not None and self.sweep_interval > 0:
            self.governor.start_sweeper(self.con, self.sweep_interval)
        self.sampler.start(self.con)
        if not self.decoder.wait_ready(_WORKERS_READY_S):
            log.warning("decode workers not ready after %d s: serving anyway, the first exports wait", _WORKERS_READY_S)
        self._start_listeners()
        return self

    def _start_listeners(self) -> None:
        """Every listener serves from here on (each on threads of its own)."""
        self.httpd.serve_in_background()
        if self.grpc is not None:
            self.grpc.start()

    def _stop_listeners(self, timeout: float) -> None:
        """Every listener stops taking requests and finishes those in flight (their commits too: the writer
        still runs)."""
        if self.grpc is not None:
            self.grpc.stop(grace=min(timeout, self.config.ack_timeout_s))
        self.httpd.shutdown(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop taking requests, commit what was accepted, close the ledger (checkpointing it)."""
        if self._stopped:
            return
        self._stopped = True
        self._stop_listeners(timeout)
        self._close_storage(timeout)

    def _close_storage(self, timeout: float = 30.0) -> None:
        # Order matters: the writer commits what was accepted and its hooks evaluate
        # budgets on it; then the governor delivers those alerts and records the
        # attempts through the still-open connection; only then does the connection close.
        self.decoder.close()
        self.sampler.close(timeout)
        self.writer.close(timeout)
        if self.governor is not None:
            self.governor.join(min(timeout, _ALERT_GRACE_S))
            self.governor.close()
        self.readers.close()
        if self._owns_con:
            # Fold the write-ahead log into the file, so a cleanly stopped ledger is one
            # self-contained file (DuckDB skips this on close when the WAL came from a
            # crash replay and nothing was written since). Never on a lake: there CHECKPOINT
            # is maintenance (flushing inlined rows, merging files: commits of its own), which
            # is the maintenance leader's, under the lake lock (ledger.lake.maintain).
            if not lake.is_lake(self.con):
                with suppress(duckdb.Error):
                    self.con.execute("CHECKPOINT")
            self.con.close()

    def __enter__(self) -> CollectorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
