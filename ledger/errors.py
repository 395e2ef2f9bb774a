"""The one exception tree: every error turnledger raises on purpose comes from ``TurnledgerError``.

Four kinds under it, each with one meaning at every boundary (the CLI prints
any of them as one line and exits 2; the receiver maps the kind to a status):

* ``InputError`` — what a person or a client sent is wrong (HTTP 400/413/415);
* ``NotFound`` — it names something the ledger does not hold (HTTP 404);
* ``Unavailable`` — the collector cannot take it now; retry later (HTTP 429/503);
* ``ServerError`` — a turnledger server answered with an error, or could not be reached;
* ``LLMError`` — a model provider failed a call (the harness retries some of these).

Concrete errors live beside the code that raises them and subclass one kind.
Messages name the bad value (``{name!r}``) and, where there is one, the fix.
"""

from __future__ import annotations

__all__ = [
    "ContextNotCaptured",
    "InputError",
    "LLMError",
    "LedgerBusy",
    "MalformedInput",
    "NotFound",
    "PriceFileError",
    "ServerError",
    "TurnledgerError",
    "Unavailable",
    "UnknownRun",
]


class TurnledgerError(Exception):
    """Base class: the CLI prints these as one actionable line and exits non-zero."""


class InputError(TurnledgerError):
    """What was sent (a file, a body, a parameter, a rule) is invalid; nothing of it was stored."""


class NotFound(TurnledgerError):
    """The id or name given is not in the ledger."""


class Unavailable(TurnledgerError):
    """The collector cannot take the request now (queue full, writer or decoder down); retry."""


class ServerError(TurnledgerError):
    """A turnledger server answered with an error, or could not be reached. ``status``: its HTTP status."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class LLMError(TurnledgerError):
    """A model provider failed a call."""


class MalformedInput(InputError):
    """A file or payload is not valid OTLP; nothing from it was written."""


class PriceFileError(InputError):
    """The user price override file cannot be read or is inconsistent."""


class UnknownRun(NotFound):
    """No run (trace) or turn with that id is in the ledger."""


class ContextNotCaptured(NotFound):
    """The run exists, but its request payloads were not captured."""


class LedgerBusy(Unavailable):
    """Another process (a running collector, an ingest) holds the ledger file."""
