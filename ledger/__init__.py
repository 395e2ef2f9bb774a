"""turnledger's ledger: the DuckDB store and everything computed from it.

The curated API; submodules hold the rest: ``ledger.ingest.ingest`` appends spans
(not re-exported here, so ``ledger.ingest`` stays the module), ``ledger.queries``
builds every named query.
"""

from .errors import ContextNotCaptured, MalformedInput, PriceFileError, TurnledgerError, UnknownRun
from .ingest import IngestReport
from .pricing import PriceBook, PricedCall, TokenCounts
from .spans import SpanEvent, SpanRecord
from .store import open_ledger

__all__ = [
    "ContextNotCaptured",
    "IngestReport",
    "MalformedInput",
    "PriceBook",
    "PriceFileError",
    "PricedCall",
    "SpanEvent",
    "SpanRecord",
    "TokenCounts",
    "TurnledgerError",
    "UnknownRun",
    "open_ledger",
]
