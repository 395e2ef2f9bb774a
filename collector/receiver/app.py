"""The receiver's HTTP layer: a Starlette app on uvicorn (httptools) around ``.routes``.

Endpoints (all JSON errors are ``{"error": "..."}``):

====================================  =========================================================
``POST /v1/traces``                   OTLP/HTTP trace export (protobuf or JSON, gzip/deflate)
``POST /v1/logs``, ``/v1/metrics``      the same door for logs and metrics (``.signals``)
``GET /api/query/{name}``             a ``ledger.queries`` builder by name; Arrow IPC stream, or
                                      ``?format=json`` for a JSON array of row objects
``GET /api/queries``                  the registered queries and their parameters
``GET /api/context/{trace}/{span}``   the captured request payload of one model call
``GET /api/turn/{trace}/{span}``      one model call's request and response (``{request, response}``)
``POST /v1/budgets/check``            the harness's gate: may a model call in this scope go ahead?
``GET|POST /api/budgets``             budget rules with their current level; add one
``GET|POST|DELETE /api/budgets/{rule}`` one rule's figures and alerts; edit it; remove it
``POST /api/budgets/sweep``           evaluate every rule now (the server also sweeps every 15 s)
``GET /api/alerts``                   alert events, newest first, with their deliveries
``GET /healthz``                      liveness (never needs the token); with it, writer figures
====================================  =========================================================

HTTP/1.1 framing is uvicorn's and llhttp's (through ``httptools``): a request with
``Content-Length`` and ``Transfer-Encoding: chunked``, two ``Content-Length`` headers,
or a chunk size that is negative, not hex or past 64 bits is answered 400 and its
connection closed before this module sees it. This module owns the rest: dispatch
by method and path, reading a body completely (within the size limit and the
per-request deadline) *before* a decode slot is taken, so a slow client holds a
coroutine and never a slot; the decode on a thread; awaiting the writer's commit
without a thread per request; and writing a :class:`~.routes.Reply`.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from . import budget_routes, quality_routes, routes
from .otlp_http import JSON, PROTOBUF, UnsupportedMediaType, media_kind
from .routes import Reply
from .signals import BY_PATH
from .writer import Ticket

if TYPE_CHECKING:
    from .server import CollectorServer

__all__ = ["ReceiverHTTPServer"]

log = logging.getLogger("turnledger.server")

_BEARER_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="turnledger"'}
_IDLE_S = 60  # seconds an idle kept-alive connection may linger
_HEADER_BYTES = 64 * 1024  # request line and headers; an exporter sends well under 1 KiB
_DROP_FACTOR = 4  # a declared body up to this many times the limit is read and dropped after its 413


class _Refused(Exception):
    """A request answered without its body being used (too large, too slow)."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply.status)
        self.reply = reply


