"""What each endpoint answers, apart from the HTTP server that carries it.

Every function here takes the ``CollectorServer`` and the request's parts
(already read: path pieces, query string, body) and returns a :class:`Reply`;
none touches a socket. ``.app`` is the HTTP layer around them (Starlette on
uvicorn): it frames requests, enforces what must be refused before a body is
read, and sends the replies.
"""

from __future__ import annotations

import hmac
import importlib.metadata
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import duckdb

from collector.otlp import RequestTooLarge
from ledger.content import CapturedTurn, load_turn
from ledger.errors import MalformedInput

from . import budget_routes, quality_routes
from .decode_budget import inflated_estimate
from .decode_pool import DecoderUnavailable
from .otlp_http import JSON, BodyTooLarge, UnsupportedEncoding, export_response, status_body
from .readers import ReaderBusy
from .signals import SIGNALS, TRACES
from .writer import QueueFull, RequestRejected, Ticket, WriterUnavailable

if TYPE_CHECKING:
    from .server import CollectorServer

__all__ = [
    "ENDPOINTS",
    "UNAUTHORIZED",
    "Reply",
    "acknowledge",
    "authorized",
    "budget",
    "budget_exceeded",
    "context",
    "decode_share",
    "describe_queries",
    "error_reply",
    "export",
    "healthz",
    "index",
    "json_reply",
    "otlp_error",
    "query",
    "submit",
    "turn",
]

log = logging.getLogger("turnledger.server")

UNAUTHORIZED = "missing or wrong bearer token (Authorization: Bearer <TURNLEDGER_TOKEN>)"

ENDPOINTS = {
    "POST /v1/traces": "OTLP/HTTP trace export (application/x-protobuf or application/json; gzip, deflate)",
    "POST /v1/logs": "OTLP/HTTP log export: the events turnledger reads (Claude Code's) become spans and charges",
    "POST /v1/metrics": "OTLP/HTTP metric export: number points kept as a cross-check series, never charged",
    "GET /api/queries": "the named queries and their parameters",
    "GET /api/query/{name}": "run a named query; Arrow IPC stream, or ?format=json",
    "GET /api/context/{trace_id}/{span_id}": "the captured request payload of one model call",
    "GET /api/turn/{trace_id}/{span_id}": "one model call's captured request and response, and the request in its "
    "provider's wire format ({request, response, wire: {api, request, not_reported}})",
    "POST /v1/budgets/check": "may a model call in this scope go ahead? (a CallScope in, a Decision out)",
    "GET /api/budgets": "budget rules with their current value and level",
    "POST /api/budgets": "add a budget rule (JSON: name, limit, scope, window, metric, soft_fraction, ...)",
    "GET /api/budgets/{id_or_name}": "one rule: its figures, projection and recent alerts",
    "DELETE /api/budgets/{id_or_name}": "remove a rule (its alerts stay)",
    "POST /api/budgets/sweep": "evaluate every rule now, alert, and wait ?wait=S for the webhooks",
    "GET /api/alerts": "alert events, newest first (?budget=&level=&since=&limit=&deliveries=true)",
    **quality_routes.ENDPOINTS,
    "GET /healthz": "liveness (no token needed); with the token, the ledger path and writer figures",
}


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    content_type: str = JSON
    headers: Mapping[str, str] = field(default_factory=dict)
    close: bool = False  # drop the connection after answering (e.g. its body was not read)


def json_reply(status: int, payload: Any, headers: Mapping[str, str] | None = None) -> Reply:
    return Reply(status, json.dumps(payload, ensure_ascii=False).encode(), JSON, headers or {})


def error_reply(status: int, message: str, headers: Mapping[str, str] | None = None, *, close: bool = False) -> Reply:
    return Reply(status, json.dumps({"error": message}, ensure_ascii=False).encode(), JSON, headers or {}, close)


def otlp_error(kind: str, status: int, message: str, *, retry_after: int | None = None, close: bool = False) -> Reply:
    """An OTLP/HTTP failure: a ``google.rpc.Status`` in the request's encoding."""
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    return Reply(status, status_body(kind, status, message), kind, headers, close)


def _busy(exc: ReaderBusy) -> Reply:
    return error_reply(503, str(exc), {"Retry-After": "1"})


def authorized(token: str | None, authorization: str | None) -> bool:
    """Does an ``Authorization`` header carry the configured bearer token (or is none configured)?"""
    if not token:
        return True
    scheme, _, value = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode())


