from .server import DEFAULT_HOST, DEFAULT_PORT, CollectorServer, ServerConfig
from .writer import IngestHook, LedgerWriter, QueueFull, WriterUnavailable

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "CollectorServer",
    "IngestHook",
    "LedgerWriter",
    "QueueFull",
    "ServerConfig",
    "WriterUnavailable",
]
