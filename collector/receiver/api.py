"""The named-query API: ``ledger.queries.QUERIES`` over HTTP, typed parameters, Arrow or JSON out.

Never arbitrary SQL: a request names a registered builder, and its query-string
parameters are converted to the builder's annotated types: ``Filters`` fields
(for builders that take a ``Filters``) through ``Filters.from_params``, the
wire format the dashboard and the client write with ``Filters.to_params``;
the builder's own keyword arguments through their annotations. Anything else
is a ``BadParameter`` naming the parameter.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal
from functools import cache
from typing import Any

import duckdb
import pyarrow as pa

from ledger.errors import InputError
from ledger.queries import QUERIES, Filters, Query, UnknownQuery, parse_time

__all__ = [
    "ARROW_STREAM",
    "BadParameter",
    "Parameter",
    "UnknownQuery",
    "arrow_ipc",
    "build_query",
    "describe_queries",
    "json_records",
    "parameters",
    "run_arrow",
]

ARROW_STREAM = "application/vnd.apache.arrow.stream"
RESERVED = frozenset({"format"})  # query-string keys of the API itself, not of a builder


class BadParameter(InputError, ValueError):
    """A query-string parameter is unknown, missing, repeated or not of its type: 400."""


@dataclasses.dataclass(frozen=True)
class Parameter:
    name: str
    type: Any  # a plain type: str, int, float, bool, datetime
    required: bool
    default: Any
    is_filter: bool  # a Filters field rather than a builder argument

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": getattr(self.type, "__name__", str(self.type)),
            "required": self.required,
            "default": None if self.required else _jsonable(self.default),
            "filter": self.is_filter,
        }


def _plain(annotation: Any) -> tuple[Any, bool]:
    """(type, optional) for ``T`` or ``T | None``."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 else str), True
    return annotation, False


@cache
def parameters(name: str) -> tuple[Callable[..., Query], dict[str, Parameter], str | None]:
    """(builder, parameters by name, the builder's Filters argument name or None)."""
    try:
        builder = QUERIES[name]
    except KeyError:
        raise UnknownQuery(
            f"no query named {name!r}; choose one of {', '.join(sorted(QUERIES))} (GET /api/queries describes them)"
        ) from None
    hints = typing.get_type_hints(builder)
    params: dict[str, Parameter] = {}
    filters_arg: str | None = None
    for p in inspect.signature(builder).parameters.values():
        annotation = hints.get(p.name, str)
        if annotation is Filters:
            filters_arg = p.name
            for fld in dataclasses.fields(Filters):
                ftype, _ = _plain(typing.get_type_hints(Filters)[fld.name])
                params[fld.name] = Parameter(fld.name, ftype, False, None, True)
            continue
        ptype, _ = _plain(annotation)
        required = p.default is inspect.Parameter.empty
        params[p.name] = Parameter(p.name, ptype, required, None if required else p.default, False)
    return builder, params, filters_arg


def describe_queries() -> dict[str, Any]:
    """Every registered query with its parameters (``GET /api/queries``)."""
    out = {}
    for name in sorted(QUERIES):
        builder, params, _ = parameters(name)
        out[name] = {
            "doc": inspect.getdoc(builder) or "",
            "parameters": [p.describe() for p in params.values()],
        }
    return out


MAX_COUNT = 1_000_000  # rows, runs or bins one parameter may ask for
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _convert(param: Parameter, raw: str) -> Any:
    t = param.type
    try:
        if t is bool:
            low = raw.strip().lower()
            if low in _TRUE | _FALSE:
                return low in _TRUE
            raise ValueError("expected true or false")
        if t is int:  # every int parameter is a count (limit, window, bins): past BIGINT or negative was a 500
            count = int(raw)
            if not 0 <= count <= MAX_COUNT:
                raise ValueError(f"expected a count from 0 to {MAX_COUNT:,}")
            return count
        if t is float:
            number = float(raw)
            if not math.isfinite(number):
                raise ValueError("expected a finite number")
            return number
        if t is datetime:
            return parse_time(raw)
        if t is date:
            return date.fromisoformat(raw.strip())
        return raw
    except ValueError as exc:
        raise BadParameter(f"parameter {param.name}={raw!r}: not a valid {t.__name__} ({exc})") from None


def build_query(name: str, args: Mapping[str, Sequence[str]]) -> Query:
    """The Query a request asks for. ``args`` is a parsed query string (``parse_qs`` shape)."""
    builder, params, filters_arg = parameters(name)
    kwargs: dict[str, Any] = {}
    filters: dict[str, str] = {}
    for key, values in args.items():
        if key in RESERVED:
            continue
        param = params.get(key)
        if param is None:
            known = ", ".join(sorted(params)) or "none"
            raise BadParameter(f"unknown parameter {key!r} for query {name!r} (takes: {known})")
        if len(values) != 1:
            raise BadParameter(f"parameter {key!r} given {len(values)} times; give it once")
        raw = values[0]
        if raw == "" and not param.required:
            continue  # an empty optional parameter means "not set" (what HTML forms send)
        if param.is_filter:
            filters[key] = raw
        else:
            kwargs[key] = _convert(param, raw)
    missing = [p.name for p in params.values() if p.required and p.name not in kwargs]
    if missing:
        raise BadParameter(f"query {name!r} needs parameter(s): {', '.join(missing)}")
    if filters_arg is not None:
        try:
            kwargs[filters_arg] = Filters.from_params(filters)
        except InputError as exc:
            raise BadParameter(str(exc)) from None
    try:
        return builder(**kwargs)
    except (ValueError, KeyError, TypeError) as exc:
        message = exc.args[0] if exc.args else str(exc)
        raise BadParameter(f"query {name!r}: {message}") from None


def run_arrow(con: duckdb.DuckDBPyConnection, query: Query) -> pa.Table:
    """Execute on a (reader) connection; exact types kept (DECIMAL money stays decimal128)."""
    return con.sql(query.sql, params=query.params).to_arrow_table()


def arrow_ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _jsonable(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)  # exact money, as OTLP/JSON carries 64-bit integers: a string
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    return value


def json_records(table: pa.Table) -> bytes:
    """A JSON array of row objects: exact Decimal as a string, times as ISO 8601, NaN as null."""
    return json.dumps([_jsonable(r) for r in table.to_pylist()], ensure_ascii=False).encode()
