"""The cost-anomaly flag as a metric rule (per run, as spans arrive) and in the long tail (issue 16).

The seeds' a93 (38x the median, $9.93 after a hundred ordinary triage tasks) fires the rule once,
its ordinary neighbours never; no run of an 800-run simulate workload fires it; the Long tail page
says which run is the anomaly. The same baseline as ``report``'s cost anomalies (one definition).
"""

from __future__ import annotations

from decimal import Decimal

from collector.demo.samples import T0
from collector.demo.simulate import simulate
from collector.otlp import read_file
from ledger import queries as q
from ledger.budgets import Governor, Rule, Scope, add_rule, new_rule_id
from ledger.budgets.evaluate import evaluate_runs
from ledger.ingest import ingest
from ledger.store import open_ledger
from tests.conftest import SAMPLES
from tests.dashboard.test_pages import app  # noqa: F401  (a fixture)
from tests.ledger.test_compare import harness_into
from tests.ledger.test_compare_anomaly import _ordinary_tasks

from .conftest import NOON_ISH


def _rule(con) -> Rule:  # type: ignore[no-untyped-def]
    return add_rule(con, Rule(new_rule_id(), "runaway", Scope(), "run", Decimal(5), "cost_anomaly"))


def test_the_seeds_a93_fires_the_rule_once_and_its_neighbours_never(ledger, load) -> None:  # type: ignore[no-untyped-def]
    rule = _rule(ledger)
    governor = Governor(clock=lambda: NOON_ISH)
    try:
        assert governor.after_ingest(ledger, ingest(ledger, _ordinary_tasks(100))) == []
        fired = governor.after_ingest(ledger, ingest(ledger, read_file(SAMPLES / "long_tail.json")))
    finally:
        governor.close()
    a93 = ledger.execute("SELECT trace_id FROM runs WHERE conversation_id = 'conv-a93'").fetchone()[0]
    assert [(e.state_key, e.level) for e in fired] == [(a93, "exceeded")]
    (event,) = fired
    (flag,) = q.records(ledger, q.cost_anomalies())  # the report's figure for the same run
    assert event.value == Decimal(str(round(flag["times_baseline_p95"], 6)))
    assert event.figures["figures"]["baseline_runs"] == 102
    assert "runaway" in event.text() and "EXCEEDED: 39.07x of 5.00x" in event.text()
    assert rule.describe() == "runaway (cost_anomaly >= 5.00x, global, run)"


def test_no_run_of_a_simulate_workload_fires_it(ledger) -> None:  # type: ignore[no-untyped-def]
    rule = _rule(ledger)
    with harness_into(ledger) as (observer, flush):
        simulate(800, seed=5, observer=observer, end_ns=T0, checkpoint=flush)
    ids = [t for (t,) in ledger.execute("SELECT trace_id FROM runs").fetchall()]
    evaluations = evaluate_runs(ledger, rule, ids, NOON_ISH)
    assert len(evaluations) == 800 and {e.level for e in evaluations} == {"ok"}
    judged = [e.value for e in evaluations if e.value is not None]
    assert len(judged) > 700  # every run after its agent's first 20 has a baseline
    (top,) = q.records(ledger, q.cost_anomalies(factor=1.0, limit=1))  # the same baselines as the report's
    assert max(judged) == Decimal(str(round(top["times_baseline_p95"], 6)))


def test_the_long_tail_page_names_the_anomaly(app, tmp_path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    db = tmp_path / "tail.duckdb"
    con = open_ledger(db)
    ingest(con, _ordinary_tasks(100))
    ingest(con, read_file(SAMPLES / "long_tail.json"))
    con.close()
    at = app(db, "long_tail")
    table = next(df.value for df in at.dataframe if "why" in df.value.columns)
    flagged = table[table["why"].str.startswith("cost anomaly: 39.1× its agent's recent p95")]
    assert flagged["usd_total"].round(2).tolist() == [9.93]
    assert not table[table["usd_total"] < 1]["why"].str.contains("anomaly").any()
