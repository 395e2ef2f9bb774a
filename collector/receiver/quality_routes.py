"""Feedback, the review queue and cases on the collector (issue #15).

``POST /v1/feedback`` is authorized like ingest and committed through the single writer like
spans (``ledger.rows.judgment_batch``): a 200 means stored; the same client ``id`` twice is one
row (200 both times). The review routes change ``review_items`` on a cursor of the server's
database, as the budget routes do; every document is ``ledger.quality.review``'s, the same the CLI prints
on the file. A bad request is 400 naming the field, a run not queued 404.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import duckdb

from ledger.errors import InputError, NotFound
from ledger.quality import CASES_PATH, FEEDBACK_PATH, REVIEW_PATH, cases, feedback_judgment, policy, review
from ledger.redact import default_policy
from ledger.rows import judgment_batch

from .readers import ReaderBusy
from .writer import QueueFull, RequestRejected, WriterUnavailable

if TYPE_CHECKING:
    from .routes import Reply
    from .server import CollectorServer

__all__ = ["ENDPOINTS", "MAX_BODY", "handle", "matches"]

log = logging.getLogger("turnledger.server")

MAX_BODY = 64 * 1024  # a judgment is a few hundred bytes; a comment at most 8 KiB

ENDPOINTS = {
    f"POST {FEEDBACK_PATH}": "feedback on a run (JSON: trace_id, score, label?, span_id?, tags?, comment?, source?, "
    "name?, id? for an idempotent retry)",
    f"GET {REVIEW_PATH}": "the review queue (?status=open|closed&tag=&limit=)",
    f"POST {REVIEW_PATH}": "queue a run by hand (JSON: trace_id, note?)",
    f"POST {REVIEW_PATH}/{{trace_id}}/tag": "tag a queued run (JSON: tags, note?, reviewer?)",
    f"POST {REVIEW_PATH}/{{trace_id}}/close": "close a queued run (JSON: reviewer?)",
    f"GET {CASES_PATH}": "tagged runs as cases: the failing turn's request and response (?tag=)",
}


def matches(method: str, path: str) -> bool:
    if path == FEEDBACK_PATH:
        return method == "POST"
    if path in (REVIEW_PATH, CASES_PATH):
        return method in ("GET", "POST") if path == REVIEW_PATH else method == "GET"
    return method == "POST" and path.startswith(REVIEW_PATH + "/")


def _body(body: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(body or b"{}")
    except (ValueError, RecursionError) as exc:
        raise InputError(f"the body is not JSON: {str(exc)[:120]}") from None
    if not isinstance(doc, dict):
        raise InputError("give a JSON object")
    return doc


def _one(query: Mapping[str, Sequence[str]], key: str) -> str | None:
    values = query.get(key) or [""]
    if len(values) != 1:
        raise InputError(f"parameter {key!r} given {len(values)} times; give it once")
    return values[0] or None


def _optional_text(doc: Mapping[str, Any], key: str) -> str | None:
    value = doc.get(key)
    if value is not None and not isinstance(value, str):
        raise InputError(f"{key}: give a string, not {type(value).__name__}")
    return value


def handle(
    c: CollectorServer, method: str, parts: Sequence[str], query: Mapping[str, Sequence[str]], body: bytes
) -> Reply:
    from .routes import error_reply, json_reply

    try:
        status, doc = _route(c, method, parts, query, body)
    except InputError as exc:
        return error_reply(400, str(exc))
    except NotFound as exc:
        return error_reply(404, str(exc))
    except (ReaderBusy, QueueFull, WriterUnavailable, TimeoutError) as exc:
        return error_reply(503, str(exc), {"Retry-After": "1"})
    except RequestRejected as exc:
        return error_reply(400, str(exc))
    except duckdb.TransactionException as exc:  # a reviewer's change met the writer's on the same item
        return error_reply(503, f"the review queue changed meanwhile, retry: {exc}", {"Retry-After": "1"})
    return json_reply(status, doc)


def _route(
    c: CollectorServer, method: str, parts: Sequence[str], query: Mapping[str, Sequence[str]], body: bytes
) -> tuple[int, Any]:
    path = "/" + "/".join(parts)
    if path == FEEDBACK_PATH:
        return 200, _feedback(c, body)
    with c.readers.connection() as cur:
        if path == CASES_PATH:
            return 200, list(cases.cases(cur, _one(query, "tag")))
        if path == REVIEW_PATH and method == "GET":
            limit = _one(query, "limit") or "200"
            if not limit.isdigit():
                raise InputError(f"limit {limit!r}: give a whole number")
            return 200, review.items(cur, status=_one(query, "status"), tag=_one(query, "tag"), limit=int(limit))
        doc = _body(body)
        if path == REVIEW_PATH:
            trace = doc.get("trace_id")
            if not isinstance(trace, str):
                raise InputError("trace_id: required (a string of 32 hex digits)")
            return 200, review.add(cur, trace, note=_optional_text(doc, "note"))
        if len(parts) == 4 and parts[3] == "tag":
            tags = doc.get("tags")
            if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
                raise InputError("tags: give a list of tag names")
            note, reviewer = _optional_text(doc, "note"), _optional_text(doc, "reviewer")
            return 200, review.tag(cur, parts[2], tags, note=note, reviewer=reviewer)
        if len(parts) == 4 and parts[3] == "close":
            return 200, review.close(cur, parts[2], reviewer=_optional_text(doc, "reviewer"))
    raise NotFound(f"no endpoint {method} {path}; see GET /")


def _feedback(c: CollectorServer, body: bytes) -> dict[str, Any]:
    redactor = default_policy() if c.config.redact_content else None
    judgment = feedback_judgment(_body(body), redactor)
    ticket = c.writer.submit_prepared(judgment_batch([judgment]))
    ticket.wait(c.config.ack_timeout_s)
    doc = {
        "id": judgment.eval_id.removeprefix("feedback:"),
        "trace_id": judgment.trace_id,
        "span_id": judgment.span_id,
        "failed": policy().failed(judgment.kind, judgment.name, judgment.score, judgment.label),
        "safety": policy().safety(judgment.name, judgment.tags),
    }
    with c.readers.connection() as cur:
        if unseen := review.unseen_run(cur, judgment.trace_id):
            doc["warning"] = unseen
    return doc
