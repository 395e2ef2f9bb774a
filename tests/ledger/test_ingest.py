"""Ingest: idempotency, per-span rejection, unpriced flagging, atomicity, limits."""

from __future__ import annotations

import dataclasses

import pytest

from collector.demo.samples import Trace, build
from collector.otlp import read_file
from ledger import conventions as c
from ledger import ingest as ingest_module
from ledger import queries as q
from ledger import runs as runs_module
from ledger.ingest import MAX_ATTRIBUTE_CHARS, ingest
from ledger.schema import MIGRATIONS, migrate, schema_version

TABLES = ("spans", "charges", "guard_events", "runs", "content_blocks", "run_blocks", "contexts")


def _counts(con):
    return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}


def _totals(con):
    return con.execute(
        "SELECT sum(usd_input), sum(usd_output), sum(usd_cache_write), sum(usd_cache_read) FROM charges"
    ).fetchone()


def test_same_batch_twice_changes_nothing(ledger, load):
    load("five_turn_run", "retry_and_loop")
    before_counts, before_totals = _counts(ledger), _totals(ledger)
    report = ingest(ledger, read_file("sample_traces/five_turn_run.json"))
    assert report.spans_written == 0 and report.charges_written == 0
    assert report.duplicates == report.received == 9
    assert _counts(ledger) == before_counts
    assert _totals(ledger) == before_totals


def test_duplicates_inside_one_batch_charge_once(ledger):
    spans = build("budget_warn")
    report = ingest(ledger, spans + spans)
    assert report.spans_written == len(spans)
    assert ledger.execute("SELECT count(*) FROM charges").fetchone()[0] == 1


def test_a_batch_overlapping_stored_spans_adds_only_the_new_ones(ledger):
    # Plain INSERT fails on the stored half; the replay with INSERT OR IGNORE
    # must land the new half once and leave the stored half as it was.
    first, second = build("five_turn_run"), build("budget_warn")
    ingest(ledger, first)
    before_totals = _totals(ledger)
    report = ingest(ledger, first + second)
    assert report.spans_written == len(second)
    assert report.duplicates == len(first)
    assert ledger.execute("SELECT count(*) FROM spans").fetchone()[0] == len(first) + len(second)
    assert ledger.execute("SELECT count(*) FROM charges").fetchone()[0] == 5 + 1
    assert _totals(ledger)[0] > before_totals[0]
    assert len(q.records(ledger, q.runs_table())) == 2


def test_children_before_root_still_make_a_complete_run(ledger):
    spans = build("five_turn_run")
    root = [s for s in spans if not s.parent_span_id]
    children = [s for s in spans if s.parent_span_id]
    ingest(ledger, children)  # exporters flush children first: the root ends last
    run = q.records(ledger, q.runs_table())[0]
    assert run["stop_cause"] is None and run["turns"] == 5
    ingest(ledger, root)
    run = q.records(ledger, q.runs_table())[0]
    assert run["stop_cause"] == "completed" and run["agent_name"] == "support-agent" and run["tool_calls"] == 3


def test_bad_span_is_rejected_and_the_rest_land(ledger):
    spans = build("budget_warn")
    bad = dataclasses.replace(spans[0], span_id="nothex", trace_id=spans[0].trace_id)
    backwards = dataclasses.replace(spans[0], span_id="ab" * 8, end_ns=spans[0].start_ns - 1)
    report = ingest(ledger, [bad, backwards, *spans])
    assert len(report.rejected) == 2
    assert "span_id 'nothex'" in report.rejected[0]
    assert "bad times" in report.rejected[1]
    assert report.spans_written == len(spans)


def test_unknown_model_is_flagged_unpriced_never_silently_free(ledger, load):
    load("unpriced")
    row = ledger.execute("SELECT unpriced, price_source, model FROM charges").fetchone()
    assert row == (True, "unpriced", "mystery-model-1")
    listed = q.records(ledger, q.unpriced_models())
    assert [(u["provider"], u["model"], u["calls"]) for u in listed] == [("someprovider", "mystery-model-1", 1)]
    assert q.records(ledger, q.guard_summary())[0]["unpriced_calls"] == 1


