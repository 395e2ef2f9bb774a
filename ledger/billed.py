"""Which billed call a model-call span reports: one charge per billed call, whoever reports it.

The anthropic 2.x SDK traces itself, so an agent that also runs a GenAI
instrumentation reports every billed call twice: two model-call spans, nested
or side by side, sometimes in different traces, arriving in any order. Each
model-call span becomes one ``call_copies`` row (built here, with no
connection); ``ledger.dedup`` groups the copies at write time and charges one.

A copy's **billed-call key** is, in order of preference:

* ``response:<id>``: the provider's response id (``gen_ai.response.id``; for
  OpenInference, the ``id`` inside ``output.value``);
* ``request:<id>``: the API's request id (``anthropic.request.id``, which the
  SDK also records on a failed attempt that got an HTTP response);
* ``span:<trace>/<span>``: the span itself, when it reports no id.

Copies with one key whose times overlap are one billed call (copies time the
same HTTP exchange, so they always overlap; a reused id far apart in time, as
replayed fixtures give, stays two calls). A copy nested directly under another
model-call span of the same model, with overlapping times, reports the same call
unless both carry different response ids: ``ledger.dedup`` gives the pair one
key (the most specific: response, then request, then span). Retries are not
copies: each attempt has its own response id, its own request id or its own
span.

**Which copy is charged**: the one with the most complete usage (most usage
terms reported, ``normalize.ModelCall.usage_terms``: a cache-write TTL split counts
as one more), then the smallest instrumentation scope name, then trace id,
then span id. Deterministic, so every arrival order ends with the same charge;
on the anthropic SDK's spans (scope ``com.anthropic.sdk.python``, which sorts
first and reports every term) that is the SDK's own copy unless an
instrumentation reports more.
"""

from __future__ import annotations

from .normalize import ModelCall, response_ids
from .spans import SpanRecord
from .tables import table

__all__ = ["KEY_KINDS", "call_copy_row", "key_of"]

# Key prefixes, most specific first: when nesting joins two keys, the first kind wins.
KEY_KINDS = ("response:", "request:", "span:")

_COPY_ROW = table("call_copies").compile_row(
    "s, key, call",
    {
        "trace_id": "s.trace_id", "span_id": "s.span_id", "parent_span_id": "s.parent_span_id",
        "billed_call": "key", "model": "call.model", "start_time": "s.start_ns", "end_time": "s.end_ns",
        "usage_terms": "call.usage_terms", "scope_name": "s.scope_name", "duplicate_of_trace": "None",
        "duplicate_of": "None",
    },
)  # fmt: skip


def key_of(span: SpanRecord) -> str:
    """The billed-call key this span reports by itself (before nesting joins it to its neighbours)."""
    response, request = response_ids(span)
    if response:
        return f"{KEY_KINDS[0]}{response}"
    if request:
        return f"{KEY_KINDS[1]}{request}"
    return f"{KEY_KINDS[2]}{span.trace_id}/{span.span_id}"


def call_copy_row(span: SpanRecord, call: ModelCall) -> tuple[object, ...]:
    """The ``call_copies`` row of one model-call span (not yet a duplicate of anything)."""
    return _COPY_ROW(span, key_of(span), call)
