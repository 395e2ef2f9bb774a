"""Cost anomalies: a run far above its agent's recent p95 is flagged, with no dollar threshold.

The seeds' long tail: tasks a91 and a92 cost $0.26 and $0.21, a93 ran 40 turns
into the step cap and cost $9.93, "38x the $0.26 next to it" — one task in a
hundred. Here a93 follows a hundred ordinary tasks of the same agent.
"""

from __future__ import annotations

import random

import pytest

from collector.demo.samples import MS, T0, Trace
from collector.demo.simulate import simulate
from ledger import queries as q
from ledger.ingest import ingest
from ledger.report import build_report, format_report
from tests.ledger.test_compare import harness_into


def _ordinary_tasks(n: int) -> list:  # type: ignore[type-arg]
    """``n`` triage tasks like a91 and a92: 5 or 6 turns, 30-45k input tokens in all, before the seeds' three."""
    rng = random.Random(3)
    spans = []
    for i in range(n):
        t = Trace(f"ordinary-{i}", agent="ticket-triage", tenant="globex", start=T0 - (n - i) * 3_600_000 * MS)
        turns = rng.choice((5, 6))
        for turn in range(turns):
            t.chat("claude-opus-5", (rng.randint(5_000, 7_500), 0, 0, rng.randint(250, 400)), finish="end_turn")
            if turn < turns - 1:
                t.tool("get_shipping_status", {"tracking": str(i)}, "In transit.")
        spans += t.finish("completed")
    return spans


def _anomalies(ledger) -> list[dict]:  # type: ignore[no-untyped-def,type-arg]
    return build_report(ledger)["cost_anomalies"]["runs"]


def test_the_seeds_a93_is_flagged_and_its_neighbours_are_not(ledger, load) -> None:  # type: ignore[no-untyped-def]
    ingest(ledger, _ordinary_tasks(100))
    load("long_tail")
    a93 = ledger.execute("SELECT trace_id FROM runs WHERE conversation_id = 'conv-a93'").fetchone()[0]
    flagged = _anomalies(ledger)
    assert [r["trace_id"] for r in flagged] == [a93]
    (row,) = flagged
    assert row["usd_total"] == pytest.approx(9.93, abs=0.005)
    assert row["baseline_runs"] == 102  # every earlier run of the agent: fewer than the window
    assert row["times_baseline_p95"] > 30  # 38x the median, and the ordinary p95 is near the median
    report = build_report(ledger)
    assert report["cost_anomalies"]["factor"] == q.ANOMALY_FACTOR
    assert f"{a93}     $9.9300  39.1x p95 $0.2542  ticket-triage" in format_report(report)


def test_without_a_baseline_nothing_is_called_an_anomaly(ledger, load) -> None:  # type: ignore[no-untyped-def]
    load("long_tail")  # a93 after only two runs: a p95 of two runs says nothing
    assert _anomalies(ledger) == []
    rows = q.records(ledger, q.cost_anomalies(min_baseline=2))
    assert [r["stop_cause"] for r in rows] == ["max_steps"]  # with the minimum lowered, it is a93


def test_no_ordinary_run_of_a_simulate_workload_is_flagged(ledger) -> None:  # type: ignore[no-untyped-def]
    with harness_into(ledger) as (observer, flush):
        simulate(800, seed=5, observer=observer, end_ns=T0, checkpoint=flush)
    assert q.records(ledger, q.time_bounds())[0]["runs"] == 800
    assert _anomalies(ledger) == []
    # The long tail is there (research runs read up to 40 pages), only never 5x the recent p95.
    spread = q.records(ledger, q.cost_anomalies(factor=1.0, limit=1))
    assert spread and 1.0 < spread[0]["times_baseline_p95"] < q.ANOMALY_FACTOR


def test_the_parameters_are_checked() -> None:
    with pytest.raises(ValueError, match="window=0"):
        q.cost_anomalies(window=0)
    with pytest.raises(ValueError, match="min_baseline=300"):
        q.cost_anomalies(window=200, min_baseline=300)
    with pytest.raises(ValueError, match="factor=-1"):
        q.cost_anomalies(factor=-1)
