"""``CollectorServer``: OTLP/HTTP ingest and the named-query API on one port.

Endpoints (all JSON errors are ``{"error": "..."}``):

====================================  =========================================================
``POST /v1/traces``                   OTLP/HTTP trace export (protobuf or JSON, gzip/deflate)
``GET /api/query/{name}``             a ``ledger.queries`` builder by name; Arrow IPC stream, or
                                      ``?format=json`` for a JSON array of row objects
``GET /api/queries``                  the registered queries and their parameters
``GET /api/context/{trace}/{span}``   the captured request payload of one model call
``POST /v1/budgets/check``            the harness's gate: may a model call in this scope go ahead?
``GET|POST /api/budgets``             budget rules with their current level; add one
``GET|DELETE /api/budgets/{rule}``    one rule's figures and alerts; remove it
``POST /api/budgets/sweep``           evaluate every rule now (the server also sweeps every 15 s)
``GET /api/alerts``                   alert events, newest first, with their deliveries
``GET /healthz``                      liveness and writer figures (never needs the token)
====================================  =========================================================

With a :class:`~ledger.budgets.Governor` (``turnledger serve`` always gives
one), budgets are evaluated after each committed batch and swept periodically
for window rollovers; the budget routes exist either way.

The stdlib ``ThreadingHTTPServer`` is enough here: an OTLP exporter sends a few
large requests per second over a kept-alive connection, so per-request overhead
is noise beside decoding and ingest, and it adds no dependency. Every request is
handled on its own thread; the DuckDB file is written only by the
``LedgerWriter`` thread and read through a small pool of cursors on the same
database instance (DuckDB's MVCC lets reads run while a batch commits).
"""

from __future__ import annotations

import hmac
import importlib.metadata
import json
import logging
import queue
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import duckdb

from ledger.budgets import Governor
from ledger.budgets.windows import system_clock
from ledger.content import load_context
from ledger.errors import MalformedInput
from ledger.pricing import PriceBook
from ledger.settings import db_path
from ledger.store import open_ledger

from . import api, budget_routes
from .decode_pool import DecodePool, DecoderUnavailable
from .defaults import DEFAULT_HOST, DEFAULT_PORT, MiB
from .otlp_http import (
    JSON,
    PROTOBUF,
    BodyTooLarge,
    UnsupportedEncoding,
    UnsupportedMediaType,
    decompress,
    export_response,
    media_kind,
    status_body,
)
from .writer import IngestHook, LedgerWriter, QueueFull, Ticket, WriterUnavailable

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "CollectorServer", "ServerConfig"]

log = logging.getLogger("turnledger.server")

_ALERT_GRACE_S = 2.0  # at shutdown, how long alerts of the last batch may take to go out


@dataclass
class ServerConfig:
    """Everything ``turnledger serve`` can be told. Limits bound the server's memory."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    db: Path | str | None = None  # default: $TURNLEDGER_DB or ./turnledger.duckdb
    token: str | None = None  # bearer token for ingest and queries (the CLI reads $TURNLEDGER_TOKEN)
    max_body_bytes: int = 16 * MiB  # on the wire; larger → 413
    max_decoded_bytes: int = 64 * MiB  # after gzip/deflate; larger → 413
    max_queued_spans: int = 200_000  # decoded, not yet committed; more → 429
    max_batch_spans: int = 25_000  # coalesced into one ingest call (one transaction)
    max_concurrent_decodes: int = 4  # request bodies being read/decoded at once
    decode_workers: int = 0  # processes that decode bodies and build rows; 0: on the request's thread
    ack_timeout_s: float = 20.0  # waiting for the commit longer than this → 503 (retry is safe)
    reader_connections: int = 4  # concurrent named queries
    redact_content: bool = True  # re-redact captured payloads at the door (third-party producers)
    prices: PriceBook | None = None


class _Busy(Exception):
    pass


class _ReaderPool:
    """Cursors on the writer's database instance, one per concurrent query."""

    def __init__(self, con: duckdb.DuckDBPyConnection, size: int) -> None:
        self._pool: queue.LifoQueue[duckdb.DuckDBPyConnection] = queue.LifoQueue()
        self._all = [con.cursor() for _ in range(max(1, size))]
        for cur in self._all:
            self._pool.put(cur)

    @contextmanager
    def connection(self, timeout: float = 30.0) -> Iterator[duckdb.DuckDBPyConnection]:
        try:
            cur = self._pool.get(timeout=timeout)
        except queue.Empty:
            raise _Busy("all query connections are busy") from None
        try:
            yield cur
        finally:
            # DuckDB keeps a half-read result (e.g. after fetchone) on the connection and
            # refuses the next query until it is dropped; never hand one on.
            with suppress(duckdb.Error):
                cur.abort()
            self._pool.put(cur)

    def close(self) -> None:
        for cur in self._all:
            with suppress(duckdb.Error):
                cur.close()


