"""Processes opening a new lake at once (collectors of a team started together) all open it."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from ledger import lake
from ledger.schema import MIGRATIONS, schema_version
from ledger.store import open_ledger


def test_connections_creating_one_new_lake_at_once_all_open_it(lake_target):
    target, data = lake_target
    openers = 4
    together = threading.Barrier(openers)

    def open_lake(_: int) -> tuple[bool, int]:
        together.wait(timeout=60)  # a hang guard
        con = open_ledger(target, data_path=str(data))  # as `turnledger serve` opens it
        try:
            return lake.is_lake(con), schema_version(con)
        finally:
            con.close()

    with ThreadPoolExecutor(openers) as pool:
        assert list(pool.map(open_lake, range(openers))) == [(True, MIGRATIONS[-1][0])] * openers
