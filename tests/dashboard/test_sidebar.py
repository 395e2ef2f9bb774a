"""The sidebar's filter choices: every dimension's values from one query, the same values as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from collector.client import make_source
from dashboard import loaders
from ledger import queries as q
from ledger.queries.meta import FILTER_DIMENSIONS
from ledger.store import open_ledger

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
SIDEBAR = ("tenant", "agent", "model", "agent_version", "prompt_version", "service_version", "environment", "variant")


def by_dimension(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in rows:
        out.setdefault(r["dimension"], []).append(r["value"])
    return out


def test_filter_options_are_each_dimensions_filter_values_in_one_query(sample_db: Path) -> None:
    con = open_ledger(sample_db, read_only=True)
    try:
        every = by_dimension(q.records(con, q.filter_options()))
        for dimension in FILTER_DIMENSIONS:
            assert every.get(dimension, []) == [r["value"] for r in q.records(con, q.filter_values(dimension))]
        assert every["tenant"] == ["acme", "globex", "initech"] and "stop_cause" in every
    finally:
        con.close()


def test_an_empty_ledger_has_no_filter_options(tmp_path: Path) -> None:
    con = open_ledger(tmp_path / "empty.duckdb")
    try:
        assert q.records(con, q.filter_options()) == []
    finally:
        con.close()


def test_the_sidebar_reads_every_filters_choices_with_one_query(
    sample_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []

    class Recording:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def query(self, builder: Any, filters: Any = None, **kwargs: Any) -> Any:
            asked.append(builder.__name__)
            return self.inner.query(builder, filters, **kwargs)

    monkeypatch.delenv("TURNLEDGER_SERVER", raising=False)
    monkeypatch.setenv("TURNLEDGER_DB", str(sample_db))
    monkeypatch.setattr(loaders, "make_source", lambda spec: Recording(make_source(spec)))
    loaders._load.clear()  # nothing cached from another test: every query the page asks reaches the source
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert [n for n in asked if n.startswith("filter_")] == ["filter_options"]
    con = open_ledger(sample_db, read_only=True)
    try:
        for dimension in SIDEBAR:  # ALL first, then the values in order, as one query per dimension gave them
            want = ["All", *(r["value"] for r in q.records(con, q.filter_values(dimension)))]
            assert at.sidebar.selectbox(key=f"f_{dimension}").options == want, dimension
    finally:
        con.close()
