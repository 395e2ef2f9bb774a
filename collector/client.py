"""``QueryClient``: the dashboard's and CLI's way to read through a running ``turnledger serve``.

``client.query(name, **params)`` returns the same DataFrame that
``ledger.queries.run(con, QUERIES[name](...))`` returns on the file itself
(same columns, dtypes and values): the Arrow stream is converted to pandas by
DuckDB, exactly as ``run`` does, so callers can switch between the two freely.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import urllib.error
import urllib.request
from datetime import date, datetime
from typing import Any
from urllib.parse import quote, urlencode

import duckdb
import pandas as pd
import pyarrow as pa

from ledger.errors import ServerError
from ledger.queries import Filters

__all__ = ["QueryClient", "QueryError"]


class QueryError(ServerError):
    """The server answered with an error (bad parameter, unknown query, auth) or could not be reached."""


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
            for fld in dataclasses.fields(value):
                v = getattr(value, fld.name)
                if v is not None:
                    out[fld.name] = _param(v)
        elif value is not None:
            out[key] = _param(value)
    return out


class QueryClient:
    """Named queries, captured contexts and health of a collector at ``base_url``."""

    def __init__(self, base_url: str, token: str | None = None, *, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._local = threading.local()

    def _duckdb(self) -> duckdb.DuckDBPyConnection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = self._local.con = duckdb.connect()
        return con

    def _get(self, path: str, accept: str) -> tuple[int, bytes]:
        request = urllib.request.Request(self.base_url + path, headers={"Accept": accept})
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            body = exc.read()
            try:
                message = json.loads(body)["error"]
            except (ValueError, KeyError, TypeError):
                message = body.decode(errors="replace")[:500] or exc.reason
            return exc.code, str(message).encode()
        except (urllib.error.URLError, OSError) as exc:
            raise QueryError(f"cannot reach the turnledger server at {self.base_url}: {exc}") from None

    def query_arrow(self, name: str, **params: Any) -> pa.Table:
        """The query's result as an Arrow table with exact types (money as decimal128)."""
        qs = urlencode(_flatten(params))
        status, body = self._get(f"/api/query/{quote(name, safe='')}" + (f"?{qs}" if qs else ""), "*/*")
        if status != 200:
            raise QueryError(f"query {name!r}: {body.decode(errors='replace')}", status)
        with pa.ipc.open_stream(body) as reader:
            return reader.read_all()

    def query(self, name: str, **params: Any) -> pd.DataFrame:
        """The DataFrame ``ledger.queries.run`` would give for ``QUERIES[name](**params)``."""
        table = self.query_arrow(name, **params)
        return self._duckdb().from_arrow(table).df()

    def context(self, trace_id: str, span_id: str) -> dict[str, Any] | None:
        """The captured request payload of one model call, or None when none was captured."""
        status, body = self._get(
            f"/api/context/{quote(trace_id, safe='')}/{quote(span_id, safe='')}", "application/json"
        )
        if status == 404:
            return None
        if status != 200:
            raise QueryError(f"context {trace_id}/{span_id}: {body.decode(errors='replace')}", status)
        payload: dict[str, Any] = json.loads(body)
        return payload

    def health(self) -> dict[str, Any]:
        status, body = self._get("/healthz", "application/json")
        if status != 200:
            raise QueryError(f"server unhealthy: {body.decode(errors='replace')}", status)
        result: dict[str, Any] = json.loads(body)
        return result

    def healthy(self) -> bool:
        """True when the server answers /healthz with status ok (never raises)."""
        try:
            return self.health().get("status") == "ok"
        except (QueryError, ValueError):
            return False
