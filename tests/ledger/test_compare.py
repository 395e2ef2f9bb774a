"""``turnledger compare``: a prompt rollout through the real harness, its OTel spans ingested, then compared.

The workload (``collector.demo.variants.rollout``): hr-v1 against hr-v2, whose
longer prompt costs about 1.6x per run and whose runs fail three times as
often (4% against 12%), both versions on matched traffic; two identical
versions; and ten runs per version, too few to call anything.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pytest

from collector.cli import main
from collector.cli.compare import DIMENSIONS
from collector.demo.variants import Variant, rollout
from collector.harness.telemetry import LedgerSpanExporter, OTelObserver, build_resource
from collector.harness.telemetry.setup import tracer_provider
from ledger import compare_stats
from ledger import queries as q
from ledger.compare_stats import MIN_RUNS, compare
from ledger.sources import ConnectionSource
from ledger.store import open_ledger

START = 1_790_000_000_000_000_000
RUNS = 300


@contextmanager
def harness_into(con: duckdb.DuckDBPyConnection) -> Iterator[tuple[OTelObserver, Callable[[], object]]]:
    """(observer, flush): the harness's spans go through the official OTel SDK into the ledger ``con``."""
    provider = tracer_provider(
        [LedgerSpanExporter(con=con, redact_content=False)],
        resource=build_resource("compare-tests", detect=False),
        max_queue_size=200_000,
        max_export_batch_size=8_192,  # few ingest transactions: each one rebuilds the runs it touched
        schedule_delay_millis=60_000,
    )
    try:
        yield OTelObserver(provider, capture="off"), provider.force_flush  # flush: the queue never overflows
    finally:
        provider.shutdown()


def play_rollout(db: Path, *pairs: tuple[int, Variant, Variant]) -> None:
    con = open_ledger(db)
    try:
        with harness_into(con) as (observer, flush):
            for n, (runs, baseline, candidate) in enumerate(pairs):
                rollout(runs, baseline, candidate, seed=n, observer=observer, start_ns=START + n * 86_400 * 10**9)
                flush()
    finally:
        con.close()


@pytest.fixture(scope="module")
def rollout_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("compare") / "rollout.duckdb"
    play_rollout(
        db,
        (RUNS, Variant("hr-v1", error_rate=0.04), Variant("hr-v2", prompt_growth=5.5, error_rate=0.12)),
        (RUNS, Variant("same-a", error_rate=0.04), Variant("same-b", error_rate=0.04)),
        (10, Variant("few-a", error_rate=0.1), Variant("few-b", prompt_growth=5.5, error_rate=0.3)),
    )
    return db


@pytest.fixture
def source(rollout_db: Path):  # type: ignore[no-untyped-def]
    con = open_ledger(rollout_db, read_only=True)
    yield ConnectionSource(con)
    con.close()


def _metrics(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["metric"]: m for m in result["metrics"]}


def test_the_workload_is_what_it_claims(source) -> None:  # type: ignore[no-untyped-def]
    figures = {}
    for version in ("hr-v1", "hr-v2"):
        f = q.Filters(prompt_version=version)
        cost = source.records(q.cost_per_run, f)[0]
        causes = {r["stop_cause"]: r["runs"] for r in source.records(q.stop_causes, f)}
        figures[version] = (cost["runs"], cost["total_usd"] / cost["runs"], causes["error"])
    (n1, mean1, errors1), (n2, mean2, errors2) = figures["hr-v1"], figures["hr-v2"]
    assert n1 == n2 == RUNS
    assert 1.5 < mean2 / mean1 < 1.7  # "v2 costs 1.6x per run"
    assert (errors1, errors2) == (12, 36)  # "and errors 3x as often"


def test_a_costlier_failing_candidate_is_worse_on_both_with_n_and_intervals(source) -> None:  # type: ignore[no-untyped-def]
    result = compare(source, q.NO_FILTERS, "prompt_version", "hr-v1", "hr-v2")
    assert result["runs"] == {"a": RUNS, "b": RUNS}
    m = _metrics(result)
    for key in ("error_rate", "cost_p50", "cost_p95", "cost_per_success"):
        low, high = m[key]["interval"]
        assert 0 < low <= m[key]["difference"] <= high, key
        assert m[key]["verdict"] == "worse", key
    assert m["error_rate"]["a"] == pytest.approx(0.04) and m["error_rate"]["b"] == pytest.approx(0.12)
    assert m["success_rate"]["verdict"] == "worse"  # the failures are missing successes
    assert m["steps_per_success"]["verdict"] == "no detectable difference"  # same tasks, same steps
    assert m["steps_per_success"]["says"] == f"no detectable difference at n={RUNS}/{RUNS}"


def test_the_percentiles_are_the_ledgers_nearest_rank(source) -> None:  # type: ignore[no-untyped-def]
    m = _metrics(compare(source, q.NO_FILTERS, "prompt_version", "hr-v1", "hr-v2"))
    for side, version in (("a", "hr-v1"), ("b", "hr-v2")):
        cost = source.records(q.cost_per_run, q.Filters(prompt_version=version))[0]
        assert m["cost_p50"][side] == float(round(cost["median_usd"], 10))
        assert m["cost_p95"][side] == float(round(cost["p95_usd"], 10))
        per_success = source.records(q.cost_per_successful_run, q.Filters(prompt_version=version))[0]
        assert m["cost_per_success"][side] == pytest.approx(float(per_success["usd_per_successful_run"]))


