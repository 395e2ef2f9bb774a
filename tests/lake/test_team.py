"""Team mode: several real `turnledger serve` processes ingesting into one lake at once.

Must-show of issue #17: the seed vectors and a 200-run simulate sent to two collectors in parallel,
a third of the batches to both, give the lake the `report --json` the same data gives one file, to
the cent, each span stored and charged once; a collector killed -9 mid-load loses nothing it
acknowledged, and the other keeps ingesting.
"""

from __future__ import annotations

import threading

from collector.receiver import CollectorServer, ServerConfig
from ledger.store import open_ledger
from tests.server.conftest import post_otlp

from .team import Body, collectors, post_in_parallel, report_json, sample_bodies, simulate_bodies, start_collector

_COUNTS = (
    "SELECT (SELECT count(*) FROM spans), (SELECT count(DISTINCT (trace_id, span_id)) FROM spans), "
    "(SELECT count(*) FROM charges), (SELECT count(DISTINCT (trace_id, span_id)) FROM charges), "
    "(SELECT count(*) FROM runs), (SELECT count(DISTINCT trace_id) FROM runs)"
)


def _counts(db: str) -> tuple[int, ...]:
    con = open_ledger(db, read_only=True)
    try:
        return con.execute(_COUNTS).fetchone()  # type: ignore[return-value]
    finally:
        con.close()


def _into_one_file(bodies: list[Body], path: str) -> None:
    server = CollectorServer(ServerConfig(port=0, db=path)).start()
    try:
        for body in bodies:
            assert post_otlp(server.url, body.data, body.content_type).status == 200
    finally:
        server.stop()


def test_two_collectors_on_one_lake_report_what_one_file_reports_each_span_charged_once(
    lake_target, tmp_path, capsys, monkeypatch
):
    target, data = lake_target
    monkeypatch.setenv("TURNLEDGER_DATA_PATH", str(data))
    bodies = [*sample_bodies(), *simulate_bodies()]
    assert len(bodies) > 20
    with collectors(target, data, 2) as (a, b):
        # Body i goes to a, to b, or (every third) to both at once: a retry re-routed by a load balancer.
        plan = {a: [x for i, x in enumerate(bodies) if i % 3 != 1], b: [x for i, x in enumerate(bodies) if i % 3 != 0]}
        statuses = post_in_parallel(plan)
    assert all(s == 200 for got in statuses.values() for s in got), statuses
    file_db = str(tmp_path / "one.duckdb")
    _into_one_file(bodies, file_db)
    on_lake, on_file = report_json(target, capsys), report_json(file_db, capsys)
    assert on_lake["runs"] > 200 and on_lake["total_usd"] > 0
    assert on_lake == on_file
    counts = _counts(target)
    assert counts == _counts(file_db)
    spans, distinct_spans, charges, distinct_charges, run_rows, distinct_runs = counts
    assert (spans, charges, run_rows) == (distinct_spans, distinct_charges, distinct_runs)  # nothing twice


def test_a_collector_killed_mid_load_loses_nothing_it_acknowledged_and_the_other_keeps_ingesting(lake_target):
    target, data = lake_target
    bodies = list(simulate_bodies())
    for_a, for_b, last = bodies[0::2], bodies[1:-1:2], bodies[-1]
    a, b = start_collector(target, data), start_collector(target, data)
    acknowledged: list[Body] = []
    try:
        third_ack = threading.Event()

        def load_a() -> None:
            for body in for_a:
                try:
                    status = a.post(body)
                except OSError:  # the collector is gone: this request was never acknowledged
                    return
                if status == 200:
                    acknowledged.append(body)
                if len(acknowledged) == 3:
                    third_ack.set()
            third_ack.set()

        loader = threading.Thread(target=load_a)
        loader.start()
        assert third_ack.wait(timeout=600)  # a hang guard
        a.kill()  # while a's next request is in flight
        loader.join(timeout=600)
        assert not loader.is_alive()
        statuses = [b.post(body) for body in for_b]
        assert statuses == [200] * len(for_b)
        assert b.post(last) == 200  # after the kill too
        acknowledged += [*for_b, last]
    finally:
        b.stop()
        if a.proc.poll() is None:
            a.kill()
    assert 3 <= len(acknowledged) - len(for_b) - 1 < len(for_a)
    con = open_ledger(target, read_only=True)
    try:
        stored = set(con.execute("SELECT trace_id, span_id FROM spans").fetchall())
        (twice,) = con.execute(
            "SELECT count(*) FROM (SELECT trace_id, span_id FROM charges GROUP BY ALL HAVING count(*) > 1)"
        ).fetchone()
    finally:
        con.close()
    missing = set().union(*(body.span_keys() for body in acknowledged)) - stored
    assert not missing, f"{len(missing)} acknowledged spans are not in the lake"
    assert twice == 0
