"""Ledgers written by real earlier releases, full of rows, opened by this version (#41 item 1).

A user who upgrades brings a ledger the old release wrote: budgets and their alerts, charges,
captured contexts, judgments, sampling decisions. Each release in ``RELEASES`` writes one with its
own code (its CLI, in its own virtual environment); this version must then open it — file and
lake — with ``report --json`` as before (new fields aside), every row kept, every captured turn
the same, and ingest going on. A migration that fails names its version and step and leaves the
ledger to the old release; a crash inside one resumes on the next start.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from ledger.schema import MIGRATIONS

from ..lake.conftest import catalog_dsn, postgres  # noqa: F401  (the lake's fixtures, shared)
from .releases import RELEASES, ROOT, Release, in_history, installed

_HANG_S = 600  # one CLI command on a loaded machine; a hang guard, not a figure
# Tables the old release fills through its CLI below; runs_pending is a work queue, empty at rest.
_QUEUES = {"runs_pending"}
# Captured content changed its layout (migration 19 moved a run's own blocks out of content_blocks):
# its rows are not kept one for one, the turns it rebuilds are (compared below).
_RELAID = {"content_blocks", "run_blocks"}
# What the release's collector alone writes (its sampler): one row in that release's own schema.
_SAMPLING_ROW = (
    "INSERT INTO sampling_decisions SELECT trace_id, true, 'kept: upgrade test', now() FROM runs "
    "ORDER BY trace_id LIMIT 3"
)


@dataclass
class Written:
    """A ledger as a release left it: where it is, what its report said, its rows per table."""

    release: Release
    target: str
    data_path: Path | None
    report: dict[str, Any]
    counts: dict[str, int]
    turns: dict[str, str]  # "trace_id turn": the request as the release printed it

    def args(self) -> list[str]:
        return ["--db", self.target]


_data_path = ""  # a lake's Parquet directory, for every command (older releases' simulate has no flag for it)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TURNLEDGER_")}
    return {**env, "TURNLEDGER_ALLOW_PRIVATE_WEBHOOKS": "0", "TURNLEDGER_DATA_PATH": _data_path, **extra}


def _run(cmd: list[str], env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=_HANG_S, env=env or _env(), cwd=ROOT)
    if check and done.returncode != 0:
        raise AssertionError(f"{cmd[:3]} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return done


def _this_version(*args: str) -> subprocess.CompletedProcess[str]:
    """This checkout's CLI, as a user runs it (its own process)."""
    return _run([sys.executable, "-m", "collector.cli", *args], check=False)


def _counts(python: Path, target: str, data_path: Path | None) -> dict[str, int]:
    """Rows per table, read by the given interpreter's turnledger (a release's, or this one's)."""
    script = (
        "import json, sys\nfrom ledger.store import open_ledger\n"
        "con = open_ledger(sys.argv[1], read_only=True, data_path=sys.argv[2] or None)\n"
        'names = [n for (n,) in con.execute("SELECT table_name FROM information_schema.tables '
        "WHERE table_catalog = current_database() AND table_schema = 'main'\").fetchall()]\n"
        "print(json.dumps({n: con.execute(f'SELECT count(*) FROM \"{n}\"').fetchone()[0] for n in names}))\n"
    )
    out = _run([str(python), "-I", "-c", script, target, str(data_path or "")]).stdout  # -I: its own ledger
    return dict(json.loads(out))


def _turns(exe: list[str], written_args: list[str], report: dict[str, Any]) -> dict[str, str]:
    """Each long-tail run's second turn, as the request the CLI prints (captured content survives)."""
    turns = {}
    for run in report["long_tail"][:4]:
        done = _run([*exe, "context", run["trace_id"], "--turn", "2", "--show", "request", *written_args], check=False)
        if done.returncode == 0:
            turns[f"{run['trace_id']} 2"] = done.stdout
    return turns


def _write(release: Release, target: str, data_path: Path | None) -> Written:
    """The release writes a ledger the way a user fills one: a budget with a webhook, the sample traces,
    a recent simulated workload (so the month's budget alerts), a sweep (alerts and their deliveries)."""
    if not in_history(release.commit):
        pytest.skip(f"release {release.commit} is not in this clone's history (a shallow clone?)")
    exe = installed(release)
    global _data_path
    _data_path = str(data_path or "")
    where = ["--db", target]
    _run([str(exe), "budget", "add", "tiny", "--limit", "0.01", "--window", "month",
          "--webhook", "http://127.0.0.1:9/hook", *where], env=_env(TURNLEDGER_ALLOW_PRIVATE_WEBHOOKS="1"))  # fmt: skip
    _run([str(exe), "ingest", str(ROOT / "sample_traces"), *where])
    _run([str(exe), "simulate", "--runs", "6", "--hours", "1", "--seed", "4", "--quiet", *where])
    _run([str(exe), "budget", "sweep", *where])  # loopback refused now: each delivery recorded at once
    python = exe.parent / "python"
    _run([str(python), "-I", "-c", "import sys\nfrom ledger.store import open_ledger\n"
          f"open_ledger(sys.argv[1], data_path=sys.argv[2] or None).execute({_SAMPLING_ROW!r})",
          target, str(data_path or "")])  # fmt: skip
    report = json.loads(_run([str(exe), "report", "--json", *where]).stdout)
    counts = _counts(python, target, data_path)
    empty = {t for t, n in counts.items() if not n} - _QUEUES - {"schema_migrations"}
    assert not empty, f"{release.name} left tables empty: {sorted(empty)}"
    return Written(release, target, data_path, report, counts, _turns([str(exe)], where, report))


