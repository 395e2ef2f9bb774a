"""A collector that refuses to be open (#26 item 7): beyond loopback it needs TURNLEDGER_TOKEN or the
explicit ``--insecure-no-auth``, and it says which on every start and on ``/healthz``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from collector.receiver import CollectorServer, ServerConfig
from ledger.exposure import CollectorExposed

from .conftest import ROOT, request

HANG_GUARD_S = 120


def _serve(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "TURNLEDGER_TOKEN"}
    return subprocess.Popen(
        [sys.executable, "-c", "import sys; from collector.cli import main; sys.exit(main())",
         "serve", "--db", str(tmp_path / "l.duckdb"), "--port", "0", "--no-grpc", *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_serve_on_every_interface_without_a_token_exits_naming_the_fixes(tmp_path):
    proc = _serve(tmp_path, "--host", "0.0.0.0")
    out, err = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode != 0, out
    for fix in ("TURNLEDGER_TOKEN", "127.0.0.1", "--insecure-no-auth"):
        assert fix in err
    assert not (tmp_path / "l.duckdb").exists()  # refused before anything opened


def test_insecure_no_auth_starts_and_says_so_on_start(tmp_path):
    proc = _serve(tmp_path, "--host", "0.0.0.0", "--insecure-no-auth")
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # the warning comes once the port is bound; a dead process ends the read
        assert "warning: --insecure-no-auth" in line and "without TURNLEDGER_TOKEN" in line, line
    finally:
        proc.terminate()
        proc.wait(HANG_GUARD_S)


def test_the_server_itself_refuses_an_open_address(tmp_path, migrated_ledger):
    with pytest.raises(CollectorExposed, match="--insecure-no-auth"):
        CollectorServer(ServerConfig(host="0.0.0.0", port=0, db=migrated_ledger))


@pytest.mark.parametrize(
    ("host", "config", "auth"),
    [
        ("127.0.0.1", {}, "none (loopback only)"),
        ("0.0.0.0", {"token": "t0ken"}, "bearer token"),
        ("0.0.0.0", {"insecure_no_auth": True}, "none (--insecure-no-auth)"),
    ],
)
def test_healthz_says_how_the_collector_authenticates(make_server, host, config, auth):
    server = make_server(host=host, **config)
    port = server.url.rsplit(":", 1)[1]
    assert request(f"http://127.0.0.1:{port}/healthz").json()["auth"] == auth
