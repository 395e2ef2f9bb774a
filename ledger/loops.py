"""Loops seen in a run's spans, for agents that report no guard events of their own.

Our harness's guard (``collector.harness.loop_guard``) reports its trips as events; most agents
report nothing, so their runs' tool spans are read instead, with seed 004's definitions:

* **repeat**: the same tool called again with canonically equal arguments right after itself
  ("the same tool with identical arguments twice is a stuck agent": one repeat is a trip);
* **cycle**: a call made again with equal arguments after other calls in between (A, B, A);
* **stall**: more than ``STALL_ALLOWED`` tool calls in a row, all different, each ending in an error
  or a soft failure: the agent keeps trying and learns nothing (the harness's stall allowance).

Each repeated call (tool and arguments) is one trip; its shape is read at the call's second
occurrence, and it is placed at its last (the span and its end time): nobody stopped the agent, so the
loop lasted until then, and the Guards page's loop window (spend inside the loop, repeated calls)
reaches that far, as it reaches a harness's halt. A stall is one trip at its last call. The trips are ``guard_events`` rows with action ``detected`` (the
harness's are ``nudge`` or ``halt``), so every count, page, alert and ``context`` reads them as it
reads reported trips, and says which is which. They are rebuilt with the run (``ledger.runs``),
only for runs that reported no loop trip themselves: a reported run is never counted twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from typing import Any

from . import conventions as c

__all__ = ["DETECTED", "REBUILD_NEEDED", "STALL_ALLOWED", "call_fingerprint", "fingerprint", "rebuild_detected_sql"]

DETECTED = "detected"  # the action of a trip turnledger saw in the spans (the agent did nothing about it)
STALL_ALLOWED = 6  # failed, all-different tool calls in a row before a stall (LoopGuard's default)


def fingerprint(value: Any) -> str:
    """Short, key-order-insensitive hash: {"a":1,"b":2} and {"b":2,"a":1} are the same call."""
    blob = json.dumps(value, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def call_fingerprint(tool: str | None, arguments: Any) -> str | None:
    """A tool call's identity for loop detection: its tool and its arguments as JSON values (a
    producer sends them as a JSON string, or as an attribute map), so formatting and key order do
    not make two equal calls differ. None for a span that is not a tool call, or whose arguments were
    not recorded: calls nobody can compare are never a repeat."""
    if tool is None or arguments is None:
        return None
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):  # not JSON: the text itself is the argument
            arguments = json.loads(arguments)
    return fingerprint([tool, arguments])


# Rebuilds the detected trips of the touched traces (``_touched``; ``$since`` bounds the spans read,
# as in the runs rebuild). Tool calls are numbered in start order; a call whose fingerprint was seen
# before trips once per fingerprint: ``repeat`` if its second occurrence came right after the first,
# else ``cycle``, placed at its last occurrence. Stalls are islands of failed calls with no repeat among them.
_TOOL_CALLS = """
    SELECT s.trace_id, s.span_id, s.start_time, s.end_time, s.tool, s.call_fingerprint AS fp,
           s.status_code = 'ERROR' OR coalesce(s.soft_failure, FALSE) AS failed
    FROM spans s JOIN (SELECT DISTINCT trace_id FROM _touched) t USING (trace_id)
    WHERE s.operation = 'execute_tool' AND s.call_fingerprint IS NOT NULL AND s.start_time >= $since
"""
# The numbering and windows below are only worth computing for a trace that can hold a trip: one
# with a call made twice, or with more failed calls than a stall allows (most runs have neither).
_MAY_LOOP = f"""
    SELECT trace_id FROM tool_calls GROUP BY trace_id
    HAVING count(*) > count(DISTINCT fp) OR count(*) FILTER (WHERE failed) > {STALL_ALLOWED}
"""
_DETECT = f"""
WITH tool_calls AS ({_TOOL_CALLS}),
may_loop AS ({_MAY_LOOP}),
calls AS (
    SELECT tc.trace_id, tc.span_id, tc.end_time, tc.tool, tc.fp, tc.failed,
           row_number() OVER (PARTITION BY tc.trace_id ORDER BY tc.start_time, tc.span_id) AS n
    FROM tool_calls tc JOIN may_loop USING (trace_id)
    WHERE NOT EXISTS (SELECT 1 FROM guard_events g WHERE g.trace_id = tc.trace_id
                      AND g.name = '{c.EVENT_LOOP_TRIP}' AND g.action IS DISTINCT FROM '{DETECTED}')
),
seen AS (
    SELECT *, row_number() OVER (PARTITION BY trace_id, fp ORDER BY n) AS k,
           lag(n) OVER (PARTITION BY trace_id, fp ORDER BY n) AS previous_n,
           count(*) OVER (PARTITION BY trace_id, fp) AS times,
           arg_max(span_id, n) OVER (PARTITION BY trace_id, fp) AS last_span_id,
           max(end_time) OVER (PARTITION BY trace_id, fp) AS last_end
    FROM calls
),
repeats AS (
    SELECT trace_id, last_span_id AS span_id, last_end AS end_time, tool, CASE WHEN n = previous_n + 1 THEN 'repeat' ELSE 'cycle' END AS shape,
           times
    FROM seen WHERE k = 2
),
islands AS (  -- a stall's calls: consecutive failed first occurrences
    SELECT *, n - row_number() OVER (PARTITION BY trace_id ORDER BY n) AS island
    FROM seen WHERE failed AND k = 1 AND times = 1
),
stalls AS (
    SELECT trace_id, arg_max(span_id, n) AS span_id, max(end_time) AS end_time, arg_max(tool, n) AS tool,
           'stall' AS shape, count(*) AS times
    FROM islands GROUP BY trace_id, island HAVING count(*) > {STALL_ALLOWED}
)
SELECT trace_id, span_id, -1 AS seq, '{c.EVENT_LOOP_TRIP}' AS name, end_time AS time, shape,
       '{DETECTED}' AS action, tool, NULL AS cause, json_object('calls', times) AS attributes
FROM (SELECT * FROM repeats UNION ALL SELECT * FROM stalls)
"""


# Whether the rebuild below can change anything: a touched trace may hold a trip, or held a detected
# one (else it deletes and inserts nothing, as in most commits, and costs a commit two statements).
REBUILD_NEEDED = f"""(
    EXISTS (WITH tool_calls AS ({_TOOL_CALLS}) {_MAY_LOOP})
    OR EXISTS (SELECT 1 FROM guard_events WHERE action = '{DETECTED}' AND trace_id IN (SELECT trace_id FROM _touched))
)"""


def rebuild_detected_sql() -> tuple[str, str]:
    """The two statements that rebuild the touched traces' detected trips: delete, then insert.
    ``seq`` -1: a span's reported events are numbered from 0, so a detected row never takes their key."""
    delete = f"DELETE FROM guard_events WHERE action = '{DETECTED}' AND trace_id IN (SELECT trace_id FROM _touched)"
    insert = "INSERT INTO guard_events (trace_id, span_id, seq, name, time, shape, action, tool, cause, attributes) "
    return delete, insert + _DETECT
