"""Lake fixtures: one real PostgreSQL per session (the DuckLake catalog), a fresh database per test."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from itertools import count
from pathlib import Path

import pytest

from .postgres import PostgresServer, find_bin_dir, start_server
from .s3 import S3Server, start_s3

_databases = count(1)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed: apt-get install postgresql")
    server = start_server(bin_dir)
    try:
        yield server
    finally:
        with contextlib.suppress(subprocess.SubprocessError):  # the directory goes anyway
            server.stop()
        shutil.rmtree(server.root, ignore_errors=True)


@pytest.fixture
def catalog_dsn(postgres: PostgresServer) -> str:
    """An empty PostgreSQL database for one test's lake catalog."""
    return postgres.create_database(f"lake_{next(_databases)}")


@pytest.fixture
def lake_target(catalog_dsn: str, tmp_path: Path) -> tuple[str, Path]:
    """A DuckLake target (catalog in the test's database) and its local data directory."""
    return f"ducklake:postgres:{catalog_dsn}", tmp_path / "lake-data"


@pytest.fixture(autouse=True)
def _data_path_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """`main(["…", "--data-path", D])` exports $TURNLEDGER_DATA_PATH: taken back after each test."""
    monkeypatch.delenv("TURNLEDGER_DATA_PATH", raising=False)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto's S3-compatible server (the lake's object store), for the session."""
    server = start_s3()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """A new bucket's name, with the AWS variables that `ledger.lake` (and every process a test starts) reads."""
    for name, value in s3_server.environment().items():
        monkeypatch.setenv(name, value)
    bucket = f"lake-{next(_databases)}"
    s3_server.create_bucket(bucket)
    return bucket
