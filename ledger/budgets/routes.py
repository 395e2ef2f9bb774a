"""The budget routes of ``turnledger serve``, named once for the server and its client.

``collector.receiver.budget_routes`` answers them (with :mod:`.service`'s
documents); ``collector.client.ServerClient`` calls them. All behind the
server's bearer token::

    GET    /api/budgets                 budget list     (service.budget_statuses)
    POST   /api/budgets                 budget add      (JSON rule, see service.rule_from_request)
    GET    /api/budgets/{id or name}    budget show
    POST   /api/budgets/{id or name}    budget edit     (JSON changes, see service.edit_budget)
    DELETE /api/budgets/{id or name}    budget rm
    POST   /api/budgets/sweep?wait=S    budget sweep    (the server's own governor)
    POST   /v1/budgets/check            budget check    (the harness's gate)
    GET    /api/alerts?budget=&level=&since=&limit=&deliveries=true
"""

from __future__ import annotations

from urllib.parse import quote

__all__ = ["ALERTS_PATH", "BUDGETS_PATH", "CHECK_PATH", "SWEEP_PATH", "budget_path"]

BUDGETS_PATH = "/api/budgets"
SWEEP_PATH = BUDGETS_PATH + "/sweep"
ALERTS_PATH = "/api/alerts"
CHECK_PATH = "/v1/budgets/check"


def budget_path(id_or_name: str) -> str:
    """One rule's route (a name may hold ``/``: it is sent quoted)."""
    return f"{BUDGETS_PATH}/{quote(id_or_name, safe='')}"
