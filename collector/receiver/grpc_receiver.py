"""OTLP/gRPC: ``TraceService/Export`` (and ``LogsService``, ``MetricsService``: ``.signals``) on
``grpcio``, into the same path as OTLP/HTTP.

The method is the one ``opentelemetry-proto`` defines
(``opentelemetry.proto.collector.trace.v1.TraceService/Export``), registered
with raw bytes in and out rather than through the generated
``add_TraceServiceServicer_to_server``: that one parses the request in this
process, and the decode pool parses it again in a worker (the GIL this
process has is the writer's). Each call then goes through ``routes.export``,
as an OTLP/HTTP POST does, so both transports share the token check, the decode
slots, the writer's tickets and the partial-success answer:

* no or a wrong ``authorization: Bearer <token>`` metadata → ``UNAUTHENTICATED``;
* a message over ``ServerConfig.max_body_bytes`` (after gRPC's own gzip/deflate
  decompression) → ``RESOURCE_EXHAUSTED`` from gRPC itself, before any of this runs;
* a body that is no ``ExportTraceServiceRequest`` → ``INVALID_ARGUMENT``;
* a full queue → ``RESOURCE_EXHAUSTED``, a busy or stopping collector → ``UNAVAILABLE``,
  both with ``RetryInfo`` (which the OTLP specification requires before a client
  may retry ``RESOURCE_EXHAUSTED``);
* ``OK`` only once the spans are committed, with ``partial_success`` naming rejected spans.

Memory: a call's message stays in memory until it is answered (gRPC holds it),
so at most ``HANDLER_THREADS`` messages of ``max_body_bytes`` are held at once;
calls beyond those wait in gRPC's queue (``MAX_WAITING_CALLS``, past which gRPC
answers ``RESOURCE_EXHAUSTED``) with only what HTTP/2 flow control lets in.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING

import grpc
from google.protobuf import duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from . import routes
from .otlp_http import PROTOBUF
from .routes import Reply
from .signals import SIGNALS

if TYPE_CHECKING:
    from .server import CollectorServer

__all__ = ["EXPORT_METHOD", "HANDLER_THREADS", "MAX_WAITING_CALLS", "GrpcBindError", "GrpcReceiver"]

log = logging.getLogger("turnledger.server")

_SERVICE = trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"]
EXPORT_METHOD = f"/{_SERVICE.full_name}/Export"
# Calls handled at once. A call holds its thread until its spans commit, so this is also how
# many exporters can wait on one commit together (the writer coalesces them into it).
HANDLER_THREADS = 16
MAX_WAITING_CALLS = 256
# The Python SDK's exporter reads the retry delay from this trailer; others (Go, Java, the
# Collector) from the RetryInfo inside grpc-status-details-bin. Both are sent.
_RETRY_INFO_KEY = "google.rpc.retryinfo-bin"
_STATUS_DETAILS_KEY = "grpc-status-details-bin"


class GrpcBindError(OSError):
    """The gRPC port cannot be bound (taken, or not an address of this machine)."""


class GrpcReceiver:
    """A gRPC server bound to ``host:port`` (0: a free port) for one ``CollectorServer``."""

    def __init__(self, collector: CollectorServer, host: str, port: int) -> None:
        self._collector = collector
        self._server = grpc.server(
            ThreadPoolExecutor(max_workers=HANDLER_THREADS, thread_name_prefix="turnledger-grpc"),
            options=[
                ("grpc.max_receive_message_length", collector.config.max_body_bytes),
                # gRPC sets SO_REUSEPORT by default: a second collector would then share the
                # port silently instead of failing to start.
                ("grpc.so_reuseport", 0),
            ],
            maximum_concurrent_rpcs=HANDLER_THREADS + MAX_WAITING_CALLS,
        )
        # Raw bytes in and out (no (de)serializer): the decode pool parses the request.
        # One Export per signal (TraceService, LogsService, MetricsService), all through routes.export.
        services = tuple(
            grpc.method_handlers_generic_handler(
                s.service, {"Export": grpc.unary_unary_rpc_method_handler(partial(self._export, signal=s.name))}
            )
            for s in SIGNALS.values()
        )
        self._server.add_generic_rpc_handlers(services)
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            self.port = self._server.add_insecure_port(address)
        except RuntimeError as exc:  # grpcio's way of saying the address is taken or invalid
            raise GrpcBindError(f"cannot listen for OTLP/gRPC on {address}: {exc}") from None

    def start(self) -> None:
        self._server.start()

    def stop(self, grace: float) -> None:
        """Refuse new calls; calls in flight get ``grace`` seconds to be answered (the writer still runs)."""
        self._server.stop(grace).wait()

    def _export(self, request: bytes, context: grpc.ServicerContext, *, signal: str) -> bytes:
        c = self._collector
        metadata = dict(context.invocation_metadata())
        if not routes.authorized(c.config.token, metadata.get("authorization")):  # gRPC keeps keys lowercase
            reply = routes.otlp_error(PROTOBUF, 401, routes.UNAUTHORIZED)
        else:
            try:
                reply = routes.export(c, PROTOBUF, request, None, signal)  # gRPC has already inflated it
            except Exception:  # telemetry never crashes: the collector failed, not the body
                log.exception("OTLP/gRPC export failed")
                reply = routes.otlp_error(PROTOBUF, 503, "the collector failed; see its log", retry_after=5)
        if reply.status == 200:
            return reply.body
        _abort(context, reply)
        raise AssertionError("unreachable: abort raises")


def _abort(context: grpc.ServicerContext, reply: Reply) -> None:
    """End the call with the failure ``reply`` describes: its body is already the
    ``google.rpc.Status`` (OTLP/HTTP sends it as the body; gRPC as the call's status)."""
    status = status_pb2.Status.FromString(reply.body)
    trailers: list[tuple[str, bytes]] = []
    retry_after = reply.headers.get("Retry-After")
    if retry_after is not None:
        info = error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=int(retry_after)))
        status.details.add().Pack(info)
        trailers.append((_RETRY_INFO_KEY, info.SerializeToString()))
    trailers.append((_STATUS_DETAILS_KEY, status.SerializeToString()))
    context.set_trailing_metadata(trailers)
    context.abort(grpc.StatusCode[code_pb2.Code.Name(status.code)], status.message)
