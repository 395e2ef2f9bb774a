"""What a span may hold: the bounds every producer's input is checked against at the door.

A value outside them is never stored as a guess: the span is rejected on its
own (OTLP partial success names it and the field), or, where the rest of the
span is useful, its charge is flagged. The bounds are far beyond any real
agent's spans and far below what would overflow a column or a stack.
"""

from __future__ import annotations

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "MAX_ATTEMPT",
    "MAX_ATTRIBUTES",
    "MAX_ATTRIBUTE_DEPTH",
    "MAX_EVENTS",
    "MAX_REQUEST_VALUES",
    "MAX_SPAN_BYTES",
    "MAX_SPAN_VALUES",
    "MAX_TIME_NS",
    "MAX_TOKENS",
    "MIN_TIME_NS",
]

MAX_TOKENS = 10**9  # tokens in one call's term: a 1M-token context is 10^6
MIN_TIME_NS = 1  # after the Unix epoch (0 is "unset" in OTLP)
MAX_TIME_NS = 2**62  # year 2116: leaves room in TIMESTAMP_NS (int64) for durations and sums
MAX_ATTRIBUTE_DEPTH = 32  # nested arrays / key-value lists inside one attribute value
MAX_ATTRIBUTES = 4096  # attributes on one span, one event or one resource
MAX_EVENTS = 4096  # events on one span
# Memory: a decoded attribute value costs ~0.3-1 KB of Python objects and rows however few
# bytes it took on the wire (~10), so counts, not only bytes, bound what a request can make
# the collector hold. A "value" is one attribute (of a span, event or resource) or one element
# nested in an array / key-value list. Real GenAI spans carry 10-60; the OTel SDK's default
# limits allow 128 attributes on a span and on each of its events.
MAX_SPAN_VALUES = 16_384  # values in one span, its events' included; past it the span alone is rejected
MAX_REQUEST_VALUES = 262_144  # values in one request (every span and resource); past it the request is 413
MAX_SPAN_BYTES = 16 * 1024 * 1024  # one span's encoded size; past it the span alone is rejected
MAX_ATTEMPT = 2**31 - 1  # the charges.attempt INTEGER column; past it (or unreadable) the attempt reads as 1
# OTLP's intValue is an int64. An attribute integer outside it (JSON can spell one,
# Python can set one) is kept as its decimal text, so it is stored, never overflowed.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
