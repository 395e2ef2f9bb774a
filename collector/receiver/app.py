"""The receiver's HTTP layer: ``http.server`` framing around ``.routes``.

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

This module owns what is specific to the hand-written server: dispatch by
method and path, reading bodies (sized or chunked, within limits), refusing a
request before its body is read (and reading it off the connection, or closing
it), and writing a :class:`~.routes.Reply`. The stdlib ``ThreadingHTTPServer``
is enough here: an OTLP exporter sends a few large requests per second over a
kept-alive connection, so per-request overhead is noise beside decoding and
ingest, and it adds no dependency.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

from ledger.errors import MalformedInput

from . import budget_routes, routes
from .otlp_http import JSON, PROTOBUF, BodyTooLarge, UnsupportedMediaType, media_kind
from .routes import Reply

if TYPE_CHECKING:
    from .server import CollectorServer

__all__ = ["ReceiverHTTPServer"]

log = logging.getLogger("turnledger.server")

_BEARER_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="turnledger"'}


class ReceiverHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # The listen backlog: a burst of exporters connecting at once waits here until the accept
    # loop takes them. At 64, 500 simultaneous connections saw up to 204 resets; the kernel
    # caps it at net.core.somaxconn (4096 on current Linux).
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], collector: CollectorServer) -> None:
        super().__init__(address, _Handler)
        self.collector = collector


class _Handler(BaseHTTPRequestHandler):
    server: ReceiverHTTPServer
    protocol_version = "HTTP/1.1"  # keep-alive: exporters reuse one connection
    server_version = "turnledger"
    timeout = 60  # seconds an idle kept-alive connection (and its thread) may linger

    # --- plumbing -------------------------------------------------------------------------
    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def _send(self, reply: Reply) -> None:
        if reply.close:
            self.close_connection = True
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        for k, v in reply.headers.items():
            self.send_header(k, v)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply.body)

    def _authorized(self) -> bool:
        return routes.authorized(self.server.collector.config.token, self.headers.get("Authorization"))

    def _guarded(self, handler: Callable[[], None]) -> None:
        # Telemetry never crashes: a bug in a handler is an error reply, never a dead
        # server. On the export route it is a 503 (the collector failed, not the
        # body: routes.submit answers for bodies), never a 500 an exporter drops.
        try:
            handler()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception:
            log.exception("%s %s failed", self.command, self.path)
            if self.command == "POST" and urlsplit(self.path).path.rstrip("/") == "/v1/traces":
                kind = JSON if (self.headers.get("Content-Type") or "").lower().startswith(JSON) else PROTOBUF
                reply = routes.otlp_error(kind, 503, "the collector failed; see its log", retry_after=5, close=True)
            else:
                reply = routes.error_reply(500, "internal error; see the collector's log", close=True)
            with suppress(OSError):
                self._send(reply)

    def do_POST(self) -> None:
        self._guarded(self._post)

    def do_GET(self) -> None:
        self._guarded(self._get)

    def do_DELETE(self) -> None:
        self._guarded(self._delete)

    def do_PUT(self) -> None:
        self._guarded(self._not_allowed)

    do_PATCH = do_PUT

    def _not_allowed(self) -> None:
        path = urlsplit(self.path).path
        self._send(routes.error_reply(405, f"{self.command} is not supported on {path}", close=True))

    # --- bodies ---------------------------------------------------------------------------
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

    # --- dispatch -------------------------------------------------------------------------
    def _post(self) -> None:
        path = urlsplit(self.path).path.rstrip("/")
        if path == "/v1/traces":
            self._export()
        elif budget_routes.matches("POST", path):
            self._budget(path)
        else:
            message = f"no endpoint POST {path}; OTLP traces go to POST /v1/traces"
            self._send(routes.error_reply(404, message, close=True))

    def _delete(self) -> None:
        path = urlsplit(self.path).path.rstrip("/")
        if budget_routes.matches("DELETE", path):
            self._budget(path)
        else:
            self._not_allowed()

    def _get(self) -> None:
        url = urlsplit(self.path)
        path = url.path.rstrip("/") or "/"
        if path == "/healthz":
            self._send(routes.healthz(self.server.collector))
            return
        if not self._authorized():
            self._send(routes.error_reply(401, routes.UNAUTHORIZED, _BEARER_CHALLENGE))
            return
        c = self.server.collector
        parts = [unquote(p) for p in path.split("/")[1:]]
        if parts == [""]:
            self._send(routes.index())
        elif parts == ["api", "queries"]:
            self._send(routes.describe_queries())
        elif len(parts) == 3 and parts[:2] == ["api", "query"]:
            self._send(routes.query(c, parts[2], parse_qs(url.query, keep_blank_values=True)))
        elif len(parts) == 4 and parts[:2] == ["api", "context"]:
            self._send(routes.context(c, parts[2].lower(), parts[3].lower()))
        elif budget_routes.matches("GET", path):
            self._budget(path)
        else:
            self._send(routes.error_reply(404, f"no endpoint GET {path}; see GET /"))

    # --- POST /v1/traces --------------------------------------------------------------------
    def _export(self) -> None:
        c = self.server.collector
        cfg = c.config
        content_type = self.headers.get("Content-Type")
        if not self._authorized():
            self._skip_body(cfg.max_body_bytes)
            kind = JSON if (content_type or "").lower().startswith(JSON) else PROTOBUF
            self._send(routes.otlp_error(kind, 401, routes.UNAUTHORIZED))
            return
        try:
            kind = media_kind(content_type)
        except UnsupportedMediaType as exc:
            self._skip_body(cfg.max_body_bytes)
            self._send(routes.otlp_error(JSON, 415, str(exc)))
            return
        if "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
            length = self.headers.get("Content-Length")
            if length is None or not length.strip().isdigit():
                self._send(routes.otlp_error(kind, 411, "Content-Length is required", close=True))
                return
            if int(length) > cfg.max_body_bytes:
                self._skip_body(4 * cfg.max_body_bytes)
                message = f"body of {length} bytes exceeds the {cfg.max_body_bytes}-byte limit"
                self._send(routes.otlp_error(kind, 413, message))
                return
        encoding = self.headers.get("Content-Encoding")
        self._send(routes.export(c, kind, lambda: self._read_body(cfg.max_body_bytes), encoding))

    # --- budgets ----------------------------------------------------------------------------
    def _budget(self, path: str) -> None:
        limit = budget_routes.MAX_BODY
        if not self._authorized():
            if self.command != "GET":
                self._skip_body(limit)
            self._send(routes.error_reply(401, routes.UNAUTHORIZED, _BEARER_CHALLENGE))
            return
        body = b""
        if self.command in ("POST", "DELETE"):
            length = self.headers.get("Content-Length", "")
            if length.strip().isdigit() and int(length) > limit:
                self._skip_body(limit)
                message = f"body of {length} bytes exceeds the {limit}-byte limit"
                self._send(routes.error_reply(413, message, close=True))
                return
            try:
                body = self._read_body(limit)
            except (BodyTooLarge, MalformedInput, ValueError) as exc:
                self._send(routes.error_reply(400, f"could not read the request body: {exc}", close=True))
                return
        parts = [unquote(p) for p in path.split("/")[1:]]
        query = parse_qs(urlsplit(self.path).query, keep_blank_values=True)
        self._send(routes.budget(self.server.collector, self.command, parts, query, body))
