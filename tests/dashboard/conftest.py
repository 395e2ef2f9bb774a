"""Ledger files for the dashboard tests: the sample traces, and the samples plus extra runs.

Both are built once per session in a temporary folder and only ever opened
read-only afterwards (by the tests, AppTest and the browser test's server).
"""

from __future__ import annotations

import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from collector.demo.samples import build as build_sample
from collector.otlp import read_file
from ledger.ingest import ingest
from ledger.store import open_ledger

from .scenarios import EXTRA, cache_break_run, hostile_run

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
FIVE_TURN = build_sample("five_turn_run")[0].trace_id
HOSTILE = hostile_run()[0].trace_id
CACHE_BREAK = cache_break_run()[0].trace_id


def _build(path: Path, *, extra: bool) -> Path:
    con = open_ledger(path)
    try:
        for file in sorted(SAMPLES.glob("*.json")):
            ingest(con, read_file(file))
        if extra:
            for scenario in EXTRA.values():
                ingest(con, scenario())
    finally:
        con.close()
    return path


@pytest.fixture(scope="session")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(tmp_path_factory.mktemp("dash") / "samples.duckdb", extra=False)


@pytest.fixture(scope="session")
def extended_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(tmp_path_factory.mktemp("dash") / "extended.duckdb", extra=True)


@pytest.fixture(scope="session")
def make_run_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What `make run` shows."""
    return make_run_ledger(tmp_path_factory.mktemp("dash") / "make_run.duckdb")


def make_run_ledger(path: Path | str) -> Path | str:
    """A ledger (file or lake) of what `make run` loads: every OTLP file under sample_traces/
    (harness samples included), found the way `turnledger up` finds them."""
    from collector.cli.ingest import expand_paths

    con = open_ledger(path)
    try:
        for file in expand_paths([SAMPLES]):
            ingest(con, read_file(file))
    finally:
        con.close()
    return path


@pytest.fixture
def rows():  # type: ignore[no-untyped-def]
    """``rows(db, query)``: a ledger query run straight on a file, independent of the dashboard's code."""
    from ledger import queries as q

    def _rows(db: Path, query: q.Query):  # type: ignore[no-untyped-def]
        con = open_ledger(db, read_only=True)
        try:
            return q.run(con, query)
        finally:
            con.close()

    return _rows


def wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """Until the Streamlit server at ``url`` answers its health check (``timeout`` is a hang guard only)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"streamlit did not start (exit code {proc.poll()})") from None
            time.sleep(0.2)
