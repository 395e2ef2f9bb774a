"""The collector's budget routes: the harness's gate check, and budgets/alerts while the server owns the file.

Each route is a function of (request, a way to borrow a cursor) returning
``(status, JSON value)``; ``app`` does the HTTP (auth, body, the cursor pool). Bodies come from
``ledger.budgets.service``, the same documents ``turnledger budget`` prints when
it opens the file itself (the route table is ``ledger.budgets.routes``).

Errors: a malformed request is 400 (``BudgetError``), an unknown rule 404
(``UnknownBudget``), a sweep on a server that evaluates no budgets 409.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import duckdb

from ledger.budgets import BudgetError, Governor, UnknownBudget, check_request
from ledger.budgets.routes import ALERTS_PATH, BUDGETS_PATH, CHECK_PATH, SWEEP_PATH
from ledger.budgets.service import (
    add_budget,
    alerts_doc,
    budget_doc,
    budget_statuses,
    edit_budget,
    remove_budget,
    sweep_result,
)
from ledger.budgets.targets import TargetPolicy
from ledger.budgets.windows import Clock, system_clock
from ledger.queries import parse_time

__all__ = ["MAX_BODY", "BudgetRequest", "Connect", "handle", "matches"]

MAX_BODY = 1 << 20  # a budget request is a few hundred bytes
_MAX_SWEEP_WAIT = 30.0

Connect = Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]]
"""Borrows a cursor of the server's database for the duration of a ``with`` block."""


@dataclass(frozen=True)
class BudgetRequest:
    method: str
    parts: Sequence[str]  # the path's segments, unquoted: ["api", "budgets", "acme-daily"]
    query: Mapping[str, Sequence[str]]
    body: bytes = b""


def matches(method: str, path: str) -> bool:
    """Is ``method path`` one of the budget routes (so it needs a cursor and maybe a body)?"""
    if path == CHECK_PATH:
        return method == "POST"
    if path == ALERTS_PATH:
        return method == "GET"
    if path == BUDGETS_PATH:
        return method in ("GET", "POST")
    if path.startswith(BUDGETS_PATH + "/"):
        return method in ("GET", "DELETE", "POST")
    return False


def _one(query: Mapping[str, Sequence[str]], key: str) -> str | None:
    values = query.get(key)
    if not values:
        return None
    if len(values) != 1:
        raise BudgetError(f"parameter {key!r} given {len(values)} times; give it once")
    return values[0] if values[0] != "" else None


def _json_body(body: bytes) -> Any:
    try:
        return json.loads(body or b"null")
    except ValueError as exc:
        raise BudgetError(f"body is not JSON: {exc}") from None


def _alerts(req: BudgetRequest, cur: duckdb.DuckDBPyConnection) -> Any:
    known = {"budget", "level", "since", "limit", "deliveries"}
    unknown = set(req.query) - known
    if unknown:
        raise BudgetError(f"unknown parameter(s) {sorted(unknown)!r} (takes: {', '.join(sorted(known))})")
    since_raw, limit_raw = _one(req.query, "since"), _one(req.query, "limit")
    try:
        since = parse_time(since_raw) if since_raw else None
    except ValueError as exc:
        raise BudgetError(f"since={since_raw!r}: {exc}") from None
    try:
        limit = int(limit_raw) if limit_raw else 50
    except ValueError:
        raise BudgetError(f"limit={limit_raw!r} is not a whole number") from None
    deliveries = (_one(req.query, "deliveries") or "false").lower() in ("1", "true", "yes", "on")
    return alerts_doc(
        cur,
        budget=_one(req.query, "budget"),
        level=_one(req.query, "level"),
        since=since,
        limit=limit,
        deliveries=deliveries,
    )


def _sweep(req: BudgetRequest, connect: Connect, governor: Governor | None) -> tuple[int, Any]:
    if governor is None:
        return 409, {"error": "this collector evaluates no budgets (it was started without a governor)"}
    raw = _one(req.query, "wait") or "10"
    try:
        wait = float(raw)
    except ValueError:
        raise BudgetError(f"wait={raw!r} is not a number of seconds") from None
    if not math.isfinite(wait) or wait < 0:
        raise BudgetError(f"wait={raw!r} must be a number of seconds >= 0")
    with connect() as cur:
        events = governor.sweep(cur)
    return 200, sweep_result(governor, events, min(wait, _MAX_SWEEP_WAIT))  # no cursor held while waiting


def _route(
    req: BudgetRequest, cur: duckdb.DuckDBPyConnection, clock: Clock, policy: TargetPolicy | None
) -> tuple[int, Any]:
    path = "/" + "/".join(req.parts)
    if path == CHECK_PATH:
        return 200, check_request(cur, req.body, clock)
    if path == ALERTS_PATH:
        return 200, _alerts(req, cur)
    if path == BUDGETS_PATH:
        if req.method == "POST":
            body = _json_body(req.body)
            if not isinstance(body, Mapping):
                raise BudgetError(f"a budget must be a JSON object, got {type(body).__name__}")
            return 201, add_budget(cur, body, policy)
        return 200, budget_statuses(cur, clock)
    name = "/".join(req.parts[2:])  # a rule's name may hold "/" (sent as %2F or not)
    if req.method == "POST":
        return 200, edit_budget(cur, name, _json_body(req.body))
    if req.method == "DELETE":
        return 200, remove_budget(cur, name)
    return 200, budget_doc(cur, name, clock)


def handle(
    req: BudgetRequest,
    connect: Connect,
    *,
    governor: Governor | None = None,
    clock: Clock = system_clock,
) -> tuple[int, Any]:
    """Answer one budget route with a cursor borrowed through ``connect``."""
    try:
        if req.method == "POST" and "/" + "/".join(req.parts) == SWEEP_PATH:
            return _sweep(req, connect, governor)  # waits for webhooks without holding a cursor
        policy = governor.deliverer.policy if governor is not None else None  # webhooks added = webhooks delivered
        with connect() as cur:
            status, doc = _route(req, cur, clock, policy)
            saved = req.method == "POST" and "/" + "/".join(req.parts[:2]) == BUDGETS_PATH  # added or edited
            if governor is not None and saved and isinstance(doc, dict) and "id" in doc:
                governor.sweep(cur, rule_id=doc["id"])  # past its limit already: it alerts now, not at the sweep
            return status, doc
    except UnknownBudget as exc:
        return 404, {"error": str(exc)}
    except BudgetError as exc:
        return 400, {"error": str(exc)}
