"""Shared fixtures: real DuckDB ledgers in temporary files, loaded from real OTLP files."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
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
