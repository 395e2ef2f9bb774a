"""``ServerClient``: the one client of a running ``turnledger serve``'s API.

The dashboard, the CLI (``turnledger budget`` / ``alerts`` while the server
holds the ledger file) and the harness's budget gate all talk to the server
through it: named queries, captured contexts, health, budgets, alerts and the
gate's check.

``client.query(name, **params)`` returns the same DataFrame that
``ledger.queries.run(con, QUERIES[name](...))`` returns on the file itself
(same columns, dtypes and values): the Arrow stream is converted to pandas by
DuckDB, exactly as ``run`` does, so callers can switch between the two freely.
The budget methods return the documents of :mod:`ledger.budgets.service`, the
same ones the CLI builds on the file.

Every request goes through :meth:`ServerClient.request`, and every failure
comes out as one kind of :mod:`ledger.errors`: 400 an ``InputError``
(``BudgetError`` on the budget routes), 404 a ``NotFound`` (``UnknownBudget``),
429/503 ``Unavailable``, anything else — a wrong token, a 500, no server at
all — a ``ServerError`` that says what to do.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from ledger import queries as q
from ledger import settings
from ledger.budgets.routes import ALERTS_PATH, BUDGETS_PATH, CHECK_PATH, SWEEP_PATH, budget_path
from ledger.budgets.rules import BudgetError, UnknownBudget
from ledger.errors import InputError, NotFound, ServerError, TurnledgerError, Unavailable
from ledger.quality import CASES_PATH, FEEDBACK_PATH, REVIEW_PATH
from ledger.queries import Filters

if TYPE_CHECKING:
    from collections.abc import Callable

    import duckdb
    import pandas as pd
    import pyarrow as pa

    from ledger.budgets.gate import CallScope
    from ledger.content import CapturedTurn
    from ledger.sources import Source, SourceSpec

__all__ = ["ServerClient", "ServerSource", "make_source"]


@dataclass(frozen=True)
class _Route:
    """How a family of routes names a bad request (400) and a missing thing (404)."""

    invalid: type[InputError]
    missing: type[NotFound]


_READS = _Route(InputError, NotFound)
_BUDGETS = _Route(BudgetError, UnknownBudget)


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return str(value)


def _flatten(params: dict[str, Any]) -> dict[str, str]:
    """Query-string pairs; a ``Filters`` value (any keyword) is spread into its set fields."""
    out: dict[str, str] = {}
    for key, value in params.items():
        if isinstance(value, Filters):
            out.update(value.to_params())
        elif value is not None:
            out[key] = _param(value)
    return out


def _message(body: bytes, reason: str) -> str:
    """The server's ``{"error": ...}``, or the start of whatever it sent."""
    try:
        return str(json.loads(body)["error"])
    except (ValueError, KeyError, TypeError):
        return body.decode(errors="replace")[:500] or reason


