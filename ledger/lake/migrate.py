"""Copy a file ledger into a DuckLake, exactly (``turnledger migrate --from FILE --to LAKE``).

The file is migrated to the current schema first (opened for writing once, so stop the collector
that holds it), then attached read-only to the lake's connection, and every table's rows are copied
in ONE lake transaction with the lake's write lock held: the lake has all of them or none. The two
ledgers have the same tables and columns (the lake runs the same migrations), so the copy is
column for column; a lake that already holds rows is refused rather than merged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .. import lake
from ..errors import InputError
from ..store import open_ledger
from . import lock as lake_lock

__all__ = ["Migrated", "migrate_to_lake"]

_SOURCE = "turnledger_source"
_TABLES = (
    "SELECT table_name, list(column_name ORDER BY ordinal_position) FROM information_schema.columns "
    "WHERE table_catalog = current_database() AND table_schema = 'main' AND table_name <> 'schema_migrations' "
    "GROUP BY table_name ORDER BY table_name"
)


@dataclass
class Migrated:
    rows: dict[str, int] = field(default_factory=dict)  # copied, per table


def migrate_to_lake(source: str | Path, target: str, *, data_path: str | None = None) -> Migrated:
    if not lake.is_lake_target(target):
        raise InputError(f"--to must be a DuckLake target (ducklake:postgres:…), not {target!r}")
    if lake.is_lake_target(str(source)) or not Path(source).is_file():
        raise InputError(f"--from must be a ledger file; there is none at {lake.shown(str(source))!r}")
    open_ledger(source).close()  # migrated to the schema the lake has
    con = open_ledger(target, data_path=data_path)
    try:
        con.execute(f"ATTACH {lake.literal(str(source))} AS {_SOURCE} (READ_ONLY)")
        tables = con.execute(_TABLES).fetchall()
        copied = Migrated()
        with lake_lock.exclusive(con):
            held = [name for name, _ in tables if con.execute(f"SELECT count(*) FROM {name}").fetchone()[0]]  # type: ignore[index]
            if held:
                raise InputError(f"the lake already holds rows ({', '.join(held)}): migrate into an empty lake")
            con.execute("BEGIN TRANSACTION")
            try:
                for name, columns in tables:
                    names = ", ".join(f'"{c}"' for c in columns)
                    row = con.execute(f"INSERT INTO {name} ({names}) SELECT {names} FROM {_SOURCE}.{name}").fetchone()
                    copied.rows[name] = int(row[0]) if row else 0
                con.execute("COMMIT")
            except Exception:
                con.execute("ROLLBACK")
                raise
        return copied
    finally:
        con.close()
