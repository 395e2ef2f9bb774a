"""``turnledger budget edit``: limit, warn fraction and the on/off switch, on the file and through a server."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from collector.cli.serve import build_server
from collector.receiver import ServerConfig
from ledger.budgets import Governor
from ledger.ingest import ingest
from ledger.store import open_ledger

from .conftest import spend_spans
from .test_budget_cli import tl


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "edit.duckdb")
    con = open_ledger(path)
    ingest(con, spend_spans("0.85", at=datetime.now(UTC)))
    con.close()
    return path


def _row(capsys, *where: str) -> dict:
    code, out, _ = tl(capsys, "budget", "list", "--json", *where)
    assert code == 0
    (row,) = json.loads(out)
    return row


def test_edit_moves_the_level_with_the_limit_and_disable_stops_enforcement(db, capsys):
    tl(capsys, "budget", "add", "acme-daily", "--scope", "tenant=acme", "--limit", "1.00", "--db", db)
    assert _row(capsys, "--db", db)["level"] == "warn"  # $0.85 of $1.00, warn at 80%

    code, out, _ = tl(capsys, "budget", "edit", "acme-daily", "--limit", "0.50", "--db", db)
    assert code == 0 and out.startswith("edited b_") and "spend >= $0.5" in out
    row = _row(capsys, "--db", db)
    assert (row["limit"], row["value"], row["level"]) == ("$0.50", "$0.85", "exceeded")
    code, out, _ = tl(capsys, "budget", "check", "--tenant", "acme", "--db", db)
    assert code == 1 and out.startswith("REFUSED")

    tl(capsys, "budget", "edit", "acme-daily", "--limit", "2", "--warn-at", "0.4", "--db", db)
    row = _row(capsys, "--db", db)
    assert (row["limit"], row["soft"], row["level"]) == ("$2.00", 0.4, "warn")  # $0.85 >= 40% of $2

    code, out, _ = tl(capsys, "budget", "edit", "acme-daily", "--limit", "0.10", "--disable", "--db", db)
    assert code == 0 and "disabled" in out
    assert _row(capsys, "--db", db)["level"] == "disabled"  # kept and listed, not judged
    code, out, _ = tl(capsys, "budget", "check", "--tenant", "acme", "--db", db)
    assert code == 0 and "no budget covers this call" in out  # a disabled rule is not enforced
    tl(capsys, "budget", "edit", "acme-daily", "--enable", "--db", db)
    assert _row(capsys, "--db", db)["level"] == "exceeded"


def test_edit_refuses_bad_values_naming_them(db, capsys):
    tl(capsys, "budget", "add", "cache", "--metric", "cache_hit_rate", "--limit", "0.7", "--db", db)
    code, _, err = tl(capsys, "budget", "edit", "cache", "--limit", "70", "--db", db)
    assert code == 2 and "a rate is between 0 and 1" in err
    code, _, err = tl(capsys, "budget", "edit", "cache", "--warn-at", "1.5", "--db", db)
    assert code == 2 and "soft fraction 1.5" in err
    code, _, err = tl(capsys, "budget", "edit", "cache", "--db", db)
    assert code == 2 and "nothing to edit" in err
    code, _, err = tl(capsys, "budget", "edit", "nope", "--limit", "1", "--db", db)
    assert code == 2 and "no budget with id or name 'nope'" in err
    assert _row(capsys, "--db", db)["limit"] == "70.0%"  # unchanged, in its unit


def test_a_disabled_rule_fires_no_alert(db, capsys):
    tl(capsys, "budget", "add", "tiny", "--limit", "0.01", "--db", db)
    tl(capsys, "budget", "edit", "tiny", "--disable", "--db", db)
    code, out, _ = tl(capsys, "budget", "sweep", "--wait", "0", "--db", db)
    assert code == 0 and out.strip() == "0 alert(s)"
    tl(capsys, "budget", "edit", "tiny", "--enable", "--db", db)
    code, out, _ = tl(capsys, "budget", "sweep", "--wait", "0", "--db", db)
    assert "EXCEEDED" in out and "2 alert(s)" in out  # warn and exceeded, crossed at once


def test_edit_through_a_running_server(tmp_path, capsys):
    server = build_server(ServerConfig(port=0, db=tmp_path / "ledger.duckdb"), governor=Governor(), sweep_interval=0)
    server.start()
    try:
        url = server.url
        tl(capsys, "budget", "add", "acme-daily", "--scope", "tenant=acme", "--limit", "1.00", "--server", url)
        code, out, err = tl(capsys, "budget", "edit", "acme-daily", "--limit", "3", "--disable", "--server", url)
        assert code == 0 and out.startswith("edited b_") and f"turnledger: writing server {url}" in err
        row = _row(capsys, "--server", url)
        assert (row["limit"], row["level"]) == ("$3.00", "disabled")
        code, _, err = tl(capsys, "budget", "edit", "acme-daily", "--limit", "x", "--server", url)
        assert code == 2 and "limit='x' is not a number" in err
    finally:
        server.stop()