class ServerClient:
    """The API of the collector at ``base_url`` (token default: ``$TURNLEDGER_TOKEN``)."""

    def __init__(self, base_url: str, token: str | None = None, *, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token if token is not None else settings.token()
        self.timeout = timeout
        self._local = threading.local()

    # --- the one request ------------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        accept: str = "application/json",
        timeout: float | None = None,
        what: str | None = None,
        route: _Route = _READS,
    ) -> bytes:
        """The response body of ``method path``; any failure raised as a :mod:`ledger.errors` kind.

        ``what`` prefixes the message (``"query 'cost_per_run'"``); ``route`` picks the
        error types for 400 and 404.
        """
        qs = urlencode(_flatten(params or {}))
        headers = {"Accept": accept}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        url = self.base_url + path + (f"?{qs}" if qs else "")
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as response:
                payload: bytes = response.read()
                return payload
        except urllib.error.HTTPError as exc:
            raise self._error(exc.code, _message(exc.read(), str(exc.reason)), what, route) from None
        except (urllib.error.URLError, OSError) as exc:
            raise ServerError(
                f"cannot reach the turnledger server at {self.base_url} (TURNLEDGER_SERVER): {exc}. "
                "Start it, or unset TURNLEDGER_SERVER (or pass --db) to use the ledger file directly."
            ) from None

    def _error(self, status: int, message: str, what: str | None, route: _Route) -> TurnledgerError:
        text = f"{what}: {message}" if what else message
        if status == 400:
            return route.invalid(text)
        if status == 404:
            return route.missing(text)
        if status in (429, 503):
            return Unavailable(f"the server at {self.base_url} is busy ({status}): {text}; retry shortly")
        if status == 401:
            text += " (set TURNLEDGER_TOKEN to the server's token)"
        return ServerError(f"the server at {self.base_url} answered {status}: {text}", status)

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return json.loads(self.request(method, path, **kwargs) or b"null")

    # --- named queries, contexts, health --------------------------------------------------
    def _duckdb(self) -> duckdb.DuckDBPyConnection:
        import duckdb

        con = getattr(self._local, "con", None)
        if con is None:
            con = self._local.con = duckdb.connect()
        return con

    def query_arrow(self, name: str, **params: Any) -> pa.Table:
        """The query's result as an Arrow table with exact types (money as decimal128)."""
        import pyarrow as pa

        body = self.request("GET", f"/api/query/{quote(name, safe='')}", params=params, accept="*/*",
                            what=f"query {name!r}")  # fmt: skip
        with pa.ipc.open_stream(body) as reader:
            return reader.read_all()

    def query(self, name: str, **params: Any) -> pd.DataFrame:
        """The DataFrame ``ledger.queries.run`` would give for ``QUERIES[name](**params)``."""
        table = self.query_arrow(name, **params)
        return self._duckdb().from_arrow(table).df()

    def context(self, trace_id: str, span_id: str) -> dict[str, Any] | None:
        """The captured request payload of one model call, or None when none was captured."""
        path = f"/api/context/{quote(trace_id, safe='')}/{quote(span_id, safe='')}"
        try:
            payload: dict[str, Any] = self._json("GET", path, what=f"context {trace_id}/{span_id}")
        except NotFound:
            return None
        return payload

    def turn(self, trace_id: str, span_id: str) -> CapturedTurn | None:
        """One model call's captured request and response, or None when neither was captured."""
        path = f"/api/turn/{quote(trace_id, safe='')}/{quote(span_id, safe='')}"
        try:
            doc: dict[str, Any] = self._json("GET", path, what=f"turn {trace_id}/{span_id}")
        except NotFound:
            return None
        from ledger.content import CapturedTurn  # here: the content store is not for every client
        from ledger.wire_request import WireRequest

        wire = doc.get("wire")
        rebuilt = WireRequest(wire["api"], wire["request"], tuple(wire["not_reported"])) if wire else None
        return CapturedTurn(doc.get("request"), doc.get("response"), rebuilt)

    def health(self) -> dict[str, Any]:
        result: dict[str, Any] = self._json("GET", "/healthz", what="server health")
        return result

    def healthy(self) -> bool:
        """True when the server answers /healthz with status ok (never raises)."""
        try:
            return self.health().get("status") == "ok"
        except (TurnledgerError, ValueError):
            return False

    # --- budgets and alerts (documents of ledger.budgets.service) ---------------------------
    def budgets(self) -> list[dict[str, Any]]:
        """``budget_statuses``: every rule with its measurement now and its latest alert."""
        rows: list[dict[str, Any]] = self._json("GET", BUDGETS_PATH, route=_BUDGETS)
        return rows

    def budget(self, id_or_name: str) -> dict[str, Any]:
        doc: dict[str, Any] = self._json("GET", budget_path(id_or_name), route=_BUDGETS)
        return doc

    def add_budget(self, rule: dict[str, Any]) -> dict[str, Any]:
        doc: dict[str, Any] = self._json("POST", BUDGETS_PATH, body=rule, route=_BUDGETS)
        return doc

    def edit_budget(self, id_or_name: str, changes: dict[str, Any]) -> dict[str, Any]:
        doc: dict[str, Any] = self._json("POST", budget_path(id_or_name), body=changes, route=_BUDGETS)
        return doc

    def remove_budget(self, id_or_name: str) -> dict[str, Any]:
        doc: dict[str, Any] = self._json("DELETE", budget_path(id_or_name), route=_BUDGETS)
        return doc

    def sweep(self, wait: float = 10.0) -> dict[str, Any]:
        doc: dict[str, Any] = self._json(
            "POST", SWEEP_PATH, params={"wait": wait}, body={}, timeout=self.timeout + wait, route=_BUDGETS
        )
        return doc

    def check(self, scope: CallScope) -> dict[str, Any]:
        """The gate's decision for a call with this scope (``Decision.to_dict()``)."""
        doc: dict[str, Any] = self._json("POST", CHECK_PATH, body=scope.to_dict(), route=_BUDGETS)
        return doc

    def alerts(
        self,
        *,
        budget: str | None = None,
        level: str | None = None,
        since: datetime | None = None,
        limit: int = 50,
        deliveries: bool = False,
    ) -> list[dict[str, Any]]:
        params = {"budget": budget, "level": level, "since": since, "limit": limit, "deliveries": deliveries or None}
        rows: list[dict[str, Any]] = self._json("GET", ALERTS_PATH, params=params, route=_BUDGETS)
        return rows

    # --- feedback, the review queue and cases (documents of ledger.quality.review and ledger.quality.cases) ----
    def feedback(self, doc: dict[str, Any]) -> dict[str, Any]:
        """Send feedback on a run (``ledger.quality.feedback_judgment``'s fields); stored once per ``id``."""
        stored: dict[str, Any] = self._json("POST", FEEDBACK_PATH, body=doc, what="feedback")
        return stored

    def review_items(
        self, *, status: str | None = None, tag: str | None = None, limit: int = 200
    ) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self._json(
            "GET", REVIEW_PATH, params={"status": status, "tag": tag, "limit": limit}, what="review"
        )
        return rows

    def review_add(self, trace_id: str, *, note: str | None = None) -> dict[str, Any]:
        doc: dict[str, Any] = self._json("POST", REVIEW_PATH, body={"trace_id": trace_id, "note": note}, what="review")
        return doc

    def review_tag(
        self, trace_id: str, tags: list[str], *, note: str | None = None, reviewer: str | None = None
    ) -> dict[str, Any]:
        body = {"tags": tags, "note": note, "reviewer": reviewer}
        doc: dict[str, Any] = self._json(
            "POST", f"{REVIEW_PATH}/{quote(trace_id, safe='')}/tag", body=body, what="review"
        )
        return doc

    def review_close(self, trace_id: str, *, reviewer: str | None = None) -> dict[str, Any]:
        path = f"{REVIEW_PATH}/{quote(trace_id, safe='')}/close"
        doc: dict[str, Any] = self._json("POST", path, body={"reviewer": reviewer}, what="review")
        return doc

    def cases(self, tag: str | None = None) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self._json("GET", CASES_PATH, params={"tag": tag}, what="cases")
        return rows


