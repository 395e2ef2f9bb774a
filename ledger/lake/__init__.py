"""A DuckLake ledger: the catalog in PostgreSQL, the data as Parquet files (team mode).

``ledger.store.open_ledger`` opens a target ``ducklake:postgres:<libpq dsn>`` here, with the
lake as the connection's main database, so every cursor of it (the governor's, the gate's)
reads and writes the lake too. The DuckLake and postgres extensions come from their PyPI
wheels, which must match the DuckDB version exactly; they are loaded from a directory laid
out as DuckDB's own extension directory (DuckDB looks the postgres one up as
``postgres_scanner``), so opening the lake autoloads them and never downloads anything.

DuckLake has no primary keys, unique constraints, indexes or per-column compression, so the
same migrations run with those left out (``ddl``), and the statements that relied on a key
take their lake form here: a batch's rows go in by an anti-join on the table's key
(``insert_new``), inside the writer's transaction. The keys are the file ledger's primary
keys, read from the migrated schema itself (``primary_keys``), so they are declared once.
"""

from __future__ import annotations

import os
import re
import threading
import weakref
from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import TurnledgerError

if TYPE_CHECKING:  # imported where used: is_lake_target and resolved serve light modules (the CLI, the launcher)
    import duckdb

__all__ = [
    "PREFIX",
    "connect",
    "ddl",
    "insert_new",
    "is_lake",
    "is_lake_target",
    "literal",
    "primary_keys",
    "resolved",
    "shown",
    "upsert",
]

PREFIX = "ducklake:"
# Each extension wheel: its package and the name DuckDB loads it by.
_EXTENSIONS = {"duckdb_extension_ducklake": "ducklake", "duckdb_extension_postgres": "postgres_scanner"}
# Needed only for a data path on S3 (s3://…): linked when its wheel is installed.
_OPTIONAL_EXTENSIONS = {"duckdb_extension_httpfs": "httpfs"}


def is_lake_target(target: str) -> bool:
    return target.startswith(PREFIX)


def resolved(db: str | Path) -> str:
    """``--db`` as a process started elsewhere must be given it: a file's absolute path, a lake target as is."""
    return str(db) if is_lake_target(str(db)) else str(Path(db).resolve())


@cache
def _extension_directory() -> Path:
    """A DuckDB extension directory whose files link to the installed wheels' extensions."""
    import duckdb

    version = duckdb.__version__
    platform = duckdb.connect().execute("PRAGMA platform").fetchone()[0]  # type: ignore[index]
    cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    root = cache_home / "turnledger" / "duckdb-extensions"
    folder = root / f"v{version}" / platform
    folder.mkdir(parents=True, exist_ok=True)
    for package, name in {**_EXTENSIONS, **_OPTIONAL_EXTENSIONS}.items():
        try:
            built = resources.files(package) / "extensions" / f"v{version}"
        except ModuleNotFoundError:
            if package in _OPTIONAL_EXTENSIONS:
                continue
            raise TurnledgerError(
                f"a DuckLake ledger needs the {package.replace('_', '-')}=={version} package (pip install it)"
            ) from None
        source = next(Path(str(built)).glob("*.duckdb_extension"), None)
        if source is None:
            raise TurnledgerError(f"{package} holds no extension built for DuckDB {version}: install =={version}")
        link = folder / f"{name}.duckdb_extension"
        if not link.exists() or link.resolve() != source.resolve():
            # Made aside, then renamed over the old one: two processes (or two threads of one: a pool of
            # connections opening a lake whose links point at a removed environment) both succeed.
            staged = folder / f".{name}.{os.getpid()}.{threading.get_ident()}"
            staged.unlink(missing_ok=True)
            staged.symlink_to(source)
            staged.replace(link)
    return root


def _config() -> dict[str, str | bool | int | float | list[str]]:
    return {
        "extension_directory": str(_extension_directory()),
        "autoload_known_extensions": True,
        "autoinstall_known_extensions": False,  # never a download: the wheels are the extensions
    }


