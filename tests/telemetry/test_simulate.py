"""``turnledger simulate``: a realistic, deterministic mix through the real harness and telemetry."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from collector.cli import main
from collector.cli.simulate import Progress
from collector.demo import simulate as simulate_module
from collector.demo.simulate import MODELS, plan_run, simulate
from collector.demo.simulated_time import VirtualClock
from collector.harness import InMemoryObserver
from collector.receiver import CollectorServer, ServerConfig
from ledger import queries as q
from ledger.store import open_ledger

END = 1_790_000_000_000_000_000


def test_the_mix_covers_every_shape_and_is_deterministic() -> None:
    recorder = InMemoryObserver()
    first = simulate(150, seed=11, end_ns=END, observer=recorder)
    again = simulate(150, seed=11, end_ns=END, workers=3)  # threads change nothing but speed
    assert {k: v for k, v in first.to_dict().items() if k not in ("seconds", "runs_per_s")} == {
        k: v for k, v in again.to_dict().items() if k not in ("seconds", "runs_per_s")
    }
    assert set(first.stop_causes) >= {"completed", "loop_detected", "handoff", "budget_exceeded", "max_steps",
                                      "refusal", "max_tokens"}  # fmt: skip
    assert set(first.models) == set(MODELS)
    assert set(first.call_sites) == {"agent", "summarizer"}
    assert len(first.tenants) == 5 and first.retry_attempts > 0
    shapes = {e.attributes["shape"] for e in recorder.events if e.name == "turnledger.loop_detector.trip"}
    assert shapes == {"repeat", "cycle", "stall", "step_cap"}
    causes = {e.attributes["cause"] for e in recorder.events if e.name == "turnledger.retry"}
    assert {"429", "529"} <= causes
    other = simulate(150, seed=12, end_ns=END)
    assert other.to_dict()["stop_causes"] != first.to_dict()["stop_causes"] or other.cost_usd != first.cost_usd


def test_plans_are_spread_over_the_window_in_order() -> None:
    day = 86_400 * 10**9
    plans = [plan_run(3, i, 100, END - 7 * day, 7 * day) for i in range(100)]
    starts = [p.start_ns for p in plans]
    assert starts == sorted(starts) and END - 7 * day <= starts[0] and starts[-1] < END
    assert plan_run(3, 42, 100, END - 7 * day, 7 * day) == plans[42]


def test_virtual_clock_branches_do_not_depend_on_thread_timing() -> None:
    import contextvars
    import threading

    clock = VirtualClock(1_000_000)
    start = clock.clock_ns()
    out: dict[str, tuple[int, int]] = {}

    def job(name: str, seconds: float) -> None:
        begin = clock.clock_ns()
        clock.sleep(seconds)
        out[name] = (begin, clock.clock_ns())

    threads = [
        threading.Thread(target=contextvars.copy_context().run, args=(job, name, s))
        for name, s in (("slow", 0.3), ("fast", 0.1))
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert out["slow"][0] == out["fast"][0] == start + 1_000  # both forked from the same instant
    assert out["slow"][1] - out["slow"][0] == 300_000_000 + 1_000
    assert clock.clock_ns() == out["slow"][1] + 1_000  # the run resumes after the slowest branch


def test_simulate_command_writes_the_ledger(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "sim.duckdb"
    assert main(["simulate", "--runs", "30", "--seed", "5", "--db", str(db), "--workers", "2"]) == 0
    out, err = capsys.readouterr()
    assert "simulated 30 runs" in out and "runs/s" in out and f"to {db}" in out
    assert "30/30 runs" in err  # progress on stderr
    with open_ledger(db, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (30,)
        assert con.execute("SELECT count(DISTINCT tenant) FROM runs").fetchone()[0] >= 3
        calls = con.execute("SELECT count(*) FROM charges").fetchone()[0]
        assert f"model calls {calls} " in out
        assert q.run(con, q.stop_causes())["runs"].sum() == 30


def test_simulate_command_sends_to_a_running_collector(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "served.duckdb"
    totals = []
    for _ in range(2):  # the same seed twice, through the collector: stored and charged once
        server = CollectorServer(ServerConfig(port=0, db=db)).start()
        try:
            assert main(["simulate", "--runs", "12", "--seed", "2", "--endpoint", server.url, "--quiet"]) == 0
        finally:
            server.stop()
        assert f"sent to {server.url}/v1/traces" in capsys.readouterr().out
        totals.append(_totals(db))
    assert totals[0] == totals[1] and totals[0][2] == 12


def test_simulate_command_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--runs", "2", "--endpoint", "http://127.0.0.1:9"]) == 2
    assert "no collector at http://127.0.0.1:9" in capsys.readouterr().err
    assert main(["simulate", "--runs", "-1", "--db", str(tmp_path / "x.duckdb")]) == 2
    assert "--runs" in capsys.readouterr().err


def test_progress_draws_a_bar_on_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    progress = Progress(4, stream)
    for done in range(1, 5):
        progress(done)
    assert "[" in stream.getvalue() and "4/4 runs" in stream.getvalue() and stream.getvalue().endswith("\n")


def test_simulate_summary_is_json_ready() -> None:
    s = simulate(5, seed=1, end_ns=END)
    out = io.StringIO()
    with redirect_stdout(out):
        print(json.dumps(s.to_dict()))
    assert json.loads(out.getvalue())["runs"] == 5


def _totals(db: Path) -> tuple:
    with open_ledger(db, read_only=True) as con:
        return con.execute(
            "SELECT (SELECT count(*) FROM spans), (SELECT count(*) FROM charges), (SELECT count(*) FROM runs), "
            "(SELECT sum(usd_total) FROM runs)"
        ).fetchone()


def test_the_same_seed_twice_is_charged_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "sim.duckdb"
    args = ["simulate", "--runs", "25", "--seed", "4", "--db", str(db), "--quiet", "--workers", "2"]
    assert main(args) == 0
    first = _totals(db)
    capsys.readouterr()
    assert main(args) == 0  # the same trace and span ids: every span is already stored, every call charged
    assert _totals(db) == first and first[2] == 25
    out = capsys.readouterr().out
    assert "wrote 0 spans and 0 charges" in out and "nothing new: seed 4 was already played" in out
    assert main([*args[:4], "5", *args[5:]]) == 0  # another seed: new runs
    assert _totals(db)[2] == 50


def _run_starts(db: Path) -> tuple[int, int]:
    """The first and the last run's start (ns)."""
    with open_ledger(db, read_only=True) as con:
        return con.execute("SELECT epoch_ns(min(started_at)), epoch_ns(max(started_at)) FROM runs").fetchone()


