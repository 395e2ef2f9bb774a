"""Lake fixtures: one real PostgreSQL per session (the DuckLake catalog), a fresh database per test."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import count
from pathlib import Path

import pytest

from .postgres import PostgresServer, find_bin_dir, start_server

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


@dataclass(frozen=True)
class S3Endpoint:
    url: str
    bucket: str


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """moto's S3-compatible server on a free local port (the lake's object store), for the session."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(s3_server: str, monkeypatch: pytest.MonkeyPatch) -> S3Endpoint:
    """A new bucket, with the AWS variables that `ledger.lake` (and every process a test starts) reads."""
    import boto3

    for name, value in {
        "AWS_ACCESS_KEY_ID": "turnledger-test",
        "AWS_SECRET_ACCESS_KEY": "turnledger-test-secret",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": s3_server,
    }.items():
        monkeypatch.setenv(name, value)
    bucket = f"lake-{next(_databases)}"
    boto3.client("s3", endpoint_url=s3_server).create_bucket(Bucket=bucket)
    return S3Endpoint(s3_server, bucket)


def s3_objects(endpoint: S3Endpoint) -> list[str]:
    import boto3

    listed = boto3.client("s3", endpoint_url=endpoint.url).list_objects_v2(Bucket=endpoint.bucket)
    return [o["Key"] for o in listed.get("Contents", [])]
