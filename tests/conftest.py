"""Shared fixtures: real DuckDB ledgers in temporary files, loaded from real OTLP files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from collector.otlp import read_file
from ledger.ingest import ingest
from ledger.store import open_ledger

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.duckdb"


@pytest.fixture
def ledger(db_path: Path) -> duckdb.DuckDBPyConnection:
    con = open_ledger(db_path)
    yield con
    con.close()


@pytest.fixture
def load(ledger: duckdb.DuckDBPyConnection) -> Callable[..., None]:
    """Ingest named sample files (``load("five_turn_run", "cache_pair")``) into the test ledger."""

    def _load(*names: str) -> None:
        for name in names:
            ingest(ledger, read_file(SAMPLES / f"{name}.json"))

    return _load
