"""Issue 15, item 7: sampling and retention drop detail, never money.

One 1,000-run ``turnledger simulate`` (seed 7, through the real harness and the
in-process exporter, content captured) is copied: one copy stays unsampled, the
others are sampled at 10% of ordinary successful runs, or pruned.
"""

from __future__ import annotations

import json
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from collector.cli import main
from collector.otlp import read_file
from ledger import queries as q
from ledger.content import load_turn
from ledger.ingest import ingest
from ledger.retention.sampling import Sampler, SamplingPolicy, apply_sampling, kept_by_hash
from ledger.runs import refresh_runs
from ledger.store import open_ledger

RUNS = 1_000
SHARE = 0.1
_MONEY = ("runs", "total_usd", "cost_per_run", "successful_runs", "cost_per_successful_run", "where_the_money_went")


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sim") / "unsampled.duckdb"
    assert main(["simulate", "--runs", str(RUNS), "--seed", "7", "--db", str(path), "--quiet"]) == 0
    return path


def _copy(src: Path, dst: Path) -> Path:
    shutil.copy(src, dst)
    return dst


def _detail(con) -> dict[str, tuple[str, int]]:  # type: ignore[no-untyped-def]
    """Per run: its spans' attributes and events as stored, and its captured contexts."""
    rows = con.execute(
        """SELECT r.trace_id,
                  md5(string_agg(s.span_id || s.attributes::VARCHAR || s.events::VARCHAR, '|' ORDER BY s.span_id)),
                  (SELECT count(*) FROM contexts x WHERE x.trace_id = r.trace_id)
           FROM runs r JOIN spans s USING (trace_id) GROUP BY r.trace_id"""
    ).fetchall()
    return {t: (h, n) for t, h, n in rows}


def _turns(con, traces) -> dict[tuple[str, str], object]:  # type: ignore[no-untyped-def]
    """Every captured call of these runs, rebuilt (request and response) from the content store."""
    calls = con.execute("SELECT trace_id, span_id FROM contexts WHERE trace_id IN (SELECT unnest(?))", [traces])
    return {(t, s): load_turn(con, t, s) for t, s in calls.fetchall()}


