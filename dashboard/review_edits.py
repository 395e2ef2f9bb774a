"""Review items changed from the Review page: tag (with a note) and close.

The same operations as ``turnledger review tag|close``, on the path the page reads from: through
the server's review routes when the dashboard reads through one, else on the ledger file
(``ledger.quality.review``), the way the Budgets page changes rules (``dashboard.budget_edits``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ledger.quality import review

from .budget_edits import _client, _done, _on_file

__all__ = ["close", "tag"]


def tag(trace_id: str, tags: Sequence[str], *, note: str | None, reviewer: str | None) -> dict[str, Any]:
    client = _client()
    if client:
        return _done(client.review_tag(trace_id, list(tags), note=note, reviewer=reviewer))
    return _done(_on_file(lambda con: review.tag(con, trace_id, tags, note=note, reviewer=reviewer)))


def close(trace_id: str, *, reviewer: str | None) -> dict[str, Any]:
    client = _client()
    if client:
        return _done(client.review_close(trace_id, reviewer=reviewer))
    return _done(_on_file(lambda con: review.close(con, trace_id, reviewer=reviewer)))