class _BoundedHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol with the two bounds it lacks: request-line + header bytes
    (``_HEADER_BYTES``; past it the parser is stopped, which uvicorn answers 400 and closes)
    and the time to send them (a connection that has not sent a complete head within the
    body deadline, idle from its first byte or from connecting, is closed)."""

    def __init__(self, *args: Any, headers_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._headers_timeout = headers_timeout
        self._head_bytes = 0
        self._head_timer: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self._headers_timeout, self._head_too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def eof_received(self) -> bool | None:  # type: ignore[override]  # asyncio.Protocol allows a bool
        """A client may half-close once it has sent its request (legal in HTTP/1.1): a whole request
        is still answered (uvicorn would close at once and drop the answer); a body the half-close
        cut short is a 400, as for any malformed request; an idle connection just closes."""
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            return None
        if cycle.more_body and not cycle.response_started:
            self.send_400_response("the request ended before its body did")
            return None
        return True  # keep the write side open for the answer; uvicorn closes after it

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_bytes = 0
        self._arm()

    def _count(self, n: int) -> None:
        self._head_bytes += n
        if self._head_bytes > _HEADER_BYTES:
            raise ValueError(f"request head past {_HEADER_BYTES} bytes")  # stops the parser: 400

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()


class ReceiverHTTPServer:
    """uvicorn serving :func:`build_app` on a socket bound at construction (so a busy port
    fails ``CollectorServer(...)``, and port 0 is known before the server starts)."""

    # The listen backlog: a burst of exporters connecting at once waits here until the accept
    # loop takes them. At 64, 500 simultaneous connections saw up to 204 resets; the kernel
    # caps it at net.core.somaxconn (4096 on current Linux).
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], collector: CollectorServer) -> None:
        self.socket = socket.create_server(address, backlog=self.request_queue_size)
        self.server_address: tuple[str, int] = self.socket.getsockname()[:2]
        slots = max(1, collector.config.max_concurrent_decodes)
        self._decoders = ThreadPoolExecutor(slots, thread_name_prefix="turnledger-decode")
        config = uvicorn.Config(
            build_app(collector, self._decoders),
            # uvicorn calls the protocol "class" with its own arguments: a partial is one.
            http=partial(_BoundedHttpTools, headers_timeout=collector.config.body_timeout_s),  # type: ignore[arg-type]
            # uvloop, measured against the stdlib loop (4 keep-alive clients on GET /healthz, medians
            # of 3 alternating runs): 1,657 vs 89 requests/s, 580 vs 1,185 µs server CPU each.
            loop="uvloop",
            lifespan="off",
            access_log=False,
            log_config=None,
            timeout_keep_alive=_IDLE_S,
            server_header=False,
            headers=[("server", "turnledger")],
        )
        self._uvicorn = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    def serve_in_background(self, timeout: float = 30.0) -> None:
        """Start serving on a thread of its own; returns once the server accepts requests."""
        self._thread = threading.Thread(
            target=self._uvicorn.run, kwargs={"sockets": [self.socket]}, name="turnledger-http", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._uvicorn.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the HTTP server on {self.server_address} did not start")
            time.sleep(0.005)

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop accepting, let requests in flight finish (their commits included), then return."""
        if self._thread is not None:
            self._uvicorn.should_exit = True
            self._thread.join(timeout)
        self._decoders.shutdown(wait=True, cancel_futures=True)
        self.socket.close()


def build_app(c: CollectorServer, decoders: ThreadPoolExecutor) -> Starlette:
    handler = _Handler(c, decoders)
    methods = ["GET", "POST", "DELETE", "PUT", "PATCH"]
    return Starlette(routes=[Route("/{path:path}", handler.dispatch, methods=methods)])


def _send(reply: Reply) -> Response:
    headers = dict(reply.headers)
    if reply.close:
        headers["Connection"] = "close"  # uvicorn closes the connection after answering
    return Response(reply.body, reply.status, headers, media_type=reply.content_type)


def _kind_guess(request: Request) -> str:
    """The encoding an OTLP error answers in, before the Content-Type is checked."""
    return JSON if (request.headers.get("content-type") or "").lower().startswith(JSON) else PROTOBUF


