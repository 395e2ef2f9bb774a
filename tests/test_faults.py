"""ledger.faults: whose fault a failed write is, over errors the real libraries raise."""

from __future__ import annotations

import errno
import socket
from pathlib import Path

import duckdb
import pytest

from ledger.errors import Unavailable
from ledger.faults import Fault, fault_of, refused


def _raised(action) -> BaseException:  # type: ignore[no-untyped-def]
    with pytest.raises(Exception) as info:
        action()
    return info.value


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again once returned: nothing listens there


def test_store_failures_are_the_stores(tmp_path: Path):
    io = _raised(lambda: duckdb.connect(str(tmp_path / "no-such-dir" / "ledger.duckdb")))
    assert isinstance(io, duckdb.IOException)
    psycopg = pytest.importorskip("psycopg")
    catalog_down = _raised(lambda: psycopg.connect(f"host=127.0.0.1 port={_closed_port()} connect_timeout=5"))
    enospc = OSError(errno.ENOSPC, "No space left on device")
    for exc in (io, catalog_down, enospc, Unavailable("the lake's write lock cannot be taken"), MemoryError()):
        assert fault_of(exc) is Fault.STORE, exc
        assert not refused(exc, others_committed=True), exc  # never blamed on the request


def test_a_value_no_column_takes_is_the_requests():
    con = duckdb.connect()
    bad_value = _raised(lambda: con.execute("SELECT CAST('twelve' AS INTEGER)"))
    assert fault_of(bad_value) is Fault.REQUEST
    assert refused(bad_value, others_committed=False)


def test_an_unknown_error_is_the_requests_only_while_others_commit():
    odd = RuntimeError("something no one classified")
    assert fault_of(odd) is Fault.UNKNOWN
    assert refused(odd, others_committed=True)
    assert not refused(odd, others_committed=False)  # failing with everything else: retryable
