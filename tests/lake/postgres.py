"""A real PostgreSQL server for the lake tests: initdb + pg_ctl in a temporary directory.

The server binaries refuse to run as root, so as root every command runs as the
``postgres`` system user (``runuser``); otherwise as the current user. Sockets stay in
the server's own directory and it listens on 127.0.0.1 only, on a free port, with
trust authentication (nothing but this machine's tests can reach it).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

BIN_DIRS = (Path("/usr/lib/postgresql/15/bin"), Path("/usr/lib/postgresql/16/bin"), Path("/usr/lib/postgresql/17/bin"))
SERVICE_USER = "postgres"


def find_bin_dir() -> Path | None:
    """Where initdb and pg_ctl are, or None on a machine without PostgreSQL's server binaries."""
    for bin_dir in BIN_DIRS:
        if (bin_dir / "initdb").exists() and (bin_dir / "pg_ctl").exists():
            return bin_dir
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PostgresServer:
    bin_dir: Path
    root: Path
    port: int

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def _run(self, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        command: Sequence[str] = [str(self.bin_dir / tool), *args]
        if os.geteuid() == 0:  # initdb and pg_ctl refuse root
            command = ["runuser", "-u", SERVICE_USER, "--", *command]
        return subprocess.run(command, check=True, capture_output=True, text=True, timeout=120)

    def start(self) -> None:
        self._run("initdb", "-D", str(self.data_dir), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
        self._launch()

    def _launch(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run("pg_ctl", "-D", str(self.data_dir), "-o", options, "-l", str(self.root / "server.log"), "-w", "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "stop")

    def restart(self, down_s: float) -> None:
        """Stop (fast: open connections are cut mid-transaction), stay down ``down_s``, start again."""
        self.stop()
        time.sleep(down_s)
        self._launch()

    def create_database(self, name: str) -> str:
        """A new empty database; returns its libpq connection string.

        Over a connection rather than ``createdb``: a test's database costs no process start
        (``runuser`` + ``createdb`` took 0.5 s of a loaded machine per test)."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.dsn("postgres"), autocommit=True) as pg:
            pg.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.dsn(name)

    def dump(self, dbname: str, path: Path) -> None:
        """``pg_dump -Fc`` of a database into ``path`` (under ``root``: the server's user writes it)."""
        self._run("pg_dump", *self._client_args(), "-Fc", "-f", str(path), dbname)

    def restore(self, dbname: str, path: Path) -> None:
        self._run("pg_restore", *self._client_args(), "-d", dbname, str(path))

    def _client_args(self) -> tuple[str, ...]:
        return ("-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres")

    def dsn(self, dbname: str) -> str:
        return f"dbname={dbname} host=127.0.0.1 port={self.port} user=postgres"


def start_server(bin_dir: Path) -> PostgresServer:
    root = Path(tempfile.mkdtemp(prefix="turnledger-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, SERVICE_USER, SERVICE_USER)
    server = PostgresServer(bin_dir, root, _free_port())
    try:
        server.start()
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return server