def test_price_source_and_version_stored_per_charge(ledger, load):
    load("five_turn_run", "openai_style")
    sources = dict(
        ledger.execute("SELECT DISTINCT model, price_source || ' ' || price_version FROM charges").fetchall()
    )
    assert sources["claude-opus-5"] == "override prices.toml@2026-01-01"
    assert sources["gpt-4o"].startswith("genai-prices ")


def test_a_crash_mid_ingest_writes_nothing(ledger, monkeypatch):
    def boom(con, trace_ids, **kw):
        raise RuntimeError("disk full")

    monkeypatch.setattr(runs_module, "refresh_runs", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        ingest(ledger, build("five_turn_run"))
    assert set(_counts(ledger).values()) == {0}


def test_huge_attribute_is_truncated_with_its_length(ledger):
    t = Trace("huge")
    t.tool("dump", {}, "x")
    spans = t.finish("completed")
    huge = "y" * (MAX_ATTRIBUTE_CHARS * 4)
    spans[0] = dataclasses.replace(spans[0], attributes={**spans[0].attributes, "tool.output": huge})
    ingest(ledger, spans)
    stored = ledger.execute(
        "SELECT json_extract_string(attributes, '$.\"tool.output\"') FROM spans WHERE span_id = ?", [spans[0].span_id]
    ).fetchone()[0]
    assert len(stored) < MAX_ATTRIBUTE_CHARS + 100
    assert stored.endswith(f"[truncated, {len(huge)} chars]")


def test_retry_attempts_are_separate_charges(ledger, load):
    load("retry_and_loop")
    attempts = ledger.execute(
        "SELECT attempt, retry_cause, status_code FROM charges WHERE call_id = "
        "(SELECT call_id FROM charges WHERE attempt = 2) ORDER BY attempt"
    ).fetchall()
    assert attempts == [(1, "", "ERROR"), (2, "429", "UNSET")]
    retries = q.records(ledger, q.retry_charges())
    assert [(r["cause"], r["attempts"]) for r in retries] == [("429", 1)]
    trips = [(r["shape"], r["trips"], r["nudges"], r["halts"]) for r in q.records(ledger, q.loop_trips())]
    assert trips == [("repeat", 2, 1, 1)]
    assert ledger.execute(f"SELECT count(*) FROM guard_events WHERE name = '{c.EVENT_RETRY}'").fetchone()[0] == 1


def test_migrations_are_recorded_and_safe_to_rerun(ledger):
    assert schema_version(ledger) == MIGRATIONS[-1][0]
    assert migrate(ledger) == MIGRATIONS[-1][0]
    assert ledger.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] == len(MIGRATIONS)


def test_filters_narrow_every_figure(ledger, load):
    load("long_tail", "five_turn_run")
    only_acme = q.records(ledger, q.cost_per_run(q.Filters(tenant="acme")))[0]
    assert only_acme["runs"] == 1 and round(only_acme["total_usd"], 4) == round(_five_turn_total(ledger), 4)
    sonnet = q.records(ledger, q.cost_per_run(q.Filters(model="claude-sonnet-5")))[0]
    assert sonnet["runs"] == 0


def _five_turn_total(con):
    return con.execute("SELECT usd_total FROM runs WHERE tenant = 'acme'").fetchone()[0]


def _runs(con):
    return con.execute("SELECT * EXCLUDE (trace_id), trace_id FROM runs ORDER BY trace_id").fetchall()


def test_deferred_runs_are_pending_until_a_later_write_rebuilds_them_exactly(ledger, tmp_path):
    from ledger.store import open_ledger

    names = ("five_turn_run", "retry_and_loop", "budget_warn")
    reference = open_ledger(tmp_path / "reference.duckdb")
    for name in names:
        ingest(reference, build(name))
    prepared = [ingest_module.prepare(build(name)) for name in names]
    ingest_module.write(ledger, prepared[:2], defer_runs=True)
    # the spans and charges are committed; their runs wait in runs_pending
    assert ledger.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    assert ledger.execute("SELECT count(*) FROM runs_pending").fetchone()[0] == 2
    assert _totals(ledger) != (None, None, None, None)
    ingest_module.write(ledger, prepared[2:])  # an ordinary write rebuilds its runs and the pending ones
    assert ledger.execute("SELECT count(*) FROM runs_pending").fetchone()[0] == 0
    assert _runs(ledger) == _runs(reference)
    # what a crash leaves pending is rebuilt on its own too
    ingest_module.write(ledger, [ingest_module.prepare(build("openai_style"))], defer_runs=True)
    assert ingest_module.refresh_pending_runs(ledger) == {build("openai_style")[0].trace_id}
    ingest(reference, build("openai_style"))
    assert _runs(ledger) == _runs(reference)


