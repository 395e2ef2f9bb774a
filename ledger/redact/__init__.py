"""Redaction: one policy applied to every string the ledger stores.

``default_policy()`` is the policy ``TURNLEDGER_REDACT*`` configures
(``ledger.settings``), which ingest applies. ``redact`` and ``redact_text`` are
for code that redacts on purpose (the harness's ``redacted`` capture): they use
the same key names and patterns, on even where ingest is told ``off``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ..settings import redact_ip_addresses, redaction_settings
from .detectors import marker
from .policy import REDACTED, Redactor

__all__ = ["REDACTED", "Redactor", "default_policy", "explicit_policy", "marker", "redact", "redact_text"]


@lru_cache(maxsize=2)
def _configured(on_anyway: bool) -> Redactor:
    enabled, keys, patterns = redaction_settings()
    return Redactor(keys, patterns, enabled=enabled or on_anyway, ip_addresses=redact_ip_addresses())


def default_policy() -> Redactor:
    """The policy the environment configures (possibly off), built once per process."""
    return _configured(False)


def explicit_policy() -> Redactor:
    """The configured key names and patterns, always on: for code that redacts on purpose."""
    return _configured(True)


def redact(value: Any) -> Any:
    """A redacted copy of a JSON-like value (dicts, lists, strings, scalars)."""
    return explicit_policy().value(value)


def redact_text(text: str) -> str:
    return explicit_policy().text(text)