def connect(target: str, *, data_path: str | None, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A connection whose main database is the lake at ``target``.

    ``data_path`` (a directory or ``s3://bucket/prefix``) is where a new lake writes its
    Parquet files; the catalog keeps it, so later opens need not give it again.
    """
    import duckdb

    # A DuckLake internal error after its PostgreSQL catalog restarted ("Attempted to access index 0
    # within vector of size 0", seen in tests/lake/test_lake_store_faults.py) would invalidate this
    # process's database for good: every later commit FATAL, the collector answering 503 until it
    # is restarted. The database here holds no data of its own (the catalog's transactions are
    # PostgreSQL's, the Parquet files are written before it commits), so it stays usable.
    config = {**_config(), "disable_database_invalidation": True}
    try:
        if data_path is not None and not read_only:
            _create_or_check(target, data_path, config)
        con = duckdb.connect(target, read_only=read_only, config=config)
        _add_s3_secret(con)  # before any Parquet file is read: attaching reads only the catalog
        return con
    except duckdb.Error as exc:
        raise TurnledgerError(f"cannot open lake {shown(target)!r}: {shown(str(exc))}") from None


# What PostgreSQL answers a process creating a lake's catalog tables that another created meanwhile.
_CREATED_MEANWHILE = re.compile(r"duplicate key value|already exists", re.IGNORECASE)
_CREATE_ATTEMPTS = 3


def _create_or_check(target: str, data_path: str, config: dict[str, str | bool | int | float | list[str]]) -> None:
    """Create the lake, or check it opens with this data path.

    Collectors of a team started together all create a new lake at once: DuckLake creates its
    catalog tables in one transaction, so each loser fails on a name the winner has just committed,
    and attaching again finds the lake made (``tests/lake/test_lake_boot.py``).
    """
    import duckdb

    attach = f"ATTACH {literal(target)} AS lake (DATA_PATH {literal(_as_directory(data_path))})"
    for attempt in range(1, _CREATE_ATTEMPTS + 1):
        try:
            with duckdb.connect(config=config) as boot:
                _add_s3_secret(boot)
                boot.execute(attach)
            return
        except duckdb.Error as exc:
            if attempt == _CREATE_ATTEMPTS or not _CREATED_MEANWHILE.search(str(exc)):
                raise


def _add_s3_secret(con: duckdb.DuckDBPyConnection) -> None:
    """S3 credentials from the standard AWS variables, for a data path on S3 or an S3-compatible store.

    ``AWS_ENDPOINT_URL`` (e.g. ``http://minio:9000``) names a store other than AWS, addressed by path.
    The secret lives in the connection's memory only (every cursor of it sees it), never on disk.
    """
    key = os.environ.get("AWS_ACCESS_KEY_ID")
    if not key:
        return
    fields = {
        "KEY_ID": key,
        "SECRET": os.environ.get("AWS_SECRET_ACCESS_KEY", ""),
        "REGION": os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
    }
    if token := os.environ.get("AWS_SESSION_TOKEN"):
        fields["SESSION_TOKEN"] = token
    options = ""
    if endpoint := os.environ.get("AWS_ENDPOINT_URL"):
        scheme, _, host = endpoint.rstrip("/").rpartition("://")
        fields["ENDPOINT"] = host or endpoint
        fields["URL_STYLE"] = "path"
        options = f", USE_SSL {'false' if scheme == 'http' else 'true'}"
    listed = ", ".join(f"{name} {literal(value)}" for name, value in fields.items())
    con.execute(f"CREATE OR REPLACE SECRET turnledger_s3 (TYPE s3, {listed}{options})")


def _as_directory(path: str) -> str:
    return path if path.endswith("/") else path + "/"


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


_PASSWORD = re.compile(r"(password\s*=\s*)('[^']*'|[^\s\"']+)", re.IGNORECASE)


def shown(text: str) -> str:
    """A lake target (or a message quoting it) as it may be printed: without its password."""
    return _PASSWORD.sub(r"\1***", text)


# Connections (cursors included) known to be on a lake or not: asked once each.
_KIND: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, bool] = weakref.WeakKeyDictionary()


def is_lake(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether this connection's main database is a DuckLake (asked once per connection)."""
    known = _KIND.get(con)
    if known is None:
        row = con.execute("SELECT type FROM duckdb_databases() WHERE database_name = current_database()").fetchone()
        known = _KIND[con] = row is not None and row[0] == "ducklake"
    return known


# The migrations' DDL that DuckLake refuses, and what the lake runs instead (nothing).
_REFUSED = (
    re.compile(r",\s*PRIMARY KEY\s*\([^)]*\)", re.IGNORECASE),  # a table's key clause
    re.compile(r"\s+PRIMARY KEY\b", re.IGNORECASE),  # a column's
    re.compile(r"\s+USING COMPRESSION\s+\w+", re.IGNORECASE),  # Parquet files compress on their own
    re.compile(r"CREATE INDEX[^;]*;?", re.IGNORECASE),
)


# DuckLake takes only a literal as a new column's default, and reads a bare true/false as an expression.
_BOOLEAN_DEFAULT = re.compile(r"\bDEFAULT\s+(true|false)\b", re.IGNORECASE)


def ddl(sql: str) -> str:
    """A migration's SQL as the lake runs it: without keys, indexes or column compression."""
    for pattern in _REFUSED:
        sql = pattern.sub("", sql)
    return _BOOLEAN_DEFAULT.sub(r"DEFAULT '\1'", sql)


@cache
def primary_keys() -> dict[str, tuple[str, ...]]:
    """Each table's key, as the file ledger's primary keys declare it after every migration.

    ``call_copies`` and ``contexts`` have none in the file (``ledger.write`` keeps them one row
    per span), nor ``run_blocks`` (one row per block and run); on the lake they are keyed so.
    """
    import duckdb

    from ..schema import migrate  # here: ledger.schema runs the lake's migrations through ddl()

    with duckdb.connect() as scratch:
        migrate(scratch)
        rows = scratch.execute(
            "SELECT table_name, constraint_column_names FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY'"
        ).fetchall()
    keys = {name: tuple(columns) for name, columns in rows}
    keys["call_copies"] = keys["contexts"] = ("trace_id", "span_id")
    keys["run_blocks"] = ("trace_id", "hash")
    return keys


def insert_new(name: str, columns: str, source: str) -> str:
    """INSERT of the rows of ``source`` whose key the table does not hold yet (one per key).

    What a primary key and INSERT OR IGNORE do in the file: a redelivered batch adds nothing.
    """
    key = primary_keys()[name]
    stored = " AND ".join(f's."{k}" = b."{k}"' for k in key)
    distinct = ", ".join(f'"{k}"' for k in key)
    return (
        f"INSERT INTO {name} ({columns}) SELECT {columns} FROM "
        f"(SELECT DISTINCT ON ({distinct}) * FROM {source}) b "
        f"WHERE NOT EXISTS (SELECT 1 FROM {name} s WHERE {stored})"
    )


def upsert(name: str, columns: Sequence[str], source: str) -> str:
    """MERGE of ``source`` (a query or VALUES naming ``columns``) by the table's key: INSERT OR REPLACE."""
    key = primary_keys()[name]
    on = " AND ".join(f'{name}."{k}" = b."{k}"' for k in key)
    sets = ", ".join(f'"{c}" = b."{c}"' for c in columns if c not in key)
    names = ", ".join(f'"{c}"' for c in columns)
    values = ", ".join(f'b."{c}"' for c in columns)
    return (
        f"MERGE INTO {name} USING ({source}) AS b({names}) ON {on} "
        f"WHEN MATCHED THEN UPDATE SET {sets} WHEN NOT MATCHED THEN INSERT ({names}) VALUES ({values})"
    )