def test_ten_runs_per_version_are_too_few_to_call(source) -> None:  # type: ignore[no-untyped-def]
    result = compare(source, q.NO_FILTERS, "prompt_version", "few-a", "few-b")
    assert result["runs"] == {"a": 10, "b": 10}
    assert MIN_RUNS > 10
    for m in result["metrics"]:
        assert m["verdict"] == "too few runs" and m["interval"] is None, m["metric"]
        assert m["says"] == f"too few runs to call (n=10/10; at least {MIN_RUNS} per version)"
    assert _metrics(result)["cost_p50"]["b"] > _metrics(result)["cost_p50"]["a"]  # the figures are still shown
    assert result["tool_selection"]["verdict"] == "too few runs"


def test_identical_versions_show_no_detectable_difference(source) -> None:  # type: ignore[no-untyped-def]
    result = compare(source, q.NO_FILTERS, "prompt_version", "same-a", "same-b")
    for m in result["metrics"]:
        assert m["says"] == f"no detectable difference at n={RUNS}/{RUNS}", m["metric"]
        low, high = m["interval"]
        assert low <= 0 <= high
    assert result["tool_selection"]["verdict"] == "no detectable difference"


def test_the_output_is_deterministic_and_the_cli_prints_it_from_the_file(rollout_db: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    args = ["compare", "--by", "prompt_version", "hr-v1", "hr-v2", "--db", str(rollout_db)]
    assert main([*args, "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == first
    assert _metrics(first)["error_rate"]["verdict"] == "worse"
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "A = hr-v1 (300 runs) vs B = hr-v2 (300 runs)" in table
    line = next(x for x in table.splitlines() if x.startswith("error rate"))
    assert "4.0%" in line and "12.0%" in line and "+8.0 pts [" in line and line.endswith("worse")


def test_a_filter_narrows_both_versions(source) -> None:  # type: ignore[no-untyped-def]
    tenant = q.Filters(tenant="acme")
    result = compare(source, tenant, "prompt_version", "hr-v1", "hr-v2")
    acme = sum(r["runs"] for r in source.records(q.compare_versions, tenant) if r["version"] in ("hr-v1", "hr-v2"))
    assert 0 < result["runs"]["a"] + result["runs"]["b"] == acme < 2 * RUNS


def test_versions_are_listed_with_first_and_last_seen(source) -> None:  # type: ignore[no-untyped-def]
    rows = {r["version"]: r for r in source.records(q.compare_versions, q.NO_FILTERS, by="prompt_version")}
    assert set(rows) == {"hr-v1", "hr-v2", "same-a", "same-b", "few-a", "few-b"}
    assert rows["hr-v1"]["runs"] == RUNS and rows["hr-v1"]["first_seen"] < rows["hr-v1"]["last_seen"]
    models = source.records(q.compare_versions, q.NO_FILTERS, by="model")
    assert [r["version"] for r in models] == ["claude-sonnet-5"]


def test_the_same_version_twice_and_an_unknown_dimension_are_refused(source) -> None:  # type: ignore[no-untyped-def]
    from ledger.errors import InputError

    with pytest.raises(InputError, match="two different versions"):
        compare(source, q.NO_FILTERS, "prompt_version", "hr-v1", "hr-v1")
    with pytest.raises(ValueError, match="by='tenant'"):
        compare(source, q.NO_FILTERS, "tenant", "acme", "globex")


def test_the_cli_offers_exactly_the_ledgers_dimensions_and_minimum() -> None:
    import argparse

    from collector.cli.compare import add_compare

    assert tuple(q.COMPARE_DIMENSIONS) == DIMENSIONS  # the CLI imports no DuckDB to build its parser
    p = argparse.ArgumentParser()
    add_compare(p)
    assert f"fewer than {compare_stats.MIN_RUNS} finished runs" in (p.description or "")


def test_through_a_running_server_the_comparison_is_the_files(rollout_db: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    import shutil

    from collector.receiver import CollectorServer, ServerConfig

    served_db = tmp_path / "served.duckdb"
    shutil.copy(rollout_db, served_db)
    args = ["compare", "hr-v1", "hr-v2", "--json", "--tenant", "acme"]
    assert main([*args, "--db", str(rollout_db)]) == 0
    from_file = capsys.readouterr().out
    server = CollectorServer(ServerConfig(port=0, db=served_db)).start()
    try:
        assert main([*args, "--server", server.url]) == 0
        captured = capsys.readouterr()
    finally:
        server.stop()
    assert f"reading server {server.url}" in captured.err
    assert captured.out == from_file


def test_a_percentile_is_duckdbs_quantile_disc_on_distinct_costs() -> None:
    """The rollout's costs repeat (matched tasks), so check the definition where every method differs."""
    costs = [round(1.37**k % 7.3, 6) for k in range(1, 38)]
    rows = [
        {"version": "a", "usd_total": c, "stop_cause": "completed", "model_calls": 1, "duration_s": c,
         "cache_read_tokens": 0, "input_tokens": 1, "tool_calls": 0, "tool_errors": 0}
        for c in costs
    ]  # fmt: skip
    runs = compare_stats.Runs.of(rows)
    want = duckdb.execute(
        "SELECT quantile_disc(x, 0.5), quantile_disc(x, 0.95) FROM unnest(?) t(x)", [costs]
    ).fetchone()
    by_key = {m.key: m for m in compare_stats.METRICS}
    assert (by_key["cost_p50"].estimate(runs), by_key["cost_p95"].estimate(runs)) == pytest.approx(want, abs=0)
    assert by_key["latency_p95"].estimate(runs) == want[1]
