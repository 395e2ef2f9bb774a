"""Redaction applied to captured content before it is stored or exported.

Two nets: by field name (a value under ``api_key`` is replaced whatever it looks
like) and by pattern inside any string (keys, bearer tokens, emails, card numbers),
because secrets arrive inside free text and tool arguments as often as in fields.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["REDACTED", "redact", "redact_text"]

REDACTED = "[REDACTED]"

SECRET_FIELDS = frozenset(
    {
        "api_key", "apikey", "x-api-key", "authorization", "password", "passwd", "secret",
        "client_secret", "access_token", "refresh_token", "token", "private_key", "card_number",
        "credit_card", "cvv", "ssn",
    }
)  # fmt: skip

# (substrings that must all be absent for the pattern to be skipped, pattern, replacement).
# The substring pre-checks run at C speed and spare most strings every regex scan:
# redaction runs on every captured block and free-text attribute at ingest.
_PATTERNS = [
    (("k-",), re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{16,}"), "[REDACTED:key]"),  # sk-ant-…, sk-proj-…
    (("AKIA",), re.compile(r"\bAKIA[0-9A-Z]{16}\b"), "[REDACTED:key]"),
    (
        ("ghp", "gho", "ghs", "github_pat", "xox"),
        re.compile(r"\b(?:ghp|gho|ghs|github_pat|xox[abpr])[-_][A-Za-z0-9_\-]{10,}"),
        "[REDACTED:key]",
    ),
    (("earer", "EARER"), re.compile(r"\bBearer\s+[A-Za-z0-9._~+/\-]{12,}=*", re.IGNORECASE), "Bearer [REDACTED:token]"),
    (("eyJ",), re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"), "[REDACTED:jwt]"),
    (("@",), re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}"), "[REDACTED:email]"),
]

# Payment cards: 13–19 digits, contiguous or in groups of four joined by one
# consistent separator, and passing the Luhn checksum (so ids and timestamps
# of the same length are left alone).
_CARD = re.compile(r"(?<!\d)(?:\d{13,19}|\d{4}([ \-])\d{4}\1\d{4}\1\d{1,7})(?!\d)")


# Every card number has four digits in a row; finding "####" in a digits-to-#
# translation of the bytes is a C-speed check that spares most strings the card regex.
_DIGIT_MARKS = bytes.maketrans(b"0123456789", b"##########")


def _may_hold_card(text: str) -> bool:
    return b"####" in text.encode("utf-8", "surrogatepass").translate(_DIGIT_MARKS)


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group(0))
    return "[REDACTED:card]" if 13 <= len(digits) <= 19 and _luhn_ok(digits) else match.group(0)


def redact_text(text: str) -> str:
    for needles, pattern, replacement in _PATTERNS:
        for needle in needles:
            if needle in text:
                text = pattern.sub(replacement, text)
                break
    return _CARD.sub(_card, text) if _may_hold_card(text) else text


def redact(value: Any) -> Any:
    """A redacted copy of a JSON-like value (dicts, lists, strings, scalars)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {
            k: (REDACTED if isinstance(k, str) and k.lower() in SECRET_FIELDS and v not in (None, "") else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value