def _version() -> str:
    try:
        return importlib.metadata.version("turnledger")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # The listen backlog: a burst of exporters connecting at once waits here until the accept
    # loop takes them. At 64, 500 simultaneous connections saw up to 204 resets; the kernel
    # caps it at net.core.somaxconn (4096 on current Linux).
    request_queue_size = 1024
    collector: CollectorServer


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"  # keep-alive: exporters reuse one connection
    server_version = "turnledger"
    timeout = 60  # seconds an idle kept-alive connection (and its thread) may linger

    # --- plumbing -------------------------------------------------------------------------
    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(payload, ensure_ascii=False).encode(), JSON, headers)

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self._json(status, {"error": message}, headers)

    def _authorized(self) -> bool:
        token = self.server.collector.config.token
        if not token:
            return True
        given = self.headers.get("Authorization", "")
        scheme, _, value = given.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode())

    def _guarded(self, handler: Any) -> None:
        # Telemetry never crashes: a bug in a handler is a 500, never a dead server.
        try:
            handler()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception:
            log.exception("%s %s failed", self.command, self.path)
            self.close_connection = True
            with suppress(OSError):
                self._error(500, "internal error; see the collector's log")

    def do_POST(self) -> None:
        self._guarded(self._post)

    def do_GET(self) -> None:
        self._guarded(self._get)

    def do_DELETE(self) -> None:
        self._guarded(self._delete)

    def do_PUT(self) -> None:
        self._guarded(self._not_allowed)

    do_PATCH = do_PUT

    def _delete(self) -> None:
        path = urlsplit(self.path).path.rstrip("/")
        if budget_routes.matches("DELETE", path):
            self._budget(path)
        else:
            self._not_allowed()

    def _not_allowed(self) -> None:
        self.close_connection = True
        self._error(405, f"{self.command} is not supported on {urlsplit(self.path).path}")

    # --- POST /v1/traces --------------------------------------------------------------------
    def _post(self) -> None:
        path = urlsplit(self.path).path.rstrip("/")
        if path == "/v1/traces":
            self._export()
        elif budget_routes.matches("POST", path):
            self._budget(path)
        else:
            self.close_connection = True
            self._error(404, f"no endpoint POST {path}; OTLP traces go to POST /v1/traces")

    # --- budgets (the harness's gate, and `turnledger budget`/`alerts` while we own the file) ---
    def _budget(self, path: str) -> None:
        if not self._authorized():
            if self.command != "GET":
                self._skip_body(budget_routes.MAX_BODY)
            self._error(401, "missing or wrong bearer token (Authorization: Bearer <TURNLEDGER_TOKEN>)",
                        {"WWW-Authenticate": 'Bearer realm="turnledger"'})  # fmt: skip
            return
        body = b""
        if self.command in ("POST", "DELETE"):
            length = self.headers.get("Content-Length", "")
            if length.strip().isdigit() and int(length) > budget_routes.MAX_BODY:
                self._skip_body(budget_routes.MAX_BODY)
                self.close_connection = True
                self._error(413, f"body of {length} bytes exceeds the {budget_routes.MAX_BODY}-byte limit")
                return
            try:
                body = self._read_body(budget_routes.MAX_BODY)
            except (BodyTooLarge, MalformedInput, ValueError) as exc:
                self.close_connection = True
                self._error(400, f"could not read the request body: {exc}")
                return
        c = self.server.collector
        url = urlsplit(self.path)
        request = budget_routes.BudgetRequest(
            self.command,
            [unquote(p) for p in path.split("/")[1:]],
            parse_qs(url.query, keep_blank_values=True),
            body,
        )
        try:
            status, doc = budget_routes.handle(request, c.readers.connection, governor=c.governor, clock=c.clock)
        except _Busy as exc:
            self._error(503, str(exc), {"Retry-After": "1"})
            return
        self._json(status, doc)

    def _otlp_error(self, kind: str, status: int, message: str, *, retry_after: int | None = None) -> None:
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
        self._send(status, status_body(kind, status, message), kind, headers)

    def _skip_body(self, limit: int) -> None:
        """Read and drop a body we refuse, so the client sees our answer rather than a reset
        connection; a body that is chunked, unsized or over ``limit`` closes the connection instead."""
        length = self.headers.get("Content-Length", "")
        if (
            not length.strip().isdigit()
            or int(length) > limit
            or "chunked" in self.headers.get("Transfer-Encoding", "")
        ):
            self.close_connection = True
            return
        left = int(length)
        while left > 0:
            chunk = self.rfile.read(min(left, 1 << 20))
            if not chunk:
                self.close_connection = True
                return
            left -= len(chunk)

    def _read_body(self, limit: int) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._read_chunked(limit)
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        if len(body) != length:
            raise MalformedInput(f"body ended after {len(body)} of {length} bytes")
        return body

    def _read_chunked(self, limit: int) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            line = self.rfile.readline(1024)
            size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            total += size
            if total > limit:
                raise BodyTooLarge(f"chunked body exceeds the {limit}-byte limit")
            parts.append(self.rfile.read(size))
            self.rfile.readline(1024)

    def _export(self) -> None:
        c = self.server.collector
        cfg = c.config
        content_type = self.headers.get("Content-Type")
        if not self._authorized():
            self._skip_body(cfg.max_body_bytes)
            kind = JSON if (content_type or "").lower().startswith(JSON) else PROTOBUF
            self._otlp_error(kind, 401, "missing or wrong bearer token (Authorization: Bearer <TURNLEDGER_TOKEN>)")
            return
        try:
            kind = media_kind(content_type)
        except UnsupportedMediaType as exc:
            self._skip_body(cfg.max_body_bytes)
            self._otlp_error(JSON, 415, str(exc))
            return
        chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
        length_header = self.headers.get("Content-Length")
        if not chunked:
            if length_header is None or not length_header.strip().isdigit():
                self.close_connection = True
                self._otlp_error(kind, 411, "Content-Length is required")
                return
            if int(length_header) > cfg.max_body_bytes:
                self._skip_body(4 * cfg.max_body_bytes)
                self._otlp_error(
                    kind, 413, f"body of {length_header} bytes exceeds the {cfg.max_body_bytes}-byte limit"
                )
                return
        if not c._decode_slots.acquire(timeout=10):
            self.close_connection = True
            self._otlp_error(kind, 503, "collector is busy decoding other requests", retry_after=1)
            return
        try:
            with c.writer.incoming():
                ticket = self._decode_and_submit(kind)
        finally:
            c._decode_slots.release()
        if ticket is None:
            return
        try:
            accepted = ticket.wait(cfg.ack_timeout_s)
        except TimeoutError:
            # The spans may still commit; a retry is harmless (ingest is idempotent).
            self._otlp_error(kind, 503, f"spans not committed within {cfg.ack_timeout_s} s", retry_after=5)
            return
        except WriterUnavailable as exc:
            self._otlp_error(kind, 503, str(exc), retry_after=5)
            return
        self._send(200, export_response(kind, accepted.rejected), kind)

    def _decode_and_submit(self, kind: str) -> Ticket | None:
        """Read, inflate, decode and queue the body; None when a response was already sent."""
        c = self.server.collector
        cfg = c.config
        try:
            raw = self._read_body(cfg.max_body_bytes)
            body = decompress(raw, self.headers.get("Content-Encoding"), cfg.max_decoded_bytes)
            del raw
            batch = c.decoder.prepare(body, kind)
            del body
        except BodyTooLarge as exc:
            self.close_connection = True
            self._otlp_error(kind, 413, str(exc))
            return None
        except UnsupportedEncoding as exc:
            self._otlp_error(kind, 415, str(exc))
            return None
        except (MalformedInput, ValueError) as exc:
            self._otlp_error(kind, 400, f"not a valid OTLP ExportTraceServiceRequest, nothing written: {exc}")
            return None
        except DecoderUnavailable as exc:
            self._otlp_error(kind, 503, str(exc), retry_after=1)
            return None
        if not batch.received:
            self._send(200, export_response(kind), kind)
            return None
        try:
            return c.writer.submit_prepared(batch)
        except QueueFull as exc:
            self._otlp_error(kind, 429, str(exc), retry_after=exc.retry_after)
        except WriterUnavailable as exc:
            self._otlp_error(kind, 503, str(exc), retry_after=5)
        return None

    # --- GET ---------------------------------------------------------------------------------
    def _get(self) -> None:
        url = urlsplit(self.path)
        path = url.path.rstrip("/") or "/"
        if path == "/healthz":
            self._healthz()
            return
        if not self._authorized():
            self._error(401, "missing or wrong bearer token (Authorization: Bearer <TURNLEDGER_TOKEN>)",
                        {"WWW-Authenticate": 'Bearer realm="turnledger"'})  # fmt: skip
            return
        parts = [unquote(p) for p in path.split("/")[1:]]
        if parts == [""]:
            self._json(200, {"service": "turnledger", "endpoints": _ENDPOINTS})
        elif parts == ["api", "queries"]:
            self._json(200, api.describe_queries())
        elif len(parts) == 3 and parts[:2] == ["api", "query"]:
            self._query(parts[2], parse_qs(url.query, keep_blank_values=True))
        elif len(parts) == 4 and parts[:2] == ["api", "context"]:
            self._context(parts[2].lower(), parts[3].lower())
        elif budget_routes.matches("GET", path):
            self._budget(path)
        else:
            self._error(404, f"no endpoint GET {path}; see GET /")

    def _healthz(self) -> None:
        c = self.server.collector
        st = c.writer.stats
        alive = c.writer.alive
        self._json(
            200 if alive else 503,
            {
                "status": "ok" if alive else "unavailable",
                "service": "turnledger",
                "version": _version(),
                "db": str(c.db_path),
                "auth": bool(c.config.token),
                "uptime_s": round(time.monotonic() - c.started_at, 3),
                "queued_spans": c.writer.queued_spans,
                "writer": {
                    "alive": alive,
                    "batches": st.batches,
                    "requests": st.requests,
                    "spans_received": st.spans_received,
                    "spans_written": st.spans_written,
                    "duplicates": st.duplicates,
                    "rejected": st.rejected,
                    "failed_batches": st.failed_batches,
                    "last_error": st.last_error,
                },
            },
        )

    def _query(self, name: str, args: dict[str, list[str]]) -> None:
        fmt = (args.get("format") or ["arrow"])[-1].lower()
        if fmt not in ("arrow", "json"):
            self._error(400, f"parameter format={fmt!r}: choose arrow or json")
            return
        try:
            q = api.build_query(name, args)
        except api.UnknownQuery as exc:
            self._error(404, str(exc))
            return
        except api.BadParameter as exc:
            self._error(400, str(exc))
            return
        try:
            with self.server.collector.readers.connection() as cur:
                table = api.run_arrow(cur, q)
        except _Busy as exc:
            self._error(503, str(exc), {"Retry-After": "1"})
            return
        except duckdb.Error as exc:
            log.exception("query %s failed", name)
            self._error(500, f"query {name!r} failed: {exc}")
            return
        if fmt == "json":
            self._send(200, api.json_records(table), JSON)
        else:
            self._send(200, api.arrow_ipc(table), api.ARROW_STREAM)

    def _context(self, trace_id: str, span_id: str) -> None:
        try:
            with self.server.collector.readers.connection() as cur:
                payload = load_context(cur, trace_id, span_id)
        except _Busy as exc:
            self._error(503, str(exc), {"Retry-After": "1"})
            return
        if payload is None:
            self._error(404, f"no captured context for trace {trace_id!r} span {span_id!r}")
            return
        self._json(200, payload)


