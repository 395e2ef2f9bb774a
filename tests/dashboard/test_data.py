"""Where the dashboard reads from (file or server), and how it is started."""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest

from collector.cli import dashboard as dashboard_command
from collector.client import ServerSource
from dashboard import launch as cli
from dashboard.data import parse_app_args
from ledger import queries as q
from ledger.errors import TurnledgerError
from ledger.sources import FILE_IDLE_CLOSE_S, LAKE_IDLE_CLOSE_S, FileSource, source_spec

from .conftest import FIVE_TURN


def test_file_source_returns_the_ledgers_rows(sample_db, rows):
    source = FileSource(sample_db)
    f = q.Filters(tenant="acme")
    pd.testing.assert_frame_equal(source.query(q.cost_per_run, f), rows(sample_db, q.cost_per_run(f)))
    pd.testing.assert_frame_equal(
        source.query(q.run_turns, trace_id=FIVE_TURN), rows(sample_db, q.run_turns(FIVE_TURN))
    )
    payload = source.context(FIVE_TURN, source.query(q.run_turns, trace_id=FIVE_TURN)["span_id"].iloc[0])
    assert payload is not None and payload["model"] == "claude-opus-5" and len(payload["messages"]) == 1


def test_file_source_hands_the_file_back_to_a_writer_when_idle(sample_db, tmp_path):
    # Queries share one read-only connection; once idle it is closed, so an ingest can write.
    import shutil
    import time

    from ledger.store import open_ledger

    copy = tmp_path / "copy.duckdb"
    shutil.copy(sample_db, copy)
    source = FileSource(copy, idle_close_s=0.2)
    source.query(q.cost_per_run, q.NO_FILTERS)
    time.sleep(0.6)
    open_ledger(copy).close()
    source.query(q.cost_per_run, q.NO_FILTERS)
    source.close()  # or at once, on request
    open_ledger(copy).close()


def test_unknown_query_and_missing_file_are_clear_errors(tmp_path):
    with pytest.raises(TurnledgerError, match="unknown query 'DROP TABLE runs'"):
        FileSource(tmp_path / "x.duckdb").query(_unregistered("DROP TABLE runs"))
    with pytest.raises(TurnledgerError, match="no ledger at"):
        FileSource(tmp_path / "missing.duckdb").query(q.cost_per_run, q.NO_FILTERS)


def _unregistered(name: str):  # type: ignore[no-untyped-def]
    """A builder-shaped function that was never registered with ``@query``."""

    def builder(f=None):  # type: ignore[no-untyped-def]
        return q.Query(name)

    builder.__name__ = name
    return builder