# --- POST /v1/traces|logs|metrics, and OTLP/gRPC TraceService|LogsService|MetricsService/Export --

DECODE_SLOT_WAIT_S = 10  # a complete body waits this long for a decode slot before it is told to retry
# ... and this long for its share of the decode budget: behind three maximum-size bodies, each decoded
# and committed in turn (several seconds each on a loaded machine), a fourth still gets its turn.
DECODE_BUDGET_WAIT_S = 60


def export(c: CollectorServer, kind: str, raw: bytes, encoding: str | None, signal: str = TRACES) -> Reply:
    """One OTLP export from a complete body to its answer, on the caller's thread (the gRPC
    listener's; the HTTP layer takes the same steps on its event loop, without a thread per
    waiting request): a decode slot shared by every listener, ``submit``, the wait for the commit.

    The reply is what OTLP/HTTP sends; the gRPC layer turns a failure's ``google.rpc.Status``
    body into the call's status.
    """
    share = decode_share(c, raw, encoding)
    if not c.decode_budget.green_acquire(share, timeout=DECODE_BUDGET_WAIT_S):
        return budget_exceeded(kind)
    try:  # the share is held until the rows are committed: they are in memory until then
        if not c.decode_slots.green_acquire(timeout=DECODE_SLOT_WAIT_S):
            return otlp_error(kind, 503, "collector is busy decoding other requests", retry_after=1, close=True)
        try:
            with c.writer.incoming():
                outcome = submit(c, kind, raw, encoding, signal)
        finally:
            c.decode_slots.green_release()
        del raw
        return outcome if isinstance(outcome, Reply) else acknowledge(c, kind, outcome, signal=signal)
    finally:
        c.decode_budget.release(share)


def decode_share(c: CollectorServer, raw: bytes, encoding: str | None) -> int:
    """The share of the decode budget a body takes (``.decode_budget``)."""
    return c.decode_budget.share(inflated_estimate(raw, encoding, c.config.max_decoded_bytes))


def budget_exceeded(kind: str) -> Reply:
    return otlp_error(
        kind, 503, "collector is busy decoding other large requests; retry the export", retry_after=1, close=True
    )


def submit(c: CollectorServer, kind: str, raw: bytes, encoding: str | None, signal: str = TRACES) -> Reply | Ticket:
    """Inflate, decode and queue an export's body (read completely): the writer's ticket,
    or the reply when there is nothing to wait for (a bad body, a full queue, no spans).

    No body is ever a 500: what the sender must fix is 400 (413, 415), what a
    retry can fix is 429/503. Decoding runs ``collector.otlp`` and ``prepare``,
    which raise nothing but ``MalformedInput`` by design; anything else they
    raise is still this body's doing, so it is a 400 naming the error.
    """
    cfg = c.config
    try:
        batch = c.decoder.prepare(raw, kind, signal, encoding=encoding, max_decoded_bytes=cfg.max_decoded_bytes)
    except (BodyTooLarge, RequestTooLarge) as exc:
        return otlp_error(kind, 413, str(exc))
    except UnsupportedEncoding as exc:
        return otlp_error(kind, 415, str(exc))
    except (MalformedInput, ValueError) as exc:
        request = SIGNALS[signal].request
        return otlp_error(kind, 400, f"not a valid OTLP {request}, nothing written: {exc}")
    except DecoderUnavailable as exc:
        return otlp_error(kind, 503, str(exc), retry_after=1)
    except Exception as exc:  # a decoder bug this body found: logged, and never retried forever
        log.exception("decoding an OTLP body failed unexpectedly")
        return otlp_error(kind, 400, f"this body cannot be decoded, nothing written: {type(exc).__name__}: {exc}")
    if not batch.received:
        return Reply(200, export_response(kind, flagged=batch.flagged, signal=signal), kind)
    try:
        return c.writer.submit_prepared(batch)
    except QueueFull as exc:
        return otlp_error(kind, 429, str(exc), retry_after=exc.retry_after)
    except WriterUnavailable as exc:
        return otlp_error(kind, 503, str(exc), retry_after=5)


