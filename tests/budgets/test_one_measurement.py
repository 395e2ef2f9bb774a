"""One measurement: a daily budget in Europe/Paris shows the same value and level in the
governor's alert, in ``turnledger budget list`` and on the dashboard's budgets page —
the calendar day in the rule's time zone, not the UTC day.

The CLI and the dashboard read the wall clock, so the charges are placed relative to
now: one in both current days, one in the hours where the Paris day and the UTC day
differ, so the two days give different figures whatever the time of day. (A run that
straddles a midnight, in Paris or UTC, within its few seconds would see a rollover.)
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from streamlit.testing.v1 import AppTest

from collector.cli import main
from ledger.budgets import Governor, Rule, Scope, add_rule, evaluate, new_rule_id, window_for
from ledger.budgets.alerts import format_value
from ledger.ingest import ingest
from ledger.store import open_ledger

from .conftest import spend_spans

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"


def _dashboard_rows(db: Path, monkeypatch) -> dict[str, dict[str, object]]:
    monkeypatch.delenv("TURNLEDGER_SERVER", raising=False)
    monkeypatch.setenv("TURNLEDGER_DB", str(db))
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.switch_page("views/budgets.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    (table,) = [df.value for df in at.dataframe if "burn_rate" in df.value.columns]
    return {row["name"]: row for row in table.to_dict("records")}


def test_a_paris_daily_budget_shows_one_value_and_level_everywhere(tmp_path, capsys, monkeypatch):
    db = tmp_path / "paris.duckdb"
    paris = Rule(new_rule_id(), "paris-daily", Scope(), "day", Decimal("1.00"), timezone="Europe/Paris")
    utc = Rule(new_rule_id(), "utc-daily", Scope(), "day", Decimal("1.00"))
    now = datetime.now(UTC)
    boundary = max(window_for(paris, now).start, window_for(utc, now).start)  # the later midnight
    con = open_ledger(db)
    add_rule(con, paris)
    ingest(
        con,
        spend_spans("0.85", at=max(now - timedelta(minutes=1), boundary))  # in both current days
        + spend_spans("0.20", at=boundary - timedelta(minutes=30)),  # in one of them only
    )
    assert evaluate(con, paris, now).value != evaluate(con, utc, now).value  # the days really differ
    governor = Governor()
    try:
        *_, alert = governor.sweep(con)  # from ok: a warn, and an exceeded when past the limit
    finally:
        governor.close()
    con.close()
    governor_figure = (format_value(paris, alert.value), alert.level)

    assert main(["budget", "list", "--json", "--db", str(db)]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    cli_figure = (row["value"], row["level"])

    shown = _dashboard_rows(db, monkeypatch)["paris-daily"]
    assert (shown["value"], shown["level"]) == governor_figure == cli_figure
