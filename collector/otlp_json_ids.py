"""OTLP/JSON's one departure from protobuf's JSON mapping, undone so the official classes parse it.

OTLP/JSON (the OTLP specification, "JSON Protobuf Encoding") writes ``traceId`` and ``spanId``
as hex, where protobuf's JSON mapping (``google.protobuf.json_format``) expects base64 for
``bytes``; everything else (lowerCamelCase names, enums as integers, 64-bit integers as
strings) the mapping already reads. So the logs and metrics decoders rewrite those two fields
to base64 in place and hand the document to ``json_format.ParseDict`` with the generated
message class: no hand-written parser of the format.
"""

from __future__ import annotations

import base64
from typing import Any

from ledger.errors import MalformedInput

__all__ = ["ID_FIELDS", "base64_ids"]

ID_FIELDS = ("traceId", "spanId")


def base64_ids(item: dict[str, Any], where: str) -> None:
    """Rewrite ``item``'s hex ``traceId``/``spanId`` as base64 (in place); MalformedInput naming a bad one."""
    for key in ID_FIELDS:
        value = item.get(key)
        if value in (None, ""):
            continue
        if not isinstance(value, str):
            raise MalformedInput(f"{where}.{key}: expected a hex string, got {type(value).__name__}")
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raise MalformedInput(f"{where}.{key}: {value[:40]!r} is not hex") from None
        item[key] = base64.b64encode(raw).decode()