def test_prepared_batches_written_together_equal_one_ingest(ledger, tmp_path):
    from ledger.store import open_ledger

    spans = build("five_turn_run") + build("retry_and_loop")
    reference = open_ledger(tmp_path / "reference.duckdb")
    ingest(reference, spans)
    halves = [ingest_module.prepare(spans[:7]), ingest_module.prepare(spans[7:]), ingest_module.prepare(spans[:3])]
    report = ingest_module.write(ledger, halves)
    assert report.spans_written == len(spans) and report.duplicates == 3
    assert _counts(ledger) == _counts(reference) and _totals(ledger) == _totals(reference)
    assert _runs(ledger) == _runs(reference)


def test_a_prepared_batch_survives_the_trip_between_processes(ledger, tmp_path):
    # Decoder processes pickle their batches (as Arrow IPC streams) to the writer.
    import pickle

    from ledger.store import open_ledger

    spans = build("five_turn_run") + build("retry_and_loop")
    sent = ingest_module.prepare(spans).to_arrow()
    assert {"spans", "charges", "guard_events", "contexts", "content_blocks"} <= sent.tables.keys()
    received = pickle.loads(pickle.dumps(sent))
    assert received.tables.keys() == sent.tables.keys()
    assert all(received.tables[name].equals(table) for name, table in sent.tables.items())
    assert (received.received, received.rejected, received.first_starts) == (len(spans), [], sent.first_starts)
    reference = open_ledger(tmp_path / "reference.duckdb")
    ingest_module.write(reference, [sent])
    ingest_module.write(ledger, [received])
    assert _counts(ledger) == _counts(reference) and _totals(ledger) == _totals(reference)


@pytest.mark.parametrize("runs", [("five_turn_run",), ("five_turn_run", "retry_and_loop")])
def test_runs_rebuilt_from_recent_spans_only_are_exact_whatever_order_spans_arrive_in(tmp_path, runs):
    # A rebuild reads only spans starting after the earliest of: the touched runs'
    # started_at, the new spans, the pending ones. Spans arriving in time order, and
    # late spans that started before everything already stored (a root is exported
    # when its run ends), must all count.
    from ledger.store import open_ledger

    spans = [s for name in runs for s in build(name)]
    reference = open_ledger(tmp_path / "reference.duckdb")
    ingest(reference, spans)
    by_start = sorted(spans, key=lambda s: s.start_ns)
    third = len(by_start) // 3
    parts = [by_start[:third], by_start[third : 2 * third], by_start[2 * third :]]
    for name, order in (("in-order", parts), ("reversed", parts[::-1])):
        con = open_ledger(tmp_path / f"{name}.duckdb")
        for part in order:
            ingest(con, part)
        assert _runs(con) == _runs(reference), name
        deferred = open_ledger(tmp_path / f"{name}-deferred.duckdb")
        for part in order[:-1]:
            ingest_module.write(deferred, [ingest_module.prepare(part)], defer_runs=True)
        ingest_module.write(deferred, [ingest_module.prepare(order[-1])])
        assert _runs(deferred) == _runs(reference), f"{name}, deferred"


def test_metric_points_are_duplicates_only_when_received_again(tmp_path):
    """/healthz's duplicate count read every stored metric point as a duplicate span."""
    from ledger.metrics import DELTA, MetricPoint, prepare_points
    from ledger.store import open_ledger
    from ledger.write import write

    points = [MetricPoint("claude_code.cost.usage", 1_790_000_000_000_000_000 + i, 0.5, DELTA) for i in range(3)]
    con = open_ledger(tmp_path / "points.duckdb")
    try:
        first = write(con, [prepare_points(points).to_arrow()])
        again = write(con, [prepare_points(points).to_arrow()])  # an exporter's retry
    finally:
        con.close()
    assert (first.points_written, first.duplicates) == (3, 0)
    assert (again.points_written, again.duplicates) == (0, 3)
