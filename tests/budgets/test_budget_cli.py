"""``turnledger budget ...`` and ``turnledger alerts`` against a real ledger file."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from collector.cli import main
from ledger.budgets import Governor, ManualClock
from ledger.ingest import ingest
from ledger.store import open_ledger

from .conftest import spend_spans


def tl(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "cli.duckdb")


def test_add_list_show_rm(db, capsys, receiver):
    code, out, _ = tl(capsys, "budget", "add", "acme-daily", "--scope", "tenant=acme", "--limit", "1.00",
                      "--slack", receiver.url + "/services/T0/B0/secret", "--db", db)  # fmt: skip
    assert code == 0 and out.startswith("added b_") and "acme-daily (spend >= $1, tenant=acme, day)" in out
    con = open_ledger(db)
    now = datetime.now(UTC)
    ingest(con, spend_spans("0.85", at=now) + spend_spans("0.05", at=now, tenant="globex"))
    con.close()

    code, out, _ = tl(capsys, "budget", "list", "--db", db)
    assert code == 0 and "acme-daily" in out and "$0.85" in out and "warn" in out
    code, out, _ = tl(capsys, "budget", "list", "--json", "--db", db)
    (row,) = json.loads(out)
    assert (row["name"], row["value"], row["level"], row["limit"]) == ("acme-daily", "$0.85", "warn", "$1.00")

    code, out, _ = tl(capsys, "budget", "show", "acme-daily", "--db", db)
    assert code == 0 and "-> warn" in out and "projection:" in out
    assert "secret" not in out and "slack:http://127.0.0.1" in out  # the webhook's secret path is never printed
    code, out, _ = tl(capsys, "budget", "show", "acme-daily", "--json", "--db", db)
    doc = json.loads(out)
    assert doc["now"]["value"] == "0.85" and doc["now"]["level"] == "warn"

    code, out, _ = tl(capsys, "budget", "check", "--tenant", "acme", "--db", db)
    assert code == 0 and out.startswith("allowed: within budget")

    code, out, _ = tl(capsys, "budget", "rm", "acme-daily", "--db", db)
    assert code == 0 and out.startswith("removed b_")
    code, _, err = tl(capsys, "budget", "show", "acme-daily", "--db", db)
    assert code == 2 and "no budget with id or name 'acme-daily'" in err


def test_bad_input_is_one_line_naming_the_value(db, capsys):
    code, _, err = tl(capsys, "budget", "add", "x", "--limit", "lots", "--db", db)
    assert code == 2 and err.strip() == "turnledger budget: limit='lots' is not a number"
    code, _, err = tl(capsys, "budget", "add", "x", "--limit", "1", "--scope", "team=a", "--db", db)
    assert code == 2 and "'team'" in err
    tl(capsys, "budget", "add", "x", "--limit", "1", "--db", db)
    code, _, err = tl(capsys, "budget", "add", "x", "--limit", "2", "--db", db)
    assert code == 2 and "already exists" in err


def test_check_exits_1_when_refused_and_alerts_lists_events(db, capsys, receiver):
    tl(capsys, "budget", "add", "acme-daily", "--scope", "tenant=acme", "--limit", "1", "--webhook", receiver.url + "/j",
       "--db", db)  # fmt: skip
    con = open_ledger(db)
    clock = ManualClock(datetime.now(UTC))
    governor = Governor(clock=clock)
    governor.after_ingest(con, ingest(con, spend_spans("1.20", at=clock())))
    assert governor.join(10)
    governor.close()
    con.close()

    code, out, _ = tl(capsys, "budget", "check", "--tenant", "acme", "--db", db)
    assert code == 1 and out.startswith("REFUSED: budget 'acme-daily'")
    code, out, _ = tl(capsys, "budget", "check", "--tenant", "acme", "--json", "--db", db)
    assert code == 1 and json.loads(out)["rule"]["name"] == "acme-daily"

    code, out, _ = tl(capsys, "alerts", "--deliveries", "--db", db)
    lines = out.splitlines()
    assert code == 0 and "exceeded acme-daily" in lines[0] and "delivered 1/1" in lines[0]
    assert "warn     acme-daily" in lines[2] and "#1" in lines[1] and "delivered" in lines[1]
    code, out, _ = tl(capsys, "alerts", "--level", "warn", "--json", "--db", db)
    (warn,) = json.loads(out)
    assert warn["budget"] == "acme-daily" and warn["figures"]["value"] == "1.2"


def test_sweep_and_metric_rules_from_the_cli(db, capsys):
    tl(capsys, "budget", "add", "cache", "--metric", "cache_hit_rate", "--limit", "0.7", "--window", "rolling_day",
       "--db", db)  # fmt: skip
    con = open_ledger(db)
    ingest(con, spend_spans("0.10", at=datetime.now(UTC), root=True))  # uncached input only: hit rate 0
    con.close()
    code, out, _ = tl(capsys, "budget", "sweep", "--db", db)
    assert code == 0 and "EXCEEDED: 0.0%, floor 70.0%" in out and "1 alert(s)" in out
    code, out, _ = tl(capsys, "budget", "sweep", "--db", db)
    assert "0 alert(s)" in out  # state survives between processes: no duplicate
