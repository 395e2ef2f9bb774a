"""The lake's catalog restarting is the store's fault: every valid request is 200 or 503, never 400.

A real ``turnledger serve`` on a DuckLake whose catalog is a PostgreSQL of this test's own
(restarting the session's would cut other tests' connections), 8 clients exporting while
PostgreSQL is restarted six times (``pg_ctl -m fast``, down 0.2 s: connections cut in the middle of coalesced
commits). Afterwards every 503'd body is retried like an exporter does, and the lake holds every
acknowledged span exactly once, counted by span id.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from ledger.store import open_ledger
from tests.server.conftest import ROOT, free_port, wait_healthy
from tests.server.exports import CLIENTS, HANG_S, Exports, stored_span_ids

from .postgres import PostgresServer, find_bin_dir, start_server

DOWN_S = 0.2  # how long the catalog stays down each time
RESTARTS = 6


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed: apt-get install postgresql")
    server = start_server(bin_dir)
    try:
        yield server
    finally:
        with contextlib.suppress(subprocess.SubprocessError):  # already down: the directory goes anyway
            server.stop()
        shutil.rmtree(server.root, ignore_errors=True)


def _wait_for(predicate, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + HANG_S
    while not predicate():
        assert time.monotonic() < deadline, f"{what} within {HANG_S} s"
        time.sleep(0.05)


def test_postgres_restarts_during_coalesced_commits_are_503_never_400(own_postgres, tmp_path):
    target = f"ducklake:postgres:{own_postgres.create_database('lake')}"
    data = tmp_path / "lake-data"
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "collector.cli",
                "serve",
                "--port",
                str(port),
                "--no-grpc",
                "--decode-workers",
                "0",
                "--db",
                target,
                "--data-path",
                str(data),
            ],
            cwd=ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, HANG_S)
        exports = Exports(url)
        stop = threading.Event()
        clients = [threading.Thread(target=exports.client, args=("pg", w, None, stop)) for w in range(CLIENTS)]
        for t in clients:
            t.start()
        try:
            for restart in range(RESTARTS):
                before = len(exports.acked)
                _wait_for(lambda b=before: len(exports.acked) >= b + 200, "200 spans acknowledged")
                own_postgres.restart(DOWN_S)
                after = len(exports.acked)  # and the collector resumes once the catalog is back
                _wait_for(lambda a=after: len(exports.acked) >= a + 200, f"resumed after restart {restart + 1}")
        finally:
            stop.set()
            for t in clients:
                t.join(HANG_S)
        assert exports.statuses[503], "no request met the restarts: nothing was tested"
        exports.retry_unacked()
        assert not exports.odd, exports.odd
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(HANG_S) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(HANG_S)
    con = open_ledger(target, read_only=True, data_path=str(data))
    try:
        exports.assert_stored_exactly_once(stored_span_ids(con))
    finally:
        con.close()
