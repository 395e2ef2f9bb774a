"""``turnledger serve`` and ``turnledger up``: the collector, and the collector with the dashboard.

Both run the collector with a budget :class:`~ledger.budgets.Governor`: budgets
are evaluated as spans arrive, swept every ``--sweep-interval`` seconds for
window rollovers, alerts go to the rules' webhooks, and the harness's gate and
``turnledger budget``/``alerts`` (with ``TURNLEDGER_SERVER`` set) go through
the server while it owns the ledger file.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from collector.receiver.defaults import DEFAULT_HOST, DEFAULT_PORT, MiB
from ledger.errors import MalformedInput, TurnledgerError
from ledger.settings import db_path, prices_file, redaction_settings, token

from .dashboard import DEFAULT_DASHBOARD_PORT, start_dashboard, stop_process
from .ingest import expand_paths

if TYPE_CHECKING:
    from collector.receiver.server import CollectorServer, ServerConfig
    from ledger.budgets.governor import Governor

__all__ = ["add_serve", "add_up", "build_server", "cmd_serve", "cmd_up", "load_samples_if_empty", "wait_for_stop"]

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
# One per core, and no more than 4: each is a Python process of ~115 MB idle, and past a
# few the single DuckDB writer is the limit anyway. The writer shares a core: on 2
# cores, 2 workers ingest ~20% more than 1, and 3 less than 2 (ingest_throughput.py).
DEFAULT_DECODE_WORKERS = max(1, min(4, os.cpu_count() or 1))


def add_serve(p: argparse.ArgumentParser) -> None:
    """Run the OTLP/HTTP collector and query API (the single writer of the ledger)."""
    p.add_argument(
        "--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST}: this machine only)"
    )
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}, the OTLP/HTTP port)")
    p.add_argument("--prices", type=Path, default=None, help="price override TOML (default: $TURNLEDGER_PRICES)")
    p.add_argument("--max-body-mb", type=float, default=16.0, help="largest request body accepted, MiB (default 16)")
    p.add_argument(
        "--queue-spans",
        type=int,
        default=200_000,
        help="spans decoded but not yet committed before exporters are told to back off (default 200000)",
    )
    p.add_argument(
        "--decode-workers",
        type=int,
        default=DEFAULT_DECODE_WORKERS,
        help="processes that decode OTLP bodies and build ledger rows while the writer commits; "
        f"0 decodes on the request threads (default {DEFAULT_DECODE_WORKERS}: one per core, at most 4)",
    )
    p.add_argument(
        "--sweep-interval",
        type=float,
        default=15.0,
        help="seconds between budget sweeps that catch window rollovers (default 15)",
    )
    p.add_argument("--db", type=Path, default=None, help="ledger file (default: $TURNLEDGER_DB or ./turnledger.duckdb)")
    p.add_argument(
        "--redact",
        choices=("on", "off"),
        default=None,
        help="redact every stored string: secrets and personal data become [REDACTED:kind] markers "
        "(default: $TURNLEDGER_REDACT or on; off stores spans as received, for a trusted lab; "
        "extra key names and patterns: $TURNLEDGER_REDACT_KEYS, $TURNLEDGER_REDACT_PATTERNS)",
    )
    p.epilog = (
        "Set TURNLEDGER_TOKEN to require `Authorization: Bearer <token>` on ingest, queries and budget routes. "
        "While it runs, set TURNLEDGER_SERVER to its URL so `turnledger budget` and `turnledger alerts` go through it."
    )


def add_up(p: argparse.ArgumentParser) -> None:
    """Start the collector and the dashboard together."""
    add_serve(p)
    p.add_argument(
        "--dashboard-port",
        type=int,
        default=DEFAULT_DASHBOARD_PORT,
        help=f"dashboard port (default {DEFAULT_DASHBOARD_PORT})",
    )
    p.add_argument("--no-dashboard", action="store_true", help="start only the collector")
    p.add_argument(
        "--samples",
        type=Path,
        default=None,
        help="OTLP files loaded on first start into an empty ledger (default: sample_traces/)",
    )
    p.add_argument("--no-samples", action="store_true", help="do not load sample traces into an empty ledger")


def _config(a: argparse.Namespace) -> ServerConfig:
    from collector.receiver.server import ServerConfig
    from ledger.pricing import PriceBook

    if a.max_body_mb <= 0 or a.queue_spans <= 0:
        raise TurnledgerError(f"--max-body-mb ({a.max_body_mb}) and --queue-spans ({a.queue_spans}) must be positive")
    if a.decode_workers < 0:
        raise TurnledgerError(f"--decode-workers ({a.decode_workers}) must be 0 or more")
    if not a.sweep_interval > 0:
        raise TurnledgerError(f"--sweep-interval ({a.sweep_interval}) must be a positive number of seconds")
    try:
        prices = PriceBook.default(a.prices or prices_file())
    except OSError as exc:
        raise TurnledgerError(f"cannot read price file: {exc}") from None
    if a.redact is not None:  # the flag wins; the decoder processes read it from the environment they inherit
        os.environ["TURNLEDGER_REDACT"] = a.redact
    try:
        redact = redaction_settings()[0]  # checked here, before any decoder process starts
    except ValueError as exc:
        raise TurnledgerError(str(exc)) from None
    return ServerConfig(
        host=a.host,
        port=a.port,
        db=a.db or db_path(),
        token=token(),
        max_body_bytes=int(a.max_body_mb * MiB),
        max_decoded_bytes=max(int(a.max_body_mb * MiB), 64 * MiB),
        max_queued_spans=a.queue_spans,
        decode_workers=a.decode_workers,
        redact_content=redact,
        prices=prices,
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def build_server(
    config: ServerConfig, *, sweep_interval: float = 15.0, governor: Governor | None = None
) -> CollectorServer:
    """The collector as ``serve`` and ``up`` run it: with a budget governor whose hook
    evaluates each committed batch and whose sweeper (every ``sweep_interval`` s; 0: off)
    catches window rollovers. The server owns the governor: ``stop()`` closes the
    writer, then the governor, then the ledger."""
    from collector.receiver.server import CollectorServer
    from ledger.budgets.governor import Governor

    return CollectorServer(config, governor=governor or Governor(), sweep_interval=sweep_interval)


def _start(config: ServerConfig, sweep_interval: float = 15.0) -> CollectorServer:
    try:
        server = build_server(config, sweep_interval=sweep_interval)
    except OSError as exc:
        raise TurnledgerError(
            f"cannot listen on {config.host}:{config.port}: {exc.strerror or exc}. "
            "Is another collector running? Choose another --port."
        ) from None
    if not _is_loopback(config.host) and not config.token:
        print(
            f"warning: listening on {config.host} without TURNLEDGER_TOKEN: anyone who can reach this port "
            "can write spans and read the ledger",
            file=sys.stderr,
        )
    return server


def wait_for_stop(poll: Callable[[], bool] | None = None, interval: float = 0.5) -> None:
    """Block until SIGINT/SIGTERM (or until ``poll()`` returns True)."""
    stop = threading.Event()

    def handler(signum: int, frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop.wait(interval):
            if poll is not None and poll():
                return
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def cmd_serve(a: argparse.Namespace) -> int:
    config = _config(a)
    server = _start(config, a.sweep_interval).start()
    print(f"turnledger collector listening on {server.url} (ledger {server.db_path})", flush=True)
    print(f"  point an agent at it: OTEL_EXPORTER_OTLP_ENDPOINT={server.url}", flush=True)
    print(f"  budgets and alerts while it runs: TURNLEDGER_SERVER={server.url} turnledger budget list", flush=True)
    print("  Ctrl-C stops it.", flush=True)
    try:
        wait_for_stop()
    finally:
        print("stopping: committing accepted spans and closing the ledger...", file=sys.stderr, flush=True)
        server.stop()
    return 0


def load_samples_if_empty(server: CollectorServer, folder: Path) -> int:
    """Load OTLP files into the ledger through the writer when it holds no spans; returns spans written."""
    from collector.otlp import read_file

    with server.readers.connection() as cur:
        row = cur.execute("SELECT count(*) FROM spans").fetchone()
    if row and row[0]:
        return 0
    if not folder.exists():
        print(f"note: no sample traces at {folder}; starting with an empty ledger", file=sys.stderr)
        return 0
    written = 0
    for path in expand_paths([folder]):
        try:
            spans = read_file(path)
        except MalformedInput as exc:
            print(f"warning: skipping sample file: {exc}", file=sys.stderr)
            continue
        if spans:
            server.writer.submit(spans).wait(120)
            written += len(spans)
    return written


def cmd_up(a: argparse.Namespace) -> int:
    config = _config(a)
    server = _start(config, a.sweep_interval)
    dashboard: subprocess.Popen[bytes] | None = None
    failed = False
    try:
        if not a.no_samples:
            folder = a.samples or (Path("sample_traces") if Path("sample_traces").is_dir() else SAMPLES)
            n = load_samples_if_empty(server, folder)
            if n:
                print(f"empty ledger: loaded {n} sample spans from {folder}", flush=True)
        server.start()
        dashboard_url = None
        if not a.no_dashboard:
            dashboard = start_dashboard(server=server.url, port=a.dashboard_port)
            dashboard_url = f"http://{'127.0.0.1' if _is_loopback(config.host) else config.host}:{a.dashboard_port}"
        print("turnledger is up", flush=True)
        if dashboard_url:
            print(f"  dashboard  {dashboard_url}", flush=True)
        print(f"  collector  {server.url}  (ledger {server.db_path})", flush=True)
        print(f"  point an agent at it:  export OTEL_EXPORTER_OTLP_ENDPOINT={server.url}", flush=True)
        print(f"  budgets and alerts:    export TURNLEDGER_SERVER={server.url}", flush=True)
        print("  Ctrl-C stops " + ("both." if dashboard else "it."), flush=True)

        def dashboard_died() -> bool:
            nonlocal failed
            if dashboard is not None and dashboard.poll() is not None:
                failed = dashboard.returncode != 0
                print(
                    f"the dashboard exited (code {dashboard.returncode}); stopping the collector too",
                    file=sys.stderr,
                    flush=True,
                )
                return True
            return False

        wait_for_stop(dashboard_died)
    finally:
        print("stopping...", file=sys.stderr, flush=True)
        if dashboard is not None:
            stop_process(dashboard)
        server.stop()
    return 1 if failed else 0
