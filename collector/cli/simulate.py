"""``turnledger simulate`` and ``turnledger samples``: demo data through the real harness.

``simulate`` drives the harness over a realistic workload, with telemetry on:

    turnledger simulate --runs 1000 --seed 7                     # into ./turnledger.duckdb (in-process)
    turnledger simulate --runs 200 --hours 6                     # runs over the last 6 hours
    turnledger simulate --runs 1000 --endpoint http://127.0.0.1:4318   # to a running `turnledger serve`

Spans go through the same telemetry an instrumented agent uses
(``collector.harness.telemetry``): the in-process ledger exporter, or OTLP/HTTP. The
workload itself is ``collector.demo.simulate``: its runs start over a window ending
now (one day unless ``--days``/``--hours`` say otherwise), with trace and span ids
fixed by the seed, so the same seed played twice is charged once. Progress goes to
stderr, the summary (with the prompt-cache hit rate) to stdout.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from ledger.errors import TurnledgerError
from ledger.settings import CAPTURE_MODES, capture_mode, db_path, server_url

__all__ = ["Progress", "add_samples", "add_simulate", "cmd_samples", "cmd_simulate"]


def add_simulate(p: argparse.ArgumentParser) -> None:
    """Drive the harness with scripted models over a realistic workload."""
    p.add_argument("--runs", type=int, default=200, help="number of agent runs (default 200)")
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="workload seed: the same seed plays the same runs with the same trace ids, so playing it "
        "again into the same ledger adds nothing (default 0)",
    )
    out = p.add_mutually_exclusive_group()
    out.add_argument(
        "--db",
        type=Path,
        default=None,
        help="ledger file written in-process (default: $TURNLEDGER_DB or ./turnledger.duckdb)",
    )
    out.add_argument(
        "--endpoint",
        default=None,
        help="send OTLP/HTTP to a running `turnledger serve` at this URL instead (e.g. http://127.0.0.1:4318; "
        "default without --db: $TURNLEDGER_SERVER when set)",
    )
    p.add_argument("--workers", type=int, default=1, help="runs executed concurrently (threads; default 1)")
    window = p.add_mutually_exclusive_group()
    window.add_argument(
        "--days", type=float, default=None, help="the runs start over the N days ending now (default 1)"
    )
    window.add_argument("--hours", type=float, default=None, help="the runs start over the N hours ending now")
    p.add_argument(
        "--capture",
        choices=CAPTURE_MODES,
        default=None,
        help="request-payload capture (default: $TURNLEDGER_CAPTURE or redacted)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")


class Progress:
    """A one-line progress bar on a terminal; occasional plain lines otherwise."""

    def __init__(self, total: int, stream: TextIO | None = None, width: int = 30) -> None:
        self.total = max(total, 1)
        self.stream = stream or sys.stderr
        self.width = width
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.perf_counter()
        self._last_draw = 0.0
        self._last_tenth = -1

    def __call__(self, done: int) -> None:
        now = time.perf_counter()
        if self.tty:
            if done < self.total and now - self._last_draw < 0.1:
                return
            self._last_draw = now
            filled = int(self.width * done / self.total)
            rate = done / max(now - self.started, 1e-9)
            eta = (self.total - done) / rate if rate > 0 else 0.0
            bar = "#" * filled + "-" * (self.width - filled)
            self.stream.write(f"\rsimulate [{bar}] {done}/{self.total} runs  {rate:,.0f} runs/s  eta {eta:4.1f} s ")
            if done >= self.total:
                self.stream.write("\n")
            self.stream.flush()
            return
        tenth = done * 10 // self.total
        if tenth != self._last_tenth:
            self._last_tenth = tenth
            print(f"simulate: {done}/{self.total} runs", file=self.stream, flush=True)


def _check_endpoint(traces_url: str) -> None:
    """Fail before running anything when no collector answers (the exporter would only log)."""
    import urllib.error
    import urllib.request

    base = traces_url.rsplit("/v1/traces", 1)[0]
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=3) as response:
            if response.status == 200:
                return
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise TurnledgerError(f"no collector at {base}: {reason}. Start one with `turnledger serve`.") from None
    raise TurnledgerError(f"collector at {base} is not healthy")


def _exporter(a: argparse.Namespace) -> tuple[Any, Any, str, int]:
    """Where the spans go: (exporter, the ledger connection or None, target, export batch size)."""
    from collector.harness.telemetry import LedgerSpanExporter, otlp_exporter, traces_endpoint

    endpoint = a.endpoint or (server_url() if a.db is None else None)
    if endpoint:
        try:
            url = traces_endpoint(endpoint)
        except ValueError as exc:
            raise TurnledgerError(str(exc)) from None
        _check_endpoint(url)
        return otlp_exporter(url), None, url, 512  # one request stays well under the server's body limit
    from ledger.store import open_ledger

    path = a.db or db_path()
    con = open_ledger(path)  # fails now, clearly, if a server holds the file
    # The observer redacted (or, with --capture full, was told not to): every
    # producer here is ours, so ingest need not redact the payloads again.
    exporter = LedgerSpanExporter(con=con, redact_content=False)
    return exporter, con, str(path), 4_096  # bigger transactions: ingest cost is per batch as much as per span


def cmd_simulate(a: argparse.Namespace) -> int:
    # Imported here so `turnledger --help` stays fast.
    from collector.demo.run_ids import RunIds
    from collector.demo.simulate import simulate
    from collector.harness.telemetry import OTelObserver, build_resource
    from collector.harness.telemetry.setup import tracer_provider

    if a.runs < 0:
        raise TurnledgerError(f"--runs must be 0 or more, got {a.runs!r}")
    if a.workers < 1:
        raise TurnledgerError(f"--workers must be 1 or more, got {a.workers!r}")
    days = a.hours / 24 if a.hours is not None else a.days if a.days is not None else 1.0
    if not days > 0:
        raise TurnledgerError(f"--days/--hours must be more than 0, got {a.hours if a.hours is not None else a.days!r}")
    capture = a.capture or capture_mode()
    exporter, con, target, batch_size = _exporter(a)
    provider = tracer_provider(
        [exporter],
        resource=build_resource("turnledger-simulate", environment="simulation"),
        max_queue_size=200_000,
        max_export_batch_size=batch_size,
        schedule_delay_millis=500,
        id_generator=RunIds(),  # ids fixed by (seed, run): a replayed seed is stored and charged once
    )
    observer = OTelObserver(provider, capture=capture)
    progress = None if a.quiet else Progress(a.runs)
    started = time.perf_counter()
    try:
        summary = simulate(
            a.runs,
            seed=a.seed,
            observer=observer,
            workers=a.workers,
            days=days,
            on_progress=progress,
            checkpoint=provider.force_flush,  # back-pressure: the exporter keeps up
        )
    finally:
        provider.shutdown()  # flushes the rest
        if con is not None:
            con.execute("CHECKPOINT")
            con.close()
    elapsed = time.perf_counter() - started
    print(
        f"simulated {summary.runs} runs in {elapsed:.1f} s: {summary.runs / max(elapsed, 1e-9):,.0f} runs/s end to "
        f"end ({summary.runs_per_s:,.0f} runs/s in the harness), seed {a.seed}, {a.workers} worker(s), capture {capture}"
    )
    _print_summary(summary, exporter, target, a.seed)
    return 0


def _print_summary(s: Any, exporter: Any, target: str, seed: int) -> None:
    from collector.harness.telemetry import LedgerSpanExporter

    causes = ", ".join(f"{k} {v}" for k, v in s.stop_causes.most_common())
    models = ", ".join(f"{k} {v}" for k, v in s.models.most_common())
    sites = ", ".join(f"{k} {v}" for k, v in s.call_sites.most_common())
    tenants = ", ".join(f"{k} {v}" for k, v in s.tenants.most_common())
    print(f"  model calls {s.model_calls} ({s.retry_attempts} retry attempts), tool calls {s.tool_calls}")
    print(f"  stop causes: {causes}")
    print(f"  models: {models}")
    print(f"  call sites: {sites}")
    print(f"  tenants: {tenants}")
    print(f"  prompt cache hit rate {s.cache_hit_rate:.1%} (cache reads over all input tokens)")
    print(f"  harness estimate ${s.cost_usd:.4f} (the ledger prices every charge itself)")
    if isinstance(exporter, LedgerSpanExporter):
        r = exporter.report
        print(f"  wrote {r.spans_written} spans and {r.charges_written} charges to {target}")
        if s.runs and not r.spans_written:
            print(f"  nothing new: seed {seed} was already played into this ledger; pass another --seed to add runs")
        if exporter.failures:
            print(f"  warning: {exporter.failures} batch(es) failed to write; see the log above", file=sys.stderr)
        print(f"next: turnledger report --db {target}")
    else:
        print(f"  sent to {target}")


def add_samples(p: argparse.ArgumentParser) -> None:
    """Regenerate sample_traces/ from the seed scenarios."""
    p.add_argument("--out", type=Path, default=Path("sample_traces"), help="folder to write (default sample_traces/)")


def cmd_samples(a: argparse.Namespace) -> int:
    from collector.demo.samples import write_samples

    for path in write_samples(a.out):
        print(path)
    return 0