def _subset(before: Any, after: Any, path: str = "report") -> list[str]:
    """Where ``after`` differs from ``before`` (keys ``after`` adds are new fields, not differences)."""
    if isinstance(before, dict) and isinstance(after, dict):
        return [
            d
            for k, v in before.items()
            for d in (_subset(v, after[k], f"{path}.{k}") if k in after else [f"{path}.{k} is gone"])
        ]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [d for i, (b, a) in enumerate(zip(before, after, strict=True)) for d in _subset(b, a, f"{path}[{i}]")]
    return [] if before == after else [f"{path}: {before!r} -> {after!r}"[:300]]


def _opened_by_this_version(written: Written) -> None:
    done = _this_version("report", "--json", *written.args())
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert _subset(written.report, json.loads(done.stdout)) == []

    counts = _counts(Path(sys.executable), written.target, written.data_path)
    for table, rows in written.counts.items():
        if table not in _QUEUES | _RELAID | {"schema_migrations"}:
            assert counts.get(table, 0) >= rows, f"{table}: {rows} rows before the upgrade, {counts.get(table)} after"
    assert counts["schema_migrations"] == len(MIGRATIONS)
    assert written.turns, "no captured turn to compare"
    assert _turns([sys.executable, "-m", "collector.cli"], written.args(), written.report) == written.turns

    added = _this_version("simulate", "--runs", "3", "--hours", "1", "--seed", "77", "--quiet", *written.args())
    assert added.returncode == 0, added.stderr[-3000:]
    after = json.loads(_this_version("report", "--json", *written.args()).stdout)
    assert after["runs"] == written.report["runs"] + 3


@pytest.fixture(scope="module")
def file_ledgers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Written]]:
    """One file ledger per release, written once; each test opens its own copy."""
    made: dict[str, Written] = {}
    yield made


def _file_written(release: Release, made: dict[str, Written], tmp_path: Path, tmp_factory: Any) -> Written:
    if release.name not in made:
        path = tmp_factory.mktemp(release.name) / "ledger.duckdb"
        made[release.name] = _write(release, str(path), None)
    original = made[release.name]
    copy = tmp_path / "ledger.duckdb"
    shutil.copy(original.target, copy)
    return Written(release, str(copy), None, original.report, original.counts, original.turns)


@pytest.mark.parametrize("release", RELEASES, ids=lambda r: r.name)
def test_a_file_written_by_an_earlier_release_opens_with_its_figures(
    release: Release, file_ledgers: dict[str, Written], tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _opened_by_this_version(_file_written(release, file_ledgers, tmp_path, tmp_path_factory))


@pytest.mark.parametrize("release", RELEASES, ids=lambda r: r.name)
def test_a_lake_written_by_an_earlier_release_opens_with_its_figures(
    release: Release,
    catalog_dsn: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    _opened_by_this_version(_write(release, f"ducklake:postgres:{catalog_dsn}", tmp_path / "lake-data"))


_PLANTED = """
import sys
from ledger import schema
def planted(con):  # what broke #41: SET NOT NULL in the transaction that added the column
    schema._execute(con, "ALTER TABLE charges ADD COLUMN planted BOOLEAN DEFAULT false")
    schema._execute(con, "ALTER TABLE charges ALTER COLUMN planted SET NOT NULL")
schema.MIGRATIONS.append((99, "a planted migration", planted))
from collector.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_failing_migration_names_itself_and_leaves_the_ledger_to_the_old_release(
    file_ledgers: dict[str, Written], tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    written = _file_written(RELEASES[-1], file_ledgers, tmp_path, tmp_path_factory)
    done = _run([sys.executable, "-c", _PLANTED, "report", "--json", *written.args()], check=False)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    message = done.stderr.strip().splitlines()[-1]
    assert "migration 99 (a planted migration) failed at step 2" in message
    assert "SET NOT NULL" in message and "outstanding updates" in message

    with duckdb.connect(written.target, read_only=True) as con:
        columns = {
            c
            for (c,) in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = 'charges'").fetchall()
        }
        applied = {v for (v,) in con.execute("SELECT version FROM schema_migrations").fetchall()}
    assert "planted" not in columns and 99 not in applied  # nothing of the failed migration stayed

    old = installed(written.release)
    before_release = json.loads(_run([str(old), "report", "--json", *written.args()]).stdout)
    assert _subset(written.report, before_release) == []  # the release that wrote it still reads it
    _opened_by_this_version(written)  # and without the planted step, this version upgrades it


_CRASH = """
import os, signal, sys
from ledger import schema
version, name, step = schema.MIGRATIONS[-1]
def crashing(con):  # killed inside the migration's transaction, after its first statement
    schema._execute(con, "ALTER TABLE charges ADD COLUMN crash_probe BOOLEAN DEFAULT false")
    os.kill(os.getpid(), signal.SIGKILL)
schema.MIGRATIONS[-1] = (version, name, crashing)
from ledger.store import open_ledger
open_ledger(sys.argv[1])
"""


def test_a_crash_inside_a_migration_resumes_on_the_next_start(
    file_ledgers: dict[str, Written], tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    written = _file_written(RELEASES[-1], file_ledgers, tmp_path, tmp_path_factory)
    crashed = _run([sys.executable, "-c", _CRASH, written.target], check=False)
    assert crashed.returncode == -9  # SIGKILL, inside the last migration
    with duckdb.connect(written.target, read_only=True) as con:
        applied = {v for (v,) in con.execute("SELECT version FROM schema_migrations").fetchall()}
        columns = {
            c
            for (c,) in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = 'charges'").fetchall()
        }
    assert MIGRATIONS[-1][0] not in applied and MIGRATIONS[-2][0] in applied  # the ones before it committed
    assert "crash_probe" not in columns  # and nothing of the one it was in
    _opened_by_this_version(written)