class FakeClient:
    """Stands in for collector.client.ServerClient: records what would go on the wire."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, object]]] = []

    def query(self, name: str, **params: object) -> pd.DataFrame:
        self.calls.append((name, params))
        return pd.DataFrame({"runs": [1]})

    def context(self, trace_id: str, span_id: str) -> dict[str, object] | None:
        return {"trace": trace_id, "span": span_id}


def test_server_source_sends_filters_and_builder_arguments_as_query_parameters():
    client = FakeClient()
    source = ServerSource("http://127.0.0.1:4318", client=client)
    f = q.Filters(since=datetime(2026, 9, 21, 14), tenant="acme", model="claude-opus-5")
    source.query(q.long_tail, f, limit=20)
    source.query(q.run_turns, None, trace_id="abc")
    source.query(q.find_runs, q.NO_FILTERS, trace_id=None, order="cost")
    assert client.calls == [
        ("long_tail", {"since": "2026-09-21T14:00:00", "tenant": "acme", "model": "claude-opus-5", "limit": 20}),
        ("run_turns", {"trace_id": "abc"}),
        ("find_runs", {"order": "cost"}),
    ]
    assert source.context("t", "s") == {"trace": "t", "span": "s"}
    with pytest.raises(TurnledgerError):
        source.query(_unregistered("not_a_query"))


def test_filter_params_are_absent_when_unset():
    assert q.NO_FILTERS.to_params() == {}
    assert q.Filters(agent_version="1.4.0").to_params() == {"agent_version": "1.4.0"}


def test_source_choice_server_first_then_file(monkeypatch, tmp_path):
    monkeypatch.delenv("TURNLEDGER_SERVER", raising=False)
    monkeypatch.setenv("TURNLEDGER_DB", str(tmp_path / "env.duckdb"))
    assert source_spec().location == str(tmp_path / "env.duckdb")
    assert source_spec(tmp_path / "arg.duckdb").location == str(tmp_path / "arg.duckdb")
    monkeypatch.setenv("TURNLEDGER_SERVER", "http://127.0.0.1:4318/")
    monkeypatch.setenv("TURNLEDGER_TOKEN", "t0k")
    spec = source_spec()
    assert (spec.kind, spec.location, spec.token) == ("server", "http://127.0.0.1:4318", "t0k")
    assert source_spec(tmp_path / "arg.duckdb").kind == "file"  # an explicit --db beats the environment
    assert source_spec(tmp_path / "arg.duckdb", "http://10.0.0.5:4318").location == "http://10.0.0.5:4318"
    assert parse_app_args(["--db", "x.duckdb", "--unknown"]).db == Path("x.duckdb")


def test_a_source_is_named_by_its_kind_and_a_lake_without_its_password(monkeypatch):
    """The status lines ("turnledger: reading …" / "writing …", the sidebar's "Reading from")."""
    monkeypatch.delenv("TURNLEDGER_SERVER", raising=False)
    lake = source_spec("ducklake:postgres:dbname=tl host=db.internal password=hunter2")
    assert lake.describe() == "lake ducklake:postgres:dbname=tl host=db.internal password=*** (read-only)"
    assert lake.describe(reading=False) == "lake ducklake:postgres:dbname=tl host=db.internal password=***"
    assert source_spec("t.duckdb").describe(reading=False) == "file t.duckdb"
    assert source_spec(None, "http://h:4318").describe(reading=False) == "server http://h:4318"
    # Read straight from storage: the dashboard's "Reading from" and the read commands' line.
    assert FileSource(lake.location).describe() == lake.describe()
    assert FileSource("t.duckdb").describe() == "file t.duckdb (read-only)"


def test_a_lake_read_and_a_file_read_each_take_their_own_idle_delay(tmp_path):
    """Which delay a source's shared connection is given: the file's (a writer may be waiting for the
    file), the lake's (no writer waits; reopening costs catalog reads), or the one the caller names."""
    chosen = {
        "file": FileSource(tmp_path / "t.duckdb")._shared.idle_close_s,
        "lake": FileSource("ducklake:postgres:dbname=tl")._shared.idle_close_s,
        "named": FileSource(tmp_path / "t.duckdb", idle_close_s=0.5)._shared.idle_close_s,
    }
    assert chosen == {"file": FILE_IDLE_CLOSE_S, "lake": LAKE_IDLE_CLOSE_S, "named": 0.5}


def test_streamlit_command_is_headless_local_and_passes_the_db(tmp_path):
    cmd = cli.streamlit_command(db=tmp_path / "l.duckdb", port=8765)
    assert cmd[1:4] == ["-m", "streamlit", "run"] and cmd[4] == str(cli.APP)
    assert "--server.headless=true" in cmd and "--server.port=8765" in cmd and "--server.address=127.0.0.1" in cmd
    assert cmd[-3:] == ["--", "--db", str((tmp_path / "l.duckdb").resolve())]
    assert "--" not in cli.streamlit_command(db=None, port=1)


def test_dashboard_command_is_registered_and_refuses_a_missing_ledger(tmp_path, monkeypatch):
    from collector.cli import main, parser

    monkeypatch.delenv("TURNLEDGER_SERVER", raising=False)
    assert "dashboard" in parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    with pytest.raises(TurnledgerError, match="no ledger at"):
        dashboard_command.cmd_dashboard(
            argparse.Namespace(
                db=tmp_path / "none.duckdb", server=None, port=1, address="127.0.0.1", headless=True, usage_stats=False
            )
        )
    assert main(["dashboard", "--db", str(tmp_path / "none.duckdb")]) == 2


def test_server_source_through_a_real_collector_equals_the_file(sample_db, tmp_path, rows):
    """The same named queries through ``turnledger serve``'s API give the file's rows."""
    import shutil

    from collector.receiver import CollectorServer, ServerConfig

    copy = tmp_path / "served.duckdb"
    shutil.copy(sample_db, copy)
    server = CollectorServer(ServerConfig(port=0, db=copy, token="s3cret")).start()
    try:
        source = ServerSource(server.url, "s3cret")
        f = q.Filters(tenant="acme")
        for builder, kwargs in [
            (q.cost_per_run, {}), (q.long_tail, {"limit": 5}), (q.find_runs, {"order": "cost", "min_usd": 0.01}),
            (q.loop_trip_runs, {}), (q.cost_histogram, {"bins_per_decade": 5}),
        ]:  # fmt: skip
            got = source.query(builder, f, **kwargs)
            want = rows(sample_db, builder(f, **kwargs))
            pd.testing.assert_frame_equal(got, want, check_dtype=False)
        turns = source.query(q.run_turns, trace_id=FIVE_TURN)
        assert turns["usd"].round(4).tolist() == [0.0427, 0.0149, 0.0123, 0.0150, 0.0147]
        assert source.context(FIVE_TURN, turns["span_id"].iloc[-1])["model"] == "claude-opus-5"  # type: ignore[index]
        assert source.context(FIVE_TURN, "0" * 16) is None
    finally:
        server.stop()


@pytest.mark.parametrize("command", [["dashboard"], ["up"]])
def test_dashboard_and_up_start_streamlit_headless_without_usage_stats_unless_asked(command, monkeypatch, tmp_path):
    """Without --headless, Streamlit used to stop at its first-run e-mail question in the terminal."""
    from collector.cli import parser

    started: list[list[str]] = []
    monkeypatch.setattr(dashboard_command.subprocess, "Popen", lambda cmd, **_: started.append(cmd))
    monkeypatch.setattr(cli.os, "execv", lambda _path, cmd: started.append(cmd))

    def streamlit(*flags: str) -> list[str]:
        a = parser().parse_args([*command, *flags])
        assert (a.headless, a.usage_stats) == ("--no-headless" not in flags, "--usage-stats" in flags)
        dashboard_command.start_dashboard(
            db=tmp_path / "l.duckdb", port=1, headless=a.headless, usage_stats=a.usage_stats
        )
        cli.main(started[-1][3:])  # what `python -m dashboard ...` runs
        return started[-1]

    cmd = streamlit()
    assert "--server.headless=true" in cmd and "--browser.gatherUsageStats=false" in cmd
    cmd = streamlit("--no-headless", "--usage-stats")
    assert "--server.headless=false" in cmd and "--browser.gatherUsageStats=true" in cmd
