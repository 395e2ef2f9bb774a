"""The small exception hierarchy every turnledger error comes from."""

from __future__ import annotations

__all__ = [
    "ContextNotCaptured",
    "MalformedInput",
    "PriceFileError",
    "TurnledgerError",
    "UnknownRun",
]


class TurnledgerError(Exception):
    """Base class: the CLI prints these as one actionable line and exits non-zero."""


class MalformedInput(TurnledgerError):
    """A file or payload is not valid OTLP; nothing from it was written."""


class PriceFileError(TurnledgerError):
    """The user price override file cannot be read or is inconsistent."""


class UnknownRun(TurnledgerError):
    """No run (trace) or turn with that id is in the ledger."""


class ContextNotCaptured(TurnledgerError):
    """The run exists, but its request payloads were not captured."""
