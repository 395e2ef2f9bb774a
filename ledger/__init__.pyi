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