class ServerSource:
    """A ``ledger.sources.Source`` read through a running ``turnledger serve``'s named-query API."""

    def __init__(self, base_url: str, token: str | None = None, client: Any = None) -> None:
        self.base_url = base_url
        self.client = client if client is not None else ServerClient(base_url, token)

    def describe(self) -> str:
        return f"server {self.base_url}"

    @staticmethod
    def _request(
        builder: Callable[..., q.Query], filters: Filters | None, kwargs: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        name = q.query_name(builder)  # fail here, with the list of names, rather than as an HTTP 404
        params = {
            **(filters.to_params() if filters is not None else {}),
            **{k: v for k, v in kwargs.items() if v is not None},
        }
        return name, params

    def query(self, builder: Callable[..., q.Query], filters: Filters | None = None, **kwargs: Any) -> pd.DataFrame:
        name, params = self._request(builder, filters, kwargs)
        return self.client.query(name, **params)

    def records(
        self, builder: Callable[..., q.Query], filters: Filters | None = None, **kwargs: Any
    ) -> list[dict[str, Any]]:
        import pyarrow as pa

        name, params = self._request(builder, filters, kwargs)
        table = self.client.query_arrow(name, **params)
        rows: list[dict[str, Any]] = table.to_pylist()
        # DuckDB sends its HUGEINT (what SUM of integers gives) as decimal128(38, 0); on the file the
        # same value is a Python int, and a report must not depend on where it was read.
        integral = [f.name for f in table.schema if pa.types.is_decimal(f.type) and f.type.scale == 0]
        for row in rows if integral else ():
            for column in integral:
                if row[column] is not None:
                    row[column] = int(row[column])
        return rows

    def context(self, trace_id: str, span_id: str) -> dict[str, Any] | None:
        return self.client.context(trace_id, span_id)

    def turn(self, trace_id: str, span_id: str) -> CapturedTurn | None:
        return self.client.turn(trace_id, span_id)

    def budgets(self) -> list[dict[str, Any]]:
        return self.client.budgets()


def make_source(spec: SourceSpec) -> Source:
    """The source a spec describes: the server's API, or the ledger file read-only."""
    if spec.kind == "server":
        return ServerSource(spec.location, spec.token)
    from ledger.sources import FileSource

    return FileSource(spec.location)
