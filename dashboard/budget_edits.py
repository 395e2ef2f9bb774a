"""Budget rules changed from the Budgets page: add, edit (limit, warn fraction, on/off) and remove.

The same operations as ``turnledger budget add|edit|rm``, on the same path the
page reads from: through the server's budget routes (``collector.client``) when
the dashboard reads through one, else on the ledger file with
``ledger.budgets.service`` (this process's read-only connection is released
first: DuckDB lets one process open a file either way, not both at once).
Afterwards the session's cached figures are refreshed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import duckdb

from collector.client import ServerClient
from ledger.budgets import service
from ledger.errors import LedgerBusy
from ledger.sources import FileSource
from ledger.store import open_ledger

from . import loaders

__all__ = ["add", "edit", "remove"]


def _on_file(operation: Callable[[duckdb.DuckDBPyConnection], dict[str, Any]]) -> dict[str, Any]:
    path = loaders.spec().location
    FileSource(path).close()
    try:
        con = open_ledger(path)
    except duckdb.ConnectionException:  # this process's readers hold it right now
        raise LedgerBusy(f"the ledger {path!r} is being read; try again in a moment") from None
    try:
        return operation(con)
    finally:
        con.close()


def _client() -> ServerClient | None:
    where = loaders.spec()
    return ServerClient(where.location, where.token) if where.kind == "server" else None


def _done(doc: dict[str, Any]) -> dict[str, Any]:
    loaders.refresh()
    return doc


def add(request: Mapping[str, Any]) -> dict[str, Any]:
    """A new rule from ``budget add``'s request document; the stored rule with its description."""
    rule = service.rule_from_request(request)  # checked here first, on either path
    client = _client()
    return _done(client.add_budget(dict(request)) if client else _on_file(lambda con: service.add_budget(con, rule)))


def edit(id_or_name: str, changes: Mapping[str, Any]) -> dict[str, Any]:
    """``budget edit``: limit, ``soft_fraction`` and/or ``enabled``."""
    client = _client()
    if client:
        return _done(client.edit_budget(id_or_name, dict(changes)))
    return _done(_on_file(lambda con: service.edit_budget(con, id_or_name, changes)))


def remove(id_or_name: str) -> dict[str, Any]:
    client = _client()
    return _done(
        client.remove_budget(id_or_name) if client else _on_file(lambda con: service.remove_budget(con, id_or_name))
    )