@pytest.mark.parametrize(("flags", "window_s"), [([], 86_400), (["--hours", "2"], 7_200), (["--days", "3"], 259_200)])
def test_runs_start_in_a_window_that_ends_now(
    tmp_path: Path, flags: list[str], window_s: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "sim.duckdb"
    now = 1_796_150_000 * 10**9  # "now" fixed, so the window's bounds are exact, whatever the machine's speed
    monkeypatch.setattr(simulate_module, "now_ns", lambda: now)
    assert main(["simulate", "--runs", "40", "--seed", "6", "--db", str(db), "--quiet", *flags]) == 0
    first, last = _run_starts(db)
    # Every run starts inside [now - window, now] ...
    assert now - window_s * 10**9 <= first <= last <= now
    # ... and the seed's runs spread over most of the window (their offsets are fixed by the seed).
    assert last - first >= window_s * 10**9 * 0.8


def test_the_hit_rate_is_printed_and_is_the_ledgers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "sim.duckdb"
    assert main(["simulate", "--runs", "60", "--seed", "8", "--db", str(db), "--quiet"]) == 0
    out = capsys.readouterr().out
    printed = float(out.split("prompt cache hit rate ")[1].split("%")[0]) / 100
    with open_ledger(db, read_only=True) as con:
        ledger_rate = float(q.records(con, q.cache_hit_rate())[0]["hit_rate"])
    assert printed == pytest.approx(ledger_rate, abs=0.001)
    assert printed > 0.4  # production-sized prompts: most input of a multi-turn run is read back


def test_window_flags_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--runs", "2", "--hours", "0", "--db", str(tmp_path / "x.duckdb")]) == 2
    assert "--days/--hours must be more than 0" in capsys.readouterr().err


def test_each_span_gets_the_same_id_every_time_parallel_tools_included() -> None:
    from collector.demo.run_ids import RunIds
    from collector.demo.simulate import RunPlan, execute
    from collector.harness.telemetry import InMemorySpanExporter, OTelObserver, tracer_provider

    def ids() -> dict[tuple[str, str, int], tuple[str, str]]:
        exporter = InMemorySpanExporter()
        provider = tracer_provider([exporter], batch=False, id_generator=RunIds())
        # fan-out 3: three fetch_page calls at once, each calling the summarizer on its own thread
        plan = RunPlan(1, 9, "acme", "enterprise", "research", MODELS[0], END, pages=6, fanout=3)
        execute(plan, OTelObserver(provider))
        provider.shutdown()
        out = {}
        for s in exporter.get_finished_spans():
            a = s.attributes or {}
            key = (s.name, str(a.get("gen_ai.tool.call.id", a.get("gen_ai.response.id", ""))), s.start_time or 0)
            out[key] = (format(s.context.trace_id, "032x"), format(s.context.span_id, "016x"))
        return out

    import sys

    first = ids()
    assert len({trace for trace, _ in first.values()}) == 1 and len(first) > 12
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch as often as they can: the tools' order varies
    try:
        assert all(ids() == first for _ in range(5))
    finally:
        sys.setswitchinterval(switch)
