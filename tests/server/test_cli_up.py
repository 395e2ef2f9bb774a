"""``turnledger up``: collector + dashboard together, samples on first start, Ctrl-C stops both."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import threading
import time

import pytest

from collector.cli import main
from collector.cli.serve import load_samples_if_empty
from collector.client import ServerClient

from .conftest import ROOT, free_port, request, start_cli

HAS_DASHBOARD = importlib.util.find_spec("dashboard.launch") is not None


def _read_until(proc: subprocess.Popen[str], marker: str, timeout: float = 60.0) -> list[str]:
    """Lines the process prints up to and including one containing ``marker``."""
    lines: list[str] = []
    found = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if marker in line:
                found.set()  # keep draining, so a chatty child never blocks on a full pipe

    threading.Thread(target=pump, daemon=True).start()
    if not found.wait(timeout):
        raise AssertionError(f"{marker!r} not printed; got:\n" + "\n".join(lines))
    return lines


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _wait(predicate, timeout: float = 30.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.skipif(not HAS_DASHBOARD, reason="the dashboard package (dashboard.launch) is not built yet")
def test_up_starts_both_loads_samples_and_ctrl_c_stops_both(tmp_path):
    db = tmp_path / "ledger.duckdb"
    port, dash = free_port(), free_port()
    proc = start_cli("up", "--port", str(port), "--grpc-port", "0", "--dashboard-port", str(dash), "--db", str(db))
    try:
        out = "\n".join(_read_until(proc, "Ctrl-C stops both"))
        assert "loaded" in out and "sample spans" in out
        assert f"dashboard  http://127.0.0.1:{dash}" in out
        assert f"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:{port}" in out
        client = ServerClient(f"http://127.0.0.1:{port}")
        assert client.healthy()
        assert client.query("cost_per_run")["runs"][0] >= 7  # the sample scenarios' runs
        assert _wait(lambda: _listening(dash) and request(f"http://127.0.0.1:{dash}/_stcore/health").status == 200)
        proc.send_signal(signal.SIGINT)  # to `up` alone: it must stop the dashboard itself
        assert proc.wait(30) == 0
        assert not _listening(port)
        assert _wait(lambda: not _listening(dash), 15), "the dashboard outlived `turnledger up`"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_samples_load_only_into_an_empty_ledger(make_server):
    server = make_server()
    assert load_samples_if_empty(server, ROOT / "sample_traces") > 0
    runs = server.writer.stats.spans_written
    assert load_samples_if_empty(server, ROOT / "sample_traces") == 0
    assert server.writer.stats.spans_written == runs


def test_serve_refuses_a_ledger_another_collector_owns_and_a_busy_port(make_server, tmp_path, capsys):
    owner = make_server()  # holds the DuckDB file lock, in this process
    other = start_cli("serve", "--port", str(free_port()), "--grpc-port", "0", "--db", str(owner.db_path))
    out = other.communicate(timeout=60)[0]
    assert other.returncode == 2
    assert "cannot open ledger" in out and "owns the file" in out
    port = int(owner.url.rsplit(":", 1)[1])
    assert main(["serve", "--port", str(port), "--grpc-port", "0", "--db", str(tmp_path / "other.duckdb")]) == 2
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


def test_up_refuses_a_busy_port_before_it_starts_anything(tmp_path, capsys):
    """A taken dashboard (or collector) port is found first: no ledger file, no collector, no "is up"."""
    db = tmp_path / "never.duckdb"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        for flags in (["--dashboard-port", str(busy)], ["--port", str(busy)], ["--grpc-port", str(busy)]):
            argv = ["up", "--db", str(db), "--port", str(free_port()), "--grpc-port", "0", *flags]
            assert main(argv) == 2
            out = capsys.readouterr()
            assert f"cannot listen on 127.0.0.1:{busy}" in out.err and "turnledger is up" not in out.out
            assert not db.exists() and not db.with_name(db.name + ".wal").exists()


def test_serve_and_dashboard_refuse_a_busy_port_or_a_file_that_is_no_ledger_before_starting(tmp_path, capsys):
    """#31: `serve` on a taken port left an empty ledger file behind; `dashboard` announced itself on a taken
    port, or on a file that is no ledger, and failed afterwards in the browser."""
    ledger = tmp_path / "ledger.duckdb"
    assert main(["ingest", str(ROOT / "sample_traces"), "--db", str(ledger)]) == 0
    capsys.readouterr()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = str(taken.getsockname()[1])
        never = tmp_path / "never.duckdb"
        assert main(["serve", "--port", busy, "--grpc-port", "0", "--db", str(never)]) == 2
        assert f"cannot listen on 127.0.0.1:{busy}" in capsys.readouterr().err
        assert not never.exists() and not never.with_name(never.name + ".wal").exists()
        assert main(["dashboard", "--port", busy, "--db", str(ledger)]) == 2
        out = capsys.readouterr()
        assert f"cannot listen on 127.0.0.1:{busy}" in out.err and "dashboard on" not in out.out
    assert main(["dashboard", "--port", str(free_port()), "--db", str(ROOT / "pyproject.toml")]) == 2
    out = capsys.readouterr()
    assert "pyproject.toml" in out.err and "not a valid DuckDB database" in out.err and "dashboard on" not in out.out