_ENDPOINTS = {
    "POST /v1/traces": "OTLP/HTTP trace export (application/x-protobuf or application/json; gzip, deflate)",
    "GET /api/queries": "the named queries and their parameters",
    "GET /api/query/{name}": "run a named query; Arrow IPC stream, or ?format=json",
    "GET /api/context/{trace_id}/{span_id}": "the captured request payload of one model call",
    "POST /v1/budgets/check": "may a model call in this scope go ahead? (a CallScope in, a Decision out)",
    "GET /api/budgets": "budget rules with their current value and level",
    "POST /api/budgets": "add a budget rule (JSON: name, limit, scope, window, metric, soft_fraction, ...)",
    "GET /api/budgets/{id_or_name}": "one rule: its figures, projection and recent alerts",
    "DELETE /api/budgets/{id_or_name}": "remove a rule (its alerts stay)",
    "POST /api/budgets/sweep": "evaluate every rule now, alert, and wait ?wait=S for the webhooks",
    "GET /api/alerts": "alert events, newest first (?budget=&level=&since=&limit=&deliveries=true)",
    "GET /healthz": "liveness (no token needed)",
}


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
        self.readers = _ReaderPool(self.con, cfg.reader_connections)
        self._decode_slots = threading.BoundedSemaphore(max(1, cfg.max_concurrent_decodes))
        try:
            self.httpd = _HTTPServer((cfg.host, cfg.port), _Handler)
        except OSError:
            self._close_storage()
            raise
        self.httpd.collector = self
        self.started_at = time.monotonic()
        self._thread: threading.Thread | None = None
        self._stopped = False

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> CollectorServer:
        """Serve on a background thread (and start the budget sweeper); returns self."""
        if self.governor is not None and self.sweep_interval > 0:
            self.governor.start_sweeper(self.con, self.sweep_interval)
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="turnledger-http", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop taking requests, commit what was accepted, close the ledger (checkpointing it)."""
        if self._stopped:
            return
        self._stopped = True
        if self._thread is not None:
            self.httpd.shutdown()
        self.httpd.server_close()
        self._close_storage(timeout)

    def _close_storage(self, timeout: float = 30.0) -> None:
        # Order matters: the writer commits what was accepted and its hooks evaluate
        # budgets on it; then the governor delivers those alerts and records the
        # attempts through the still-open connection; only then does the connection close.
        self.decoder.close()
        self.writer.close(timeout)
        if self.governor is not None:
            self.governor.join(min(timeout, _ALERT_GRACE_S))
            self.governor.close()
        self.readers.close()
        if self._owns_con:
            # Fold the write-ahead log into the file, so a cleanly stopped ledger is one
            # self-contained file (DuckDB skips this on close when the WAL came from a
            # crash replay and nothing was written since).
            with suppress(duckdb.Error):
                self.con.execute("CHECKPOINT")
            self.con.close()

    def __enter__(self) -> CollectorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
