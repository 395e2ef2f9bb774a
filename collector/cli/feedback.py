"""``turnledger feedback TRACE --score S``: a user's judgment of a run, sent like ``POST /v1/feedback``.

Through a running collector (``--server``/TURNLEDGER_SERVER) it goes to ``POST /v1/feedback``;
on the file it is validated, redacted and written the same way (``ledger.quality``). Negative
feedback (a score at or below 0, or a label such as thumbs_down) puts the run in the review queue.
"""

from __future__ import annotations

import argparse
import sys

from .args import add_source

__all__ = ["add_feedback", "cmd_feedback"]


def add_feedback(p: argparse.ArgumentParser) -> None:
    """Attach feedback (a score, a label, a comment) to a run by its trace id."""
    p.add_argument("trace", metavar="TRACE_ID")
    p.add_argument("--score", type=float, default=None, help="e.g. 1 / 0 (or -1..1); 0 and below is negative")
    p.add_argument("--label", default=None, help="e.g. thumbs_up, thumbs_down")
    p.add_argument("--comment", default=None, help="free text (redacted like any stored string)")
    p.add_argument("--span", default=None, metavar="SPAN_ID", help="the span judged (default: the whole run)")
    p.add_argument("--tag", action="append", default=[], dest="tags", help="a tag (repeat)")
    p.add_argument("--source", default=None, help="who judged (default: user)")
    p.add_argument("--name", default=None, help="the feedback's name (default: user_feedback)")
    p.add_argument("--id", default=None, help="an id that makes a retry idempotent (the same id is stored once)")
    add_source(p, read_only=False)


def cmd_feedback(a: argparse.Namespace) -> int:
    from collector.client import ServerClient
    from ledger.quality import feedback_judgment, review
    from ledger.redact import default_policy
    from ledger.rows import judgment_batch
    from ledger.write import write

    from .review import print_json, target

    fields = ("id", "score", "label", "comment", "source", "name")
    doc = {"trace_id": a.trace, "span_id": a.span, "tags": a.tags or None, **{f: getattr(a, f) for f in fields}}
    doc = {key: value for key, value in doc.items() if value is not None}
    with target(a) as where:
        if isinstance(where, ServerClient):
            answer = where.feedback(doc)
        else:
            judgment = feedback_judgment(doc, default_policy())
            write(where, [judgment_batch([judgment])])
            answer = {"id": judgment.eval_id.removeprefix("feedback:"), "trace_id": judgment.trace_id}
            if unseen := review.unseen_run(where, judgment.trace_id):
                answer["warning"] = unseen
    print_json(answer)
    if "warning" in answer:
        print(f"warning: {answer['warning']}", file=sys.stderr)
    return 0
