"""``BudgetClient``: budgets and alerts through a running ``turnledger serve``.

While the server runs it holds the ledger file's lock, so ``turnledger budget``
and ``turnledger alerts`` go through its routes instead (when
``TURNLEDGER_SERVER`` is set): the same documents as :mod:`.service` gives on
the file. Errors keep their type across the wire: an unknown budget is
:class:`UnknownBudget`, a bad value :class:`BudgetError`, anything else
(unreachable, wrong token) a :class:`~ledger.errors.TurnledgerError` that says
what to do.

Routes (all behind the server's bearer token)::

    GET    /api/budgets                 budget list
    POST   /api/budgets                 budget add      (JSON rule, see service.rule_from_request)
    GET    /api/budgets/{id or name}    budget show
    DELETE /api/budgets/{id or name}    budget rm
    POST   /api/budgets/sweep?wait=S    budget sweep    (the server's own governor)
    POST   /v1/budgets/check            budget check    (the harness's gate)
    GET    /api/alerts?budget=&level=&since=&limit=&deliveries=true
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

from ledger import settings
from ledger.errors import TurnledgerError

from .gate import CHECK_PATH, CallScope
from .rules import BudgetError, UnknownBudget

__all__ = ["ALERTS_PATH", "BUDGETS_PATH", "BudgetClient"]

BUDGETS_PATH = "/api/budgets"
ALERTS_PATH = "/api/alerts"


class BudgetClient:
    """The budget routes of the server at ``base_url`` (token default: ``$TURNLEDGER_TOKEN``)."""

    def __init__(self, base_url: str, token: str | None = None, *, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token if token is not None else settings.token()
        self.timeout = timeout

    def _call(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> Any:
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.base_url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                message = str(json.loads(raw)["error"])
            except (ValueError, KeyError, TypeError):
                message = raw.decode(errors="replace")[:500] or str(exc.reason)
            if exc.code == 404 and path.startswith(BUDGETS_PATH + "/"):
                raise UnknownBudget(message) from None
            if exc.code == 400:
                raise BudgetError(message) from None
            if exc.code == 401:
                message += " (set TURNLEDGER_TOKEN to the server's token)"
            raise TurnledgerError(f"the server at {self.base_url} answered {exc.code}: {message}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise TurnledgerError(
                f"cannot reach the turnledger server at {self.base_url} (TURNLEDGER_SERVER): {exc}. "
                "Start it, or unset TURNLEDGER_SERVER (or pass --db) to use the ledger file directly."
            ) from None

    @staticmethod
    def _one(id_or_name: str) -> str:
        return f"{BUDGETS_PATH}/{quote(id_or_name, safe='')}"

    def budgets(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self._call("GET", BUDGETS_PATH)
        return rows

    def budget(self, id_or_name: str) -> dict[str, Any]:
        doc: dict[str, Any] = self._call("GET", self._one(id_or_name))
        return doc

    def add_budget(self, rule: dict[str, Any]) -> dict[str, Any]:
        doc: dict[str, Any] = self._call("POST", BUDGETS_PATH, rule)
        return doc

    def remove_budget(self, id_or_name: str) -> dict[str, Any]:
        doc: dict[str, Any] = self._call("DELETE", self._one(id_or_name))
        return doc

    def sweep(self, wait: float = 10.0) -> dict[str, Any]:
        doc: dict[str, Any] = self._call(
            "POST", f"{BUDGETS_PATH}/sweep?{urlencode({'wait': wait})}", {}, timeout=self.timeout + wait
        )
        return doc

    def check(self, scope: CallScope) -> dict[str, Any]:
        doc: dict[str, Any] = self._call("POST", CHECK_PATH, scope.to_dict())
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
        params: dict[str, str] = {"limit": str(limit)}
        if budget is not None:
            params["budget"] = budget
        if level is not None:
            params["level"] = level
        if since is not None:
            params["since"] = since.isoformat()
        if deliveries:
            params["deliveries"] = "true"
        rows: list[dict[str, Any]] = self._call("GET", f"{ALERTS_PATH}?{urlencode(params)}")
        return rows
