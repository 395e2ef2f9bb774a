"""Shared fixtures: real DuckDB ledgers in temporary files, loaded from real OTLP files."""

from __future__ import annotations

import base64
import json
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest
from google.protobuf.json_format import ParseDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.otlp import read_file
from ledger.ingest import ingest
from ledger.store import open_ledger

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"


def sample_as_protobuf(path: Path) -> bytes:
    """An OTLP/JSON file (hex ids) as the protobuf body an exporter would send (bytes ids)."""
    doc = json.loads(path.read_text())
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in sp:
                        sp[key] = base64.b64encode(bytes.fromhex(sp[key])).decode()
    return ParseDict(doc, ExportTraceServiceRequest(), ignore_unknown_fields=True).SerializeToString()


@pytest.fixture(autouse=True)
def dashboard_on_loopback(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """AppTest serves no one: the app runs as on 127.0.0.1 with no password, unless a test says otherwise."""
    from streamlit import config

    monkeypatch.delenv("TURNLEDGER_DASHBOARD_PASSWORD", raising=False)
    before = config.get_option("server.address")
    config.set_option("server.address", "127.0.0.1")
    yield
    config.set_option("server.address", before)


@contextmanager
def main_module_kept() -> Iterator[None]:
    """``sys.modules["__main__"]`` as it was before the block.

    Streamlit's script runner (AppTest's too) installs the script it runs as ``__main__`` and
    never puts the old one back. Every process a later test then starts with multiprocessing's
    "spawn" (the collector's decode workers) runs that script first, as its main module: a decode
    worker ran the whole dashboard before its first body, which held the first OTLP/HTTP answer
    past the 2 s Claude Code waits for its telemetry at exit (tests/frameworks/test_claude_code.py)."""
    main = sys.modules["__main__"]
    try:
        yield
    finally:
        sys.modules["__main__"] = main


@pytest.fixture(autouse=True)
def main_module_restored() -> Iterator[None]:
    with main_module_kept():
        yield


@pytest.fixture(scope="session")
def migrated_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty ledger file with every migration applied, made once per session.

    Migrating a new file costs ~0.35 s (far more on a loaded machine) and hundreds of tests
    need an empty ledger; a copy of this one costs ~0.02 s. Migrating a new file itself is
    still exercised by every test that lets the CLI, a collector or the lake create one."""
    path = tmp_path_factory.mktemp("template") / "migrated.duckdb"
    open_ledger(path).close()
    return path


def copy_ledger(template: Path, path: Path) -> Path:
    """``path`` as a copy of the empty migrated ``template`` (unless a ledger is already there)."""
    if not path.exists():
        shutil.copyfile(template, path)
    return path


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.duckdb"


@pytest.fixture
def ledger(db_path: Path, migrated_ledger: Path) -> duckdb.DuckDBPyConnection:
    con = open_ledger(copy_ledger(migrated_ledger, db_path))
    yield con
    con.close()


@pytest.fixture
def load(ledger: duckdb.DuckDBPyConnection) -> Callable[..., None]:
    """Ingest named sample files (``load("five_turn_run", "cache_pair")``) into the test ledger."""

    def _load(*names: str) -> None:
        for name in names:
            ingest(ledger, read_file(SAMPLES / f"{name}.json"))

    return _load
