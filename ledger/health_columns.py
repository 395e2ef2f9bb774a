"""Health facts of a span decided once, at ingest (migration 15), instead of parsed from span JSON on every read.

* ``spans.tool``: the tool an ``execute_tool`` span ran (``execute_tool {tool}`` in its
  name, else its ``gen_ai.tool.name``, else its name); NULL on every other span;
* ``spans.soft_failure``: the tool ran and said "nothing found"
  (``turnledger.tool.soft_failure`` true, status left UNSET by the harness), or, from any agent,
  its ``gen_ai.tool.call.result`` reads as a failure (:func:`soft_failure_pattern`);
* ``spans.call_fingerprint``: a tool call's tool and canonical arguments (``ledger.loops``),
  so a run's repeated calls are found by equality (migration 25);
* ``runs.error_spans``: how many of the run's spans have ERROR status (the
  ``ledger.runs`` rollup counts it; an errored run is one with any);
* ``charges.ttft_ms``: a streamed chat call's time to first token
  (``gen_ai.response.time_to_first_chunk``, seconds) in ms; NULL when not reported
  or not a number (the page used to cast it when read, and a string failed the query).

Each is read from the span as stored (redacted), the way the queries read it
before; :data:`BACKFILL` is the same definition in SQL, for the rows a ledger
held before migration 15 (and for writers that insert rows without ``ledger.rows``).
No DuckDB import: the decoder processes build rows with this.
"""

from __future__ import annotations

import math
import re
from typing import Any

from . import conventions as c
from .loops import call_fingerprint
from .settings import soft_failure_pattern
from .spans import SpanRecord

__all__ = ["BACKFILL", "SOFT_FAILURE", "soft_failed", "time_to_first_token_ms", "tool_fingerprint", "tool_of"]

_TOOL_PREFIX = "execute_tool "
# A tool span that ran and found nothing, as SQL over a spans row aliased ``s`` (NULL: a row
# inserted around ``ledger.rows`` before its backfill).
SOFT_FAILURE = "coalesce(s.soft_failure, FALSE)"


def _text(value: Any) -> str | None:
    """A JSON value as ``json_extract_string`` reads it: strings as they are, the rest as JSON text."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, int | float) else None


def tool_of(span: SpanRecord, operation: str | None) -> str | None:
    if operation != "execute_tool":
        return None
    if span.name.startswith(_TOOL_PREFIX):
        return span.name[len(_TOOL_PREFIX) :]
    return _text(span.attributes.get(c.TOOL_NAME)) or span.name


def soft_failed(span: SpanRecord, operation: str | None) -> bool:
    flag = span.attributes.get(c.TOOL_SOFT_FAILURE)
    if flag is True or flag == "true":
        return True
    result = span.attributes.get(c.TOOL_CALL_RESULT) if operation == "execute_tool" else None
    return isinstance(result, str) and _SOFT_RESULT.search(result) is not None


def tool_fingerprint(span: SpanRecord, operation: str | None) -> str | None:
    return call_fingerprint(tool_of(span, operation), span.attributes.get(c.TOOL_CALL_ARGUMENTS))


def time_to_first_token_ms(span: SpanRecord, operation: str | None) -> float | None:
    seconds = span.attributes.get(c.TIME_TO_FIRST_CHUNK)
    if operation != "chat" or isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return None
    try:
        ms = float(seconds) * 1000
    except OverflowError:  # an int past a double: no time anyone measured
        return None
    return ms if math.isfinite(ms) else None


# Python's re and DuckDB's RE2 read the pattern alike (no look-around, no back-references).
_SOFT_RESULT = re.compile(soft_failure_pattern())
_SOFT_JSON = (
    f"""coalesce(contains(attributes, '"{c.TOOL_SOFT_FAILURE}":') """
    f"""AND json_extract_string(attributes, '$."{c.TOOL_SOFT_FAILURE}"') = 'true', FALSE)"""
    f""" OR (operation = 'execute_tool' AND coalesce(regexp_matches(json_extract_string(attributes, """
    f"""'$."{c.TOOL_CALL_RESULT}"'), '{soft_failure_pattern().replace("'", "''")}'), FALSE))"""
)
BACKFILL: tuple[str, ...] = (
    f"""UPDATE spans SET tool = CASE WHEN starts_with(name, '{_TOOL_PREFIX}') THEN substr(name, {len(_TOOL_PREFIX) + 1})
        ELSE coalesce(json_extract_string(attributes, '$."{c.TOOL_NAME}"'), name) END
    WHERE operation = 'execute_tool' AND tool IS NULL""",
    f"UPDATE spans SET soft_failure = TRUE WHERE NOT soft_failure AND {_SOFT_JSON}",
    f"""UPDATE charges SET ttft_ms = t.ms FROM (
        SELECT trace_id, span_id, json_extract(attributes, '$."{c.TIME_TO_FIRST_CHUNK}"') AS v,
               CASE WHEN json_type(v) IN ('DOUBLE', 'BIGINT', 'UBIGINT') THEN v::DOUBLE * 1000 END AS ms
        FROM spans WHERE operation = 'chat' AND contains(attributes, '"{c.TIME_TO_FIRST_CHUNK}":')
    ) t WHERE charges.trace_id = t.trace_id AND charges.span_id = t.span_id AND charges.ttft_ms IS NULL""",
    """UPDATE runs SET error_spans = e.n FROM (
        SELECT trace_id, count(*) AS n FROM spans WHERE status_code = 'ERROR' GROUP BY trace_id
    ) e WHERE runs.trace_id = e.trace_id""",
)