def acknowledge(
    c: CollectorServer, kind: str, ticket: Ticket, wait_s: float | None = None, *, signal: str = TRACES
) -> Reply:
    """The export's answer once its spans are committed (200), or why they are not (503, 400).

    Waits for the commit on this thread up to ``wait_s`` (default: the configured ack timeout);
    a caller that has already awaited it elsewhere (the event loop) passes 0."""
    timeout = c.config.ack_timeout_s
    try:
        accepted = ticket.wait(timeout if wait_s is None else wait_s)
    except TimeoutError:
        # The spans may still commit; a retry is harmless (ingest is idempotent).
        return otlp_error(kind, 503, f"spans not committed within {timeout} s", retry_after=5)
    except RequestRejected as exc:  # its rows failed the commit on their own: retrying cannot help
        return otlp_error(kind, 400, str(exc))
    except WriterUnavailable as exc:
        return otlp_error(kind, 503, str(exc), retry_after=5)
    return Reply(200, export_response(kind, accepted.rejected, accepted.flagged, signal), kind)


# --- GET ------------------------------------------------------------------------------------


def index() -> Reply:
    return json_reply(200, {"service": "turnledger", "endpoints": ENDPOINTS})


def _version() -> str:
    try:
        return importlib.metadata.version("turnledger")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def healthz(c: CollectorServer, *, figures: bool) -> Reply:
    """Liveness; with ``figures`` (the caller holds the token, or none is set) also the
    ledger's path and the writer's figures, which are not for anyone who can reach the port."""
    st = c.writer.stats
    alive = c.writer.alive
    liveness = {"status": "ok" if alive else "unavailable", "service": "turnledger", "auth": c.auth}
    if not figures:
        return json_reply(200 if alive else 503, liveness)
    return json_reply(
        200 if alive else 503,
        {
            **liveness,
            "version": _version(),
            "db": str(c.db_path),
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


def describe_queries() -> Reply:
    from . import api  # the query registry (and pandas) only when a query route runs

    return json_reply(200, api.describe_queries())


def query(c: CollectorServer, name: str, args: dict[str, list[str]]) -> Reply:
    from . import api

    fmt = (args.get("format") or ["arrow"])[-1].lower()
    if fmt not in ("arrow", "json"):
        return error_reply(400, f"parameter format={fmt!r}: choose arrow or json")
    try:
        q = api.build_query(name, args)
    except api.UnknownQuery as exc:
        return error_reply(404, str(exc))
    except api.BadParameter as exc:
        return error_reply(400, str(exc))
    try:
        with c.readers.connection() as cur:
            table = api.run_arrow(cur, q)
    except ReaderBusy as exc:
        return _busy(exc)
    except duckdb.Error as exc:
        log.exception("query %s failed", name)
        return error_reply(500, f"query {name!r} failed: {exc}")
    if fmt == "json":
        return Reply(200, api.json_records(table), JSON)
    return Reply(200, api.arrow_ipc(table), api.ARROW_STREAM)


def context(c: CollectorServer, trace_id: str, span_id: str) -> Reply:
    """The captured request payload of one model call."""
    return _captured(c, trace_id, span_id, lambda t: t.request, "context")


def turn(c: CollectorServer, trace_id: str, span_id: str) -> Reply:
    """One model call's captured request and response, and the request in its provider's wire format
    (``wire``: ``WireRequest.as_json``, null when it cannot be rebuilt), as ``load_turn`` gives them."""
    return _captured(
        c,
        trace_id,
        span_id,
        lambda t: {"request": t.request, "response": t.response, "wire": t.wire.as_json() if t.wire else None},
        "request or response",
    )


def _captured(c: CollectorServer, trace_id: str, span_id: str, part: Callable[[CapturedTurn], Any], what: str) -> Reply:
    try:
        with c.readers.connection() as cur:
            captured = load_turn(cur, trace_id, span_id)
    except ReaderBusy as exc:
        return _busy(exc)
    doc = part(captured) if captured is not None else None
    if doc is None:
        return error_reply(404, f"no captured {what} for trace {trace_id!r} span {span_id!r}")
    return json_reply(200, doc)


# --- budgets (the harness's gate, and `turnledger budget`/`alerts` while we own the file) ----


def budget(c: CollectorServer, method: str, parts: Sequence[str], query: dict[str, list[str]], body: bytes) -> Reply:
    request = budget_routes.BudgetRequest(method, list(parts), query, body)
    try:
        status, doc = budget_routes.handle(request, c.readers.connection, governor=c.governor, clock=c.clock)
    except ReaderBusy as exc:
        return _busy(exc)
    return json_reply(status, doc)
