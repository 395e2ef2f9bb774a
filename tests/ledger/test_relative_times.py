"""A time a user gives may be relative to now (#31): ``24h``, ``3 days ago``, ``now-90m``, ``today``,
``yesterday`` — read by one function for the CLI and the API; anything near it but not it is refused."""

from __future__ import annotations

from datetime import datetime

import pytest

from collector.cli import main
from ledger.queries import parse_time

NOW = datetime(2026, 12, 7, 15, 4, 5)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("24h", datetime(2026, 12, 6, 15, 4, 5)),
        ("7d", datetime(2026, 11, 30, 15, 4, 5)),
        ("90m", datetime(2026, 12, 7, 13, 34, 5)),
        ("30s", datetime(2026, 12, 7, 15, 3, 35)),
        ("2w", datetime(2026, 11, 23, 15, 4, 5)),
        ("3 days ago", datetime(2026, 12, 4, 15, 4, 5)),
        ("1 hour ago", datetime(2026, 12, 7, 14, 4, 5)),
        ("10 minutes", datetime(2026, 12, 7, 14, 54, 5)),
        ("now-24h", datetime(2026, 12, 6, 15, 4, 5)),
        (" NOW - 1H ", datetime(2026, 12, 7, 14, 4, 5)),
        ("now", NOW),
        ("today", datetime(2026, 12, 7)),
        ("yesterday", datetime(2026, 12, 6)),
        ("9999999w", datetime.min),  # before the calendar: its first instant, clamped later like any bound
        ("2026-12-01", datetime(2026, 12, 1)),  # ISO still first
    ],
)
def test_relative_times_count_back_from_now(text, expected):
    assert parse_time(text, now=NOW) == expected


@pytest.mark.parametrize("text", ["5", "Mon", "tomorrow", "now+1h", "-24h", "1y", "24 h ago ago", "12345678h", ""])
def test_near_misses_are_refused_naming_what_is_accepted(text):
    with pytest.raises(ValueError, match="3 days ago"):
        parse_time(text, now=NOW)


def test_the_cli_takes_a_relative_since_and_names_a_bad_one(tmp_path, capsys):
    db = tmp_path / "ledger.duckdb"
    assert main(["ingest", "sample_traces", "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["report", "--json", "--since", "2000000d", "--db", str(db)]) == 0  # every sample run
    everything = capsys.readouterr().out
    assert main(["report", "--json", "--db", str(db)]) == 0
    assert capsys.readouterr().out == everything
    with pytest.raises(SystemExit) as exit_:
        main(["report", "--since", "Mon", "--db", str(db)])
    assert exit_.value.code == 2 and "'Mon'" in capsys.readouterr().err
