"""Each query builder is registered once, under its own function name, and callers must pass a registered one."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

from ledger import queries as q
from ledger.errors import TurnledgerError
from ledger.queries import core


def _builder_modules():
    for info in pkgutil.iter_modules(q.__path__, prefix="ledger.queries."):
        yield importlib.import_module(info.name)


def test_every_registered_name_is_its_builders_own_name_and_public():
    assert q.QUERIES, "nothing registered"
    for name, builder in q.QUERIES.items():
        assert builder.__name__ == name
        assert getattr(q, name) is builder and name in q.__all__
        assert q.query_name(builder) == name


def test_every_public_builder_in_the_package_is_registered():
    for module in _builder_modules():
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj) and obj.__annotations__.get("return") in ("Query", q.Query):  # unevaluated hints
                assert q.QUERIES.get(name) is obj, f"{module.__name__}.{name} builds a Query but is not registered"


def test_a_builder_registered_twice_is_refused():
    before = dict(q.QUERIES)
    with pytest.raises(TurnledgerError, match="'cost_per_run' is registered twice"):
        core.query(q.cost_per_run)

    def cost_per_run(f: q.Filters = q.NO_FILTERS) -> q.Query:  # same name, another function
        return q.Query("SELECT 1")

    with pytest.raises(TurnledgerError, match="registered twice"):
        core.query(cost_per_run)
    assert dict(q.QUERIES) == before
    assert q.QUERIES["cost_per_run"] is q.cost_per_run


def test_the_registry_cannot_be_written_around_the_decorator():
    with pytest.raises(TypeError):
        q.QUERIES["alias"] = q.cost_per_run  # type: ignore[index]


def test_an_unregistered_function_is_an_unknown_query_even_under_a_registered_name():
    def long_tail(f: q.Filters = q.NO_FILTERS, limit: int = 20) -> q.Query:
        return q.Query("DROP TABLE runs")

    with pytest.raises(q.UnknownQuery, match="unknown query 'long_tail'"):
        q.query_name(long_tail)
    with pytest.raises(q.UnknownQuery, match="choose one of"):
        q.query_name(print)  # type: ignore[arg-type]
