"""Is it good: task success, evaluation scores, safety violations and the review queue (the Quality page).

Definitions (every figure reads them, and ``ledger.quality`` decides ``failed``/``safety`` once, at ingest):

* a run **succeeded** when it completed (``runs.stop_cause = 'completed'``): no error, step cap,
  loop halt, budget stop, refusal or hand-off; runs still in progress (no root span yet) are left out;
* by evaluation, a run **passed** when it has judgments and none of them failed;
* a **safety violation** is a safety judgment (``evaluations.safety``) that failed;
* an evaluation's score over time is the mean of its scores per day, beside how many were judged and
  how many failed (scores of different names are on different scales: never averaged together).

Judgments are counted for the filtered runs (``fr``): a judgment of a run whose spans have not
arrived yet shows once they do.
"""

from __future__ import annotations

from .core import NO_FILTERS, Filters, Query, filtered, query

__all__ = [
    "evaluation_scores",
    "review_queue",
    "run_evaluations",
    "safety_violations",
    "task_success",
    "task_success_by_day",
]

_FINISHED = "fr.root_span_id IS NOT NULL"
_VERSION = "coalesce(fr.agent_name, '?') AS agent, coalesce(fr.agent_version, '-') AS agent_version, " \
    "coalesce(fr.prompt_version, '-') AS prompt_version"  # fmt: skip
# Per judged run: how many judgments, how many failed (the LEFT JOIN from fr keeps the filtered runs'
# only; filtering the evaluations first would cost a second join).
_JUDGED = """, judged AS (
    SELECT e.trace_id, count(*) AS judgments, count(*) FILTER (WHERE e.failed) AS failed,
           count(*) FILTER (WHERE e.safety AND e.failed) AS violations
    FROM evaluations e GROUP BY e.trace_id
)"""


@query
def task_success(f: Filters = NO_FILTERS) -> Query:
    """Per agent, agent version and prompt version: runs, completed, success rate, and by evaluation where present."""
    w, p = filtered(f)
    return Query(
        w
        + _JUDGED
        + f"""
SELECT {_VERSION}, count(*) AS runs, count(*) FILTER (WHERE fr.stop_cause = 'completed') AS completed,
       count(*) FILTER (WHERE fr.stop_cause = 'completed') / count(*) AS success_rate,
       count(j.trace_id) AS judged_runs, count(*) FILTER (WHERE j.failed = 0) AS passed_runs,
       count(*) FILTER (WHERE j.failed = 0) / nullif(count(j.trace_id), 0) AS eval_pass_rate,
       coalesce(sum(j.violations), 0)::BIGINT AS safety_violations
FROM fr LEFT JOIN judged j USING (trace_id)
WHERE {_FINISHED}
GROUP BY ALL ORDER BY runs DESC, agent, agent_version, prompt_version""",
        p,
    )


@query
def task_success_by_day(f: Filters = NO_FILTERS) -> Query:
    """Per day and agent/prompt version: runs and the share that completed."""
    w, p = filtered(f)
    return Query(
        w
        + f"""SELECT date_trunc('day', fr.started_at)::DATE AS day,
       coalesce(fr.agent_version, '-') || ' / ' || coalesce(fr.prompt_version, '-') AS version,
       count(*) AS runs, count(*) FILTER (WHERE fr.stop_cause = 'completed') / count(*) AS success_rate
FROM fr WHERE {_FINISHED} GROUP BY ALL ORDER BY day, version""",
        p,
    )


@query
def evaluation_scores(f: Filters = NO_FILTERS) -> Query:
    """Per evaluation name, day and agent/prompt version: judgments, mean score, failed and fail rate."""
    w, p = filtered(f)
    return Query(
        w
        + """SELECT e.name, e.kind, date_trunc('day', e.time)::DATE AS day,
       coalesce(fr.agent_version, '-') || ' / ' || coalesce(fr.prompt_version, '-') AS version,
       count(*) AS judgments, avg(e.score) AS mean_score, count(*) FILTER (WHERE e.failed) AS failed,
       count(*) FILTER (WHERE e.failed) / count(*) AS fail_rate
FROM evaluations e JOIN fr USING (trace_id)
GROUP BY ALL ORDER BY e.name, day, version""",
        p,
    )


@query
def safety_violations(f: Filters = NO_FILTERS, limit: int = 200) -> Query:
    """Failed safety judgments, newest first, with their run's agent and prompt version."""
    w, p = filtered(f)
    return Query(
        w
        + f"""SELECT e.time, e.trace_id, e.span_id, e.name, e.score, e.label, e.explanation, e.source, {_VERSION}
FROM evaluations e JOIN fr USING (trace_id)
WHERE e.safety AND e.failed ORDER BY e.time DESC, e.eval_id LIMIT ?""",
        [*p, limit],
    )


@query
def run_evaluations(trace_id: str) -> Query:
    """Every judgment of one run (feedback and evaluations), in time order."""
    return Query(
        """SELECT time, kind, name, score, label, failed, safety, source, span_id, explanation, tags, eval_id
FROM evaluations WHERE trace_id = ? ORDER BY time, eval_id""",
        [trace_id],
    )


@query
def review_queue(f: Filters = NO_FILTERS, status: str | None = "open", limit: int = 500) -> Query:
    """Review items of the filtered runs (``status`` open/closed, or None for both), newest first.

    An item whose run has no spans yet (feedback, or a hand-queued trace id, ahead of its
    spans) has nothing a filter could match, so it is listed whatever the filters: hiding it
    would lose the complaint until the spans arrive."""
    w, p = filtered(f)
    return Query(
        w
        + f"""SELECT q.trace_id, q.reason, q.entered_at, q.status, q.tags, q.note, q.reviewer, q.closed_at,
       {_VERSION}, CASE WHEN fr.trace_id IS NULL THEN 'spans not received yet' ELSE fr.stop_cause END AS stop_cause, fr.usd_total, fr.started_at
FROM review_items q LEFT JOIN fr ON fr.trace_id = q.trace_id
WHERE (fr.trace_id IS NOT NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.trace_id = q.trace_id))
  AND (?::VARCHAR IS NULL OR q.status = ?)
ORDER BY q.entered_at DESC, q.trace_id LIMIT ?""",
        [*p, status, status, limit],
    )