def _report(path: Path, capsys: pytest.CaptureFixture[str]) -> dict:  # type: ignore[type-arg]
    capsys.readouterr()
    assert main(["report", "--json", "--db", str(path)]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def _runs_rows(con) -> list[tuple]:  # type: ignore[no-untyped-def,type-arg]
    return con.execute("SELECT * FROM runs ORDER BY trace_id").fetchall()  # type: ignore[no-any-return]


def test_sampling_keeps_every_failed_runs_detail_a_tenth_of_the_rest_and_every_cent(simulated, tmp_path, capsys):
    unsampled = open_ledger(simulated, read_only=True)
    before, runs_before = _detail(unsampled), _runs_rows(unsampled)
    health_before = [q.records(unsampled, b()) for b in (q.tool_health, q.run_latency, q.error_causes)]
    some = sorted(t for t, (_, contexts) in before.items() if contexts)[:60]
    turns_before = _turns(unsampled, some)
    unsampled.close()
    path = _copy(simulated, tmp_path / "sampled.duckdb")
    con = open_ledger(path)
    (latest,) = con.execute("SELECT max(ended_at) FROM runs").fetchone()
    policy = SamplingPolicy(SHARE, grace=timedelta(hours=1))
    report = apply_sampling(con, policy, latest.replace(tzinfo=UTC) + timedelta(minutes=59))
    assert report.decided < RUNS  # the runs that ended within the grace period wait
    report = apply_sampling(con, policy, latest.replace(tzinfo=UTC) + timedelta(hours=2))
    decisions = dict(con.execute("SELECT trace_id, reason FROM sampling_decisions").fetchall())
    assert (
        len(decisions) == RUNS
        and apply_sampling(con, policy, latest.replace(tzinfo=UTC) + timedelta(days=9)).decided == 0
    )

    after = _detail(con)
    due = {t for t, why in decisions.items() if why not in ("sampled in", "sampled out")}
    failed = {
        t for (t,) in con.execute("SELECT trace_id FROM runs WHERE stop_cause IS DISTINCT FROM 'completed'").fetchall()
    }
    assert failed <= due and len(failed) > 300  # every run that did not complete is kept whole
    assert all(after[t] == before[t] for t in due)
    ordinary = set(decisions) - due
    kept = {t for t in ordinary if after[t] == before[t]}
    assert kept == {t for t in ordinary if kept_by_hash(t, SHARE)}  # the hash decides, so every collector agrees
    assert 0.05 * len(ordinary) <= len(kept) <= 0.15 * len(ordinary), (len(kept), len(ordinary))
    for t in ordinary - kept:
        assert after[t][1] == 0 and after[t][0] != before[t][0]  # content gone, spans thinned
    dropped_blocks = "SELECT count(*) FROM run_blocks WHERE trace_id IN (SELECT unnest(?))"
    assert con.execute(dropped_blocks, [sorted(ordinary - kept)]).fetchone() == (0,)  # a dropped run's own blocks
    # The blocks a kept run shares with dropped ones survive: its every turn rebuilds exactly.
    still_kept = [t for t in some if t in due or t in kept]
    assert still_kept and _turns(con, still_kept) == {k: v for k, v in turns_before.items() if k[0] in still_kept}

    assert _runs_rows(con) == runs_before  # every run row, its cost included, exactly
    assert [q.records(con, b()) for b in (q.tool_health, q.run_latency, q.error_causes)] == health_before
    out = sorted(ordinary - kept)[:5]
    refresh_runs(con, out)  # a late span rebuilds a sampled-out run: from its skeleton, to the same row
    assert _runs_rows(con) == runs_before
    con.close()
    sampled_report, full_report = _report(path, capsys), _report(simulated, capsys)
    assert {k: sampled_report[k] for k in _MONEY} == {k: full_report[k] for k in _MONEY}


def test_prune_shrinks_the_file_and_leaves_the_money_unchanged(simulated, tmp_path, capsys):
    path = _copy(simulated, tmp_path / "pruned.duckdb")
    size = path.stat().st_size
    before = _report(path, capsys)
    capsys.readouterr()
    assert main(["prune", "--older-than", "0d", "--db", str(path)]) == 0
    out, err = capsys.readouterr()
    assert f"pruned {RUNS:,} runs" in out and f"dropping detail: {RUNS:,}/{RUNS:,} runs" in err
    assert path.stat().st_size < size * 0.8, (size, path.stat().st_size)
    after = _report(path, capsys)
    assert {k: after[k] for k in _MONEY} == {k: before[k] for k in _MONEY}
    con = open_ledger(path, read_only=True)
    assert con.execute("SELECT count(*) FROM contexts").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM content_blocks").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM run_blocks").fetchone() == (0,)
    con.close()


def test_the_servers_sampler_decides_runs_on_its_own_thread(tmp_path):
    """``CollectorServer`` starts a ``Sampler`` on the writer's connection; here on a ledger of the harness scenarios."""
    con = open_ledger(tmp_path / "ledger.duckdb")
    scenarios = sorted((Path(__file__).resolve().parents[2] / "sample_traces" / "harness").glob("*.json"))
    for path in scenarios:
        ingest(con, read_file(path))
    sampler = Sampler(SamplingPolicy(0.0, grace=timedelta(0)), clock=lambda: datetime(2030, 1, 1, tzinfo=UTC))
    sampler.start(con, interval=0.01)
    deadline = time.monotonic() + 60  # a hang guard only
    while time.monotonic() < deadline and con.execute("SELECT count(*) FROM sampling_decisions").fetchone() != (
        len(scenarios),
    ):
        time.sleep(0.02)
    sampler.close()
    reasons = dict(con.execute("SELECT reason, count(*) FROM sampling_decisions GROUP BY reason").fetchall())
    assert sum(reasons.values()) == len(scenarios) and "sampled in" not in reasons  # a share of 0 keeps no ordinary run
    con.close()
