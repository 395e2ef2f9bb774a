"""Every benchmark runs as written: each script imports, and the runnable ones measure at a tiny size.

The figures in closing notes and docs/ come from benchmarks/, so a moved module or a changed
default must break a test here rather than a figure nobody can reproduce. Each script runs as a
subprocess from the repository root, exactly as its docstring tells a user to run it; the test
asserts it exits 0 and prints its figures' names (never their values: those are benchmarks').
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"

# script -> (tiny arguments, text its output must contain)
RUNS: dict[str, tuple[list[str], list[str]]] = {
    "dashboard_queries.py": (["--runs", "300"], ["slowest page:", "median (goal"]),
    "redaction.py": (["--rounds", "1", "--spans", "50"], ["µs/KB median"]),
    "logs_ingest.py": (["--items", "300", "--repeats", "1"], ["logs / traces, committed"]),
    "context_store.py": (["--runs", "2", "--turns", "3"], ["captured calls", "rebuild one call's payload"]),
    "runs_rebuild.py": (["--chunks", "2", "--chunk-spans", "100"], ["runs rebuild vs ledger size"]),
    "visibility_lag.py": (["--requests", "3", "--runs-per-request", "1"], ["acknowledged -> queryable"]),
    "alert_latency.py": (["latency", "--repeats", "1"], ["warn", "exceeded", "commits per burst"]),
    "telemetry_overhead.py": (["--rounds", "1", "--repeat", "1"], ["worst tracing overhead"]),
    "startup.py": (["--repeats", "1", "--worker-repeats", "1", "--skip-up"], ["heaviest packages"]),
    "content_store.py": (
        ["--spans", "300", "--calls", "10", "30", "--rounds", "1", "--per-round", "5"],
        ["bytes/span on disk", "rebuild one turn"],
    ),
}
# Scripts only imported here, each with why: a library of the others, or a run that needs a
# PostgreSQL catalog / S3 endpoint or more than seconds even at its smallest size.
IMPORT_ONLY = {
    "agent_workload.py": "a library: the workload other benchmarks send",
    "decode_memory.py": "four maximum-size bodies are what it measures: over a GiB of peak at any setting",
    "exporters.py": "a library: exporter processes other benchmarks start",
    "ingest_throughput.py": "its exporter processes take half a minute even at 300 spans",
    "lake_commit.py": "needs a PostgreSQL catalog",
    "lake_ingest.py": "needs a PostgreSQL catalog and S3 endpoint",
    "webhook_isolation.py": "its slow receivers hold each round for the 5 s delivery deadline, by design",
}
# What benchmarks._common.header prints first and footer last: the commit and the load beside the figures.
EVERY_RUN_PRINTS = ["(commit ", "load average", "(after the run: load average"]
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))


def test_every_script_is_run_or_named_import_only() -> None:
    assert sorted({*RUNS, *IMPORT_ONLY}) == SCRIPTS


def _python(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_imports(script: str) -> None:
    """Top-level code only (run_name is not __main__): an import a move broke fails here."""
    code = f"import runpy, sys; sys.argv = [{script!r}]; runpy.run_path({str(BENCHMARKS / script)!r}, run_name='smoke')"
    done = _python(["-c", code], dict(os.environ))
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("script", sorted(RUNS))
def test_script_measures_at_a_tiny_size(script: str, tmp_path: Path) -> None:
    args, expected = RUNS[script]
    # A clean environment as a new user has, but the benchmark's ledger cache in this test's folder.
    env = {k: v for k, v in os.environ.items() if not k.startswith("TURNLEDGER_")}
    env["TURNLEDGER_BENCH_DIR"] = str(tmp_path)
    done = _python([str(BENCHMARKS / script), *args], env)
    assert done.returncode == 0, done.stdout[-1000:] + done.stderr[-2000:]
    for text in [*expected, *EVERY_RUN_PRINTS]:
        assert text in done.stdout, f"{script} did not print {text!r}:\n{done.stdout[-1500:]}"
