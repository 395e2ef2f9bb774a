"""LedgerWriter: coalescing, the on_ingested hook, and a hook that is slow or broken."""

from __future__ import annotations

import threading

from collector.receiver import LedgerWriter
from ledger.store import open_ledger

from .conftest import run_spans, wait_until


def test_on_ingested_sees_each_committed_batch_and_a_slow_hook_never_blocks_ingest(tmp_path):
    con = open_ledger(tmp_path / "l.duckdb")
    seen: list[tuple[int, set[str], int]] = []
    release = threading.Event()

    def slow_budget_check(cur, report):  # e.g. budgets: read what was just committed
        release.wait(10)
        n = cur.execute(
            "SELECT count(*) FROM charges WHERE trace_id IN (SELECT unnest(?))", [sorted(report.traces)]
        ).fetchall()[0][0]
        seen.append((report.spans_written, report.traces, n))

    def broken(cur, report):
        raise RuntimeError("a bug in a callback")

    writer = LedgerWriter(con, on_ingested=[broken, slow_budget_check])
    try:
        batches = [run_spans(f"hook-{i}") for i in range(5)]
        for spans in batches:  # one at a time: five commits while the hook is stuck on the first
            writer.submit(spans).wait(10)
        assert not seen  # all five acknowledged while the hook had not finished once: ingest did not wait
        release.set()
        assert writer.drained(10)
        # every batch is covered (the ones that piled up arrive merged), each charge already visible
        assert sum(s for s, _, _ in seen) == 5 * 4
        assert set().union(*(t for _, t, _ in seen)) == {b[0].trace_id for b in batches}
        assert sum(n for _, _, n in seen) == 5 * 2
        assert len(seen) < 5  # the backlog was merged, not queued without bound
        # the broken hook is logged and ingest goes on
        writer.submit(run_spans("after")).wait(10)
        assert writer.stats.spans_written == 6 * 4
    finally:
        release.set()
        writer.close()
        con.close()


def test_requests_waiting_behind_a_commit_are_coalesced_into_one_ingest(tmp_path, monkeypatch):
    import collector.receiver.writer as w

    con = open_ledger(tmp_path / "l.duckdb")
    calls: list[int] = []
    gate = threading.Event()
    real = w.write

    def counting(con, batches, **kw):
        calls.append(sum(b.received for b in batches))
        gate.wait(10)
        return real(con, batches, **kw)

    monkeypatch.setattr(w, "write", counting)
    writer = LedgerWriter(con, max_batch_spans=12)
    try:
        first = writer.submit(run_spans("c-first"))
        wait_until(lambda: calls == [4])
        rest = [writer.submit(run_spans(f"c-{i}")) for i in range(5)]  # 20 spans queued behind it
        gate.set()
        for t in [first, *rest]:
            assert t.wait(10).rejected == []
        assert calls == [4, 12, 8]  # coalesced, and never more than max_batch_spans in one call
    finally:
        gate.set()
        writer.close()
        con.close()
