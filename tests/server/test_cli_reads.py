"""The read commands work on the file and through a running collector, with the same output.

``turnledger serve`` holds the DuckDB file (one writing process, no reader
beside it), so ``report``, ``context``, ``diff``, ``budget list`` and ``alerts`` read through its API with
``--server`` (or TURNLEDGER_SERVER); once it stops they read the file. What
they print on stdout must not depend on which; stderr says which was used.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from collector.cli import main
from collector.otlp import read_file
from ledger.budgets.service import add_budget
from ledger.ingest import ingest
from ledger.store import open_ledger
from tests.dashboard.conftest import CACHE_BREAK, FIVE_TURN
from tests.dashboard.scenarios import cache_break_run

from .conftest import free_port, start_cli, wait_healthy

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def ledger_file(tmp_path: Path) -> Path:
    """The sample traces plus a run whose cache breaks (captured payloads on every turn)."""
    db = tmp_path / "ledger.duckdb"
    con = open_ledger(db)
    for file in sorted((ROOT / "sample_traces").glob("*.json")):
        ingest(con, read_file(file))
    ingest(con, cache_break_run())
    # A rule the runs already broke, so `budget list` has a figure and a level to show.
    add_budget(con, {"name": "triage-run", "limit": "1", "scope": "agent=ticket-triage", "window": "run"})
    con.close()
    return db


def tl(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


READS = [
    ("report",),
    ("report", "--json", "--top", "3", "--tenant", "acme"),
    ("context", FIVE_TURN[:12]),
    ("context", FIVE_TURN, "--turn", "2"),
    ("diff", CACHE_BREAK, "--turns", "2", "3"),
    ("diff", CACHE_BREAK[:10], "--turns", "2", "1", "--summary"),
    ("budget", "list"),
    ("alerts", "--json"),
]


def test_reads_through_the_server_print_what_the_file_gives_after_it_stops(ledger_file, capsys, monkeypatch):
    monkeypatch.delenv("TURNLEDGER_SERVER", raising=False)
    monkeypatch.delenv("TURNLEDGER_TOKEN", raising=False)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_cli(
        "serve", "--port", str(port), "--grpc-port", "0", "--db", str(ledger_file), "--sweep-interval", "3600"
    )
    try:
        wait_healthy(url)
        # The file is held: the error says exactly how to read through the server instead.
        code, out, err = tl(capsys, "report", "--db", str(ledger_file))
        assert code == 2 and out == ""
        assert "another process holds it" in err and "--server URL" in err, err

        served = {}
        for argv in READS:
            code, out, err = tl(capsys, *argv, "--server", url)
            assert code == 0, (argv, err)
            assert f"reading server {url}" in err
            served[argv] = out
        monkeypatch.setenv("TURNLEDGER_SERVER", url)  # the environment variable does the same
        assert tl(capsys, "report")[1] == served[("report",)]
        monkeypatch.delenv("TURNLEDGER_SERVER")
    finally:
        proc.terminate()
        proc.wait(60)

    for argv in READS:
        code, out, err = tl(capsys, *argv, "--db", str(ledger_file))
        assert code == 0 and "reading file" in err, (argv, err)
        assert out == served[argv], argv
    # The outputs say something: the figures and payloads of the runs asked for.
    report = json.loads(served[READS[1]])
    assert report["runs"] > 0 and len(report["long_tail"]) <= 3
    assert json.loads(served[READS[3]])["request"]["model"] == "claude-opus-5"
    # The cache verdicts, in the run explorer's words (ledger.cache_diagnosis).
    assert "cache: written (wrote 6,100 tokens to the cache)" in served[READS[2]]
    assert "turn 3 cache: broken (broken by system[0].text" in served[READS[4]]
    assert "First change inside the stable prefix between turn 2 and turn 3" in served[READS[4]]
    assert "where:   system" in served[READS[4]] and "@@" in served[READS[4]]  # the finding, then the full diff
    assert served[READS[5]].startswith("Turn 2 kept turn 1's prefix byte-for-byte") and "@@" not in served[READS[5]]


def test_diff_refuses_one_turn_twice_and_a_turn_out_of_range(ledger_file, capsys):
    code, _, err = tl(capsys, "diff", CACHE_BREAK, "--turns", "2", "2", "--db", str(ledger_file))
    assert code == 2 and "two different turns" in err
    code, _, err = tl(capsys, "diff", CACHE_BREAK, "--turns", "1", "99", "--db", str(ledger_file))
    assert code == 2 and "turn 99 is out of range" in err


def test_a_read_command_hands_the_file_back_when_it_ends(ledger_file, tmp_path, capsys):
    """The file source closes the ledger when the command ends: a writer can open it right after."""
    copy = tmp_path / "copy.duckdb"
    shutil.copy(ledger_file, copy)
    assert tl(capsys, "report", "--db", str(copy))[0] == 0
    open_ledger(copy).close()  # would raise on the lock if the read had kept the file open
