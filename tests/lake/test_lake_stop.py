"""A collector stopping on a lake commits nothing of its own: maintenance is the leader's."""

from __future__ import annotations

from collector.demo.samples import build
from collector.receiver.server import CollectorServer, ServerConfig
from ledger.ingest import ingest
from ledger.store import open_ledger


def _snapshots(target: str) -> int:
    con = open_ledger(target, read_only=True)
    try:
        return con.execute("SELECT count(*) FROM ducklake_snapshots(current_database())").fetchone()[0]
    finally:
        con.close()


def test_stopping_a_collector_on_a_lake_adds_no_snapshot(lake_target, monkeypatch):
    """On a file, stop() folds the WAL in with CHECKPOINT; on a lake CHECKPOINT flushes inlined rows
    and merges files, two commits taken outside the lake lock, racing the other collectors."""
    target, data = lake_target
    monkeypatch.setenv("TURNLEDGER_DATA_PATH", str(data))
    con = open_ledger(target)
    try:
        ingest(con, build("five_turn_run"))  # a small write: its rows are inlined in the catalog
    finally:
        con.close()
    before = _snapshots(target)
    CollectorServer(ServerConfig(port=0, grpc_port=None, db=target)).start().stop()
    assert _snapshots(target) == before
