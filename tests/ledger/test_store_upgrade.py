"""A reader opening a ledger written by an older turnledger: the file is upgraded, not misread."""

from __future__ import annotations

import duckdb

from ledger.schema import pending_migrations
from ledger.store import open_ledger


def _as_written_before_migration_14(path) -> None:
    with duckdb.connect(str(path)) as con:
        con.execute("DROP TABLE evaluations; DROP TABLE review_items; DELETE FROM schema_migrations WHERE version = 14")


def test_a_read_only_open_of_an_older_file_upgrades_it_once(tmp_path):
    path = tmp_path / "old.duckdb"
    open_ledger(path).close()
    _as_written_before_migration_14(path)
    with duckdb.connect(str(path), read_only=True) as con:
        assert pending_migrations(con) == [14]

    con = open_ledger(path, read_only=True)
    try:
        assert pending_migrations(con) == []
        assert con.execute("SELECT count(*) FROM evaluations").fetchone() == (0,)  # what the pages read
    finally:
        con.close()


def test_a_duckdb_file_turnledger_never_wrote_is_not_written_by_a_reader(tmp_path):
    path = tmp_path / "other.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE mine (x INTEGER)")
    open_ledger(path, read_only=True).close()
    with duckdb.connect(str(path), read_only=True) as con:
        tables = {t for (t,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert tables == {"mine"}