class _Handler:
    def __init__(self, c: CollectorServer, decoders: ThreadPoolExecutor) -> None:
        self.c = c
        self.decoders = decoders

    async def dispatch(self, request: Request) -> Response:
        # Telemetry never crashes: a bug in a handler is an error reply, never a dead
        # server. On the export route it is a 503 (the collector failed, not the
        # body: routes.submit answers for bodies), never a 500 an exporter drops.
        # The path as sent (percent-escapes kept), so an escaped "/" stays inside its part.
        path = (request.scope.get("raw_path") or request.url.path.encode()).decode("latin-1")
        try:
            return _send(await self._route(request, path))
        except _Refused as refused:
            return _send(refused.reply)
        except ClientDisconnect:
            return Response(status_code=400)  # nobody is listening for it
        except Exception:
            log.exception("%s %s failed", request.method, path)
            if request.method == "POST" and path.rstrip("/") in BY_PATH:
                reply = routes.otlp_error(
                    _kind_guess(request), 503, "the collector failed; see its log", retry_after=5, close=True
                )
            else:
                reply = routes.error_reply(500, "internal error; see the collector's log", close=True)
            return _send(reply)

    def _authorized(self, request: Request) -> bool:
        return routes.authorized(self.c.config.token, request.headers.get("authorization"))

    async def _route(self, request: Request, raw_path: str) -> Reply:
        method = request.method
        path = raw_path.rstrip("/")
        if method == "POST" and path in BY_PATH:
            return await self._export(request, BY_PATH[path].name)
        if budget_routes.matches(method, path):
            return await self._budget(request, path)
        if quality_routes.matches(method, path):
            return await self._quality(request, path)
        if method == "POST":
            return routes.error_reply(
                404, f"no endpoint POST {path}; OTLP goes to POST /v1/traces, /v1/logs or /v1/metrics", close=True
            )
        if method != "GET":
            return routes.error_reply(405, f"{method} is not supported on {raw_path}", close=True)
        return await self._get(request, path or "/")

    async def _get(self, request: Request, path: str) -> Reply:
        if path == "/healthz":
            return routes.healthz(self.c, figures=self._authorized(request))
        if not self._authorized(request):
            return routes.error_reply(401, routes.UNAUTHORIZED, _BEARER_CHALLENGE)
        c = self.c
        parts = [unquote(p) for p in path.split("/")[1:]]
        if parts == [""]:
            return routes.index()
        if parts == ["api", "queries"]:  # off the loop: the first one imports the query registry
            return await run_in_threadpool(routes.describe_queries)
        if len(parts) == 3 and parts[:2] == ["api", "query"]:
            args = parse_qs(request.url.query, keep_blank_values=True)
            return await run_in_threadpool(routes.query, c, parts[2], args)
        if len(parts) == 4 and parts[:2] == ["api", "context"]:
            return await run_in_threadpool(routes.context, c, parts[2].lower(), parts[3].lower())
        if len(parts) == 4 and parts[:2] == ["api", "turn"]:
            return await run_in_threadpool(routes.turn, c, parts[2].lower(), parts[3].lower())
        return routes.error_reply(404, f"no endpoint GET {path}; see GET /")

    # --- bodies ---------------------------------------------------------------------------
    async def _read_body(self, request: Request, limit: int) -> bytes:
        """The whole body, or :class:`_Refused`: 413 past ``limit`` (declared or streamed),
        408 when it has not arrived within the per-request deadline."""
        declared = request.headers.get("content-length")
        if declared is not None and int(declared) > limit:  # httptools has checked it is digits
            # Answered at once. A body up to a few times the limit is left for uvicorn to read
            # and drop, so the client sees the 413 rather than a reset; a larger one closes.
            message = f"body of {declared} bytes exceeds the {limit}-byte limit"
            raise _Refused(self._error(request, 413, message, close=int(declared) > _DROP_FACTOR * limit))
        chunks: list[bytes] = []
        size = 0
        deadline = self.c.config.body_timeout_s
        try:
            async with asyncio.timeout(deadline):
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > limit:
                        raise _Refused(self._error(request, 413, f"body exceeds the {limit}-byte limit"))
                    chunks.append(chunk)
        except TimeoutError:
            message = f"request body not received within {deadline} s"
            raise _Refused(self._error(request, 408, message)) from None
        return b"".join(chunks)

    @staticmethod
    def _error(request: Request, status: int, message: str, *, close: bool = True) -> Reply:
        """A refused body's reply; by default the connection closes after it (the rest of the body
        may still be on its way, so it cannot carry another request)."""
        if request.url.path.rstrip("/") in BY_PATH:
            return routes.otlp_error(_kind_guess(request), status, message, close=close)
        return routes.error_reply(status, message, close=close)

    # --- POST /v1/traces, /v1/logs, /v1/metrics ----------------------------------------------
    async def _export(self, request: Request, signal: str) -> Reply:
        c = self.c
        cfg = c.config
        headers = request.headers
        if not self._authorized(request):
            return routes.otlp_error(_kind_guess(request), 401, routes.UNAUTHORIZED)
        try:
            kind = media_kind(headers.get("content-type"))
        except UnsupportedMediaType as exc:
            return routes.otlp_error(JSON, 415, str(exc))
        if "chunked" not in (headers.get("transfer-encoding") or "").lower() and "content-length" not in headers:
            return routes.otlp_error(kind, 411, "Content-Length is required", close=True)
        body = await self._read_body(request, cfg.max_body_bytes)
        # Only a complete body takes its share of the decode budget, then a slot: a slow client holds neither.
        encoding = headers.get("content-encoding")
        share = routes.decode_share(c, body, encoding)
        if not await c.decode_budget.async_acquire(share, timeout=routes.DECODE_BUDGET_WAIT_S):
            return routes.budget_exceeded(kind)
        try:  # the share is held until the rows are committed: they are in memory until then
            if not await c.decode_slots.async_acquire(timeout=routes.DECODE_SLOT_WAIT_S):
                return routes.otlp_error(
                    kind, 503, "collector is busy decoding other requests", retry_after=1, close=True
                )
            try:
                loop = asyncio.get_running_loop()
                outcome = await loop.run_in_executor(self.decoders, self._submit, kind, body, encoding, signal)
            finally:
                c.decode_slots.async_release()
            del body
            if isinstance(outcome, Reply):
                return outcome
            await _committed(outcome, cfg.ack_timeout_s)
            return routes.acknowledge(c, kind, outcome, wait_s=0, signal=signal)
        finally:
            c.decode_budget.release(share)

    def _submit(self, kind: str, body: bytes, encoding: str | None, signal: str) -> Reply | Ticket:
        with self.c.writer.incoming():
            return routes.submit(self.c, kind, body, encoding, signal)

    # --- budgets ----------------------------------------------------------------------------
    async def _budget(self, request: Request, path: str) -> Reply:
        method = request.method
        if not self._authorized(request):
            return routes.error_reply(401, routes.UNAUTHORIZED, _BEARER_CHALLENGE)
        body = await self._read_body(request, budget_routes.MAX_BODY) if method in ("POST", "DELETE") else b""
        parts = [unquote(p) for p in path.split("/")[1:]]
        query = parse_qs(request.url.query, keep_blank_values=True)
        return await run_in_threadpool(routes.budget, self.c, method, parts, query, body)

    # --- feedback, the review queue, cases ----------------------------------------------------
    async def _quality(self, request: Request, path: str) -> Reply:
        if not self._authorized(request):  # the same token check as POST /v1/traces
            return routes.error_reply(401, routes.UNAUTHORIZED, _BEARER_CHALLENGE)
        body = await self._read_body(request, quality_routes.MAX_BODY) if request.method == "POST" else b""
        parts = [unquote(p) for p in path.split("/")[1:]]
        query = parse_qs(request.url.query, keep_blank_values=True)
        return await run_in_threadpool(quality_routes.handle, self.c, request.method, parts, query, body)


async def _committed(ticket: Ticket, timeout: float) -> None:
    """Wait (on the event loop, no thread) until the ticket's batch committed or failed, or ``timeout``."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def wake() -> None:
        if not done.done():
            done.set_result(None)

    def from_writer() -> None:
        with suppress(RuntimeError):  # the loop is closed: the server stopped, nobody waits
            loop.call_soon_threadsafe(wake)

    ticket.when_done(from_writer)
    with suppress(TimeoutError):  # then acknowledge answers 503: not committed in time
        await asyncio.wait_for(done, timeout)
