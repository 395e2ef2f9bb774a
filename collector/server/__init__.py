"""The collector server: OTLP/HTTP ingest from any OpenTelemetry-instrumented agent, and the query API.

``CollectorServer`` is the one writer of the ledger file; ``QueryClient`` reads
through it. ``turnledger serve`` / ``turnledger up`` run it (``collector.server.cli``).
"""

from .app import DEFAULT_HOST, DEFAULT_PORT, CollectorServer, ServerConfig
from .client import QueryClient, QueryError
from .writer import IngestHook, LedgerWriter, QueueFull, WriterUnavailable

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "CollectorServer",
    "IngestHook",
    "LedgerWriter",
    "QueryClient",
    "QueryError",
    "QueueFull",
    "ServerConfig",
    "WriterUnavailable",
]
