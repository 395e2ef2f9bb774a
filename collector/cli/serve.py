"""``turnledger serve`` and ``turnledger up``: the collector, and the collector with the dashboard.

Both run the collector with a budget :class:`~ledger.budgets.Governor`: budgets
are evaluated as spans arrive, swept every ``--sweep-interval`` seconds for
window rollovers, alerts go to the rules' webhooks, and the harness's gate and
``turnledger budget``/``alerts`` (with ``TURNLEDGER_SERVER`` set) go through
the server while it owns the ledger file.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from collector.receiver.defaults import DEFAULT_GRPC_PORT, DEFAULT_HOST, DEFAULT_PORT, MiB
from ledger.errors import MalformedInput, TurnledgerError
from ledger.exposure import (
    INSECURE_NO_AUTH,
    OPEN_BY_CHOICE,
    collector_auth,
    dashboard_login,
    is_loopback,
    oidc_configured,
)
from ledger.settings import ALLOW_PRIVATE_WEBHOOKS, dashboard_password, db_path, prices_file, redaction_settings, token

from .args import add_data_path, require_free_port
from .dashboard import DEFAULT_DASHBOARD_PORT, add_browser_flags, start_dashboard, stop_process
from .ingest import expand_paths

if TYPE_CHECKING:
    from collector.receiver.server import CollectorServer, ServerConfig
    from ledger.budgets.governor import Governor
    from ledger.budgets.targets import TargetPolicy

__all__ = [
    "add_serve",
    "add_up",
    "build_server",
    "cmd_serve",
    "cmd_up",
    "load_samples_if_empty",
    "wait_for_stop",
    "webhook_policy",
]

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
# One per core, and no more than 4: each is a Python process of ~115 MB idle, and past a
# few the single DuckDB writer is the limit anyway. The writer shares a core: on 2
# cores, 2 workers ingest ~20% more than 1, and 3 less than 2 (ingest_throughput.py).
DEFAULT_DECODE_WORKERS = max(1, min(4, os.cpu_count() or 1))


def add_serve(p: argparse.ArgumentParser) -> None:
    """Run the OTLP/HTTP and OTLP/gRPC collector and query API (the single writer of the ledger)."""
    p.add_argument(
        "--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST}: this machine only)"
    )
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}, the OTLP/HTTP port)")
    p.add_argument(
        INSECURE_NO_AUTH,
        action="store_true",
        help="on a non-loopback --host, start without $TURNLEDGER_TOKEN (refused otherwise): anyone who reaches "
        "the port can write spans and read the ledger; said on every start and on /healthz",
    )
    grpc = p.add_mutually_exclusive_group()
    grpc.add_argument(
        "--grpc-port",
        type=int,
        default=DEFAULT_GRPC_PORT,
        help=f"OTLP/gRPC port on the same address (default {DEFAULT_GRPC_PORT}, the OTLP/gRPC port; 0: any free port)",
    )
    grpc.add_argument("--no-grpc", action="store_true", help="serve OTLP/HTTP only")
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
    p.add_argument(
        "--keep-ordinary",
        type=float,
        default=1.0,
        metavar="SHARE",
        help="keep span detail and captured content for this share (0..1) of ordinary successful runs, chosen by "
        "trace-id hash; errored, capped, halted, badly judged and first-of-a-version runs keep theirs, and every "
        "run keeps its charges (default 1: everything)",
    )
    p.add_argument(
        "--sample-after",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="a run is sampled this long after its root span ended, so late feedback still counts (default 3600)",
    )
    p.add_argument("--db", type=Path, default=None, help="ledger file (default: $TURNLEDGER_DB or ./turnledger.duckdb)")
    add_data_path(p)
    p.add_argument(
        "--maintain-every",
        type=float,
        default=3600.0,
        metavar="S",
        help="on a DuckLake: seconds between runs of `turnledger maintain`, done by one collector of the lake "
        "(default 3600; 0: never)",
    )
    _allow_private_webhooks(p)
    p.add_argument(
        "--redact",
        choices=("on", "off"),
        default=None,
        help="redact every stored string: secrets and personal data become [REDACTED:kind] markers "
        "(default: $TURNLEDGER_REDACT or on; off stores spans as received, for a trusted lab; "
        "extra key names and patterns: $TURNLEDGER_REDACT_KEYS, $TURNLEDGER_REDACT_PATTERNS)",
    )
    p.epilog = (
        "Set TURNLEDGER_TOKEN to require `Authorization: Bearer <token>` on ingest (gRPC: the `authorization` "
        "metadata), queries and budget routes. "
        "While it runs, set TURNLEDGER_SERVER to its URL so `turnledger budget` and `turnledger alerts` go through it."
    )


def _allow_private_webhooks(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-private-webhooks",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="let budget webhooks POST to private and loopback addresses (link-local and cloud metadata: "
        f"never). Default: ${ALLOW_PRIVATE_WEBHOOKS}, else off for serve and on for up (local use)",
    )


def webhook_policy(a: argparse.Namespace, *, local_default: bool) -> TargetPolicy:
    """The flag, else the environment, else the command's default (``up`` is for local use)."""
    from ledger.budgets.targets import TargetPolicy

    if a.allow_private_webhooks is not None:
        return TargetPolicy(allow_private=a.allow_private_webhooks)
    return TargetPolicy.from_settings(default=local_default)


def add_up(p: argparse.ArgumentParser) -> None:
    """Start the collector and the dashboard together."""
    add_serve(p)
    p.add_argument(
        "--dashboard-port",
        type=int,
        default=DEFAULT_DASHBOARD_PORT,
        help=f"dashboard port (default {DEFAULT_DASHBOARD_PORT})",
    )
    p.add_argument(
        "--dashboard-address",
        default="127.0.0.1",
        help="dashboard interface (default 127.0.0.1); any other needs $TURNLEDGER_DASHBOARD_PASSWORD or OIDC",
    )
    p.add_argument("--no-dashboard", action="store_true", help="start only the collector")
    add_browser_flags(p)
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
    from ledger.quality import policy as quality_policy

    if a.max_body_mb <= 0 or a.queue_spans <= 0:
        raise TurnledgerError(f"--max-body-mb ({a.max_body_mb}) and --queue-spans ({a.queue_spans}) must be positive")
    if a.decode_workers < 0:
        raise TurnledgerError(f"--decode-workers ({a.decode_workers}) must be 0 or more")
    if not a.sweep_interval > 0:
        raise TurnledgerError(f"--sweep-interval ({a.sweep_interval}) must be a positive number of seconds")
    if not 0 <= a.keep_ordinary <= 1 or a.sample_after < 0:
        raise TurnledgerError(f"--keep-ordinary ({a.keep_ordinary}) is a share 0..1; --sample-after >= 0 seconds")
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
    quality_policy()  # TURNLEDGER_QUALITY checked at start, not at the first judgment an exporter sends
    collector_auth(a.host, token=token(), insecure_no_auth=a.insecure_no_auth)  # refused before anything starts
    return ServerConfig(
        host=a.host,
        port=a.port,
        grpc_port=None if a.no_grpc else a.grpc_port,
        db=a.db or db_path(),
        token=token(),
        insecure_no_auth=a.insecure_no_auth,
        max_body_bytes=int(a.max_body_mb * MiB),
        max_decoded_bytes=max(int(a.max_body_mb * MiB), 64 * MiB),
        max_queued_spans=a.queue_spans,
        decode_workers=a.decode_workers,
        redact_content=redact,
        prices=prices,
        keep_ordinary=a.keep_ordinary,
        sampling_grace_s=a.sample_after,
    )


def build_server(
    config: ServerConfig,
    *,
    sweep_interval: float = 15.0,
    governor: Governor | None = None,
    webhooks: TargetPolicy | None = None,
) -> CollectorServer:
    """The collector as ``serve`` and ``up`` run it: with a budget governor whose hook
    evaluates each committed batch and whose sweeper (every ``sweep_interval`` s; 0: off)
    catches window rollovers, and whose webhooks go where ``webhooks`` allows (default:
    the settings'). The server owns the governor: ``stop()`` closes the writer, then
    the governor, then the ledger."""
    from collector.receiver.server import CollectorServer
    from ledger.budgets.delivery import Deliverer
    from ledger.budgets.governor import Governor

    governor = governor or Governor(deliverer=Deliverer(policy=webhooks))
    return CollectorServer(config, governor=governor, sweep_interval=sweep_interval)


def _start(config: ServerConfig, sweep_interval: float, webhooks: TargetPolicy) -> CollectorServer:
    try:
        server = build_server(config, sweep_interval=sweep_interval, webhooks=webhooks)
    except OSError as exc:
        from collector.receiver.grpc_receiver import GrpcBindError

        if isinstance(exc, GrpcBindError):
            raise TurnledgerError(
                f"{exc}. Is another collector running? Choose another --grpc-port, or --no-grpc."
            ) from None
        raise TurnledgerError(
            f"cannot listen on {config.host}:{config.port}: {exc.strerror or exc}. "
            "Is another collector running? Choose another --port."
        ) from None
    if server.auth == OPEN_BY_CHOICE:  # on every start, where the operator looks
        print(
            f"warning: {INSECURE_NO_AUTH}: listening on {config.host} without TURNLEDGER_TOKEN: anyone who can "
            "reach this port can write spans and read the ledger, captured prompts included",
            file=sys.stderr,
            flush=True,
        )
    return server


def _announced(server: CollectorServer) -> contextlib.AbstractContextManager[None]:
    """While it runs, a file ledger says where it is served (``ledger.store.announce_server``)."""
    from ledger import lake
    from ledger.store import announce_server

    if lake.is_lake_target(str(server.db_path)):
        return contextlib.nullcontext()
    return announce_server(server.db_path, server.url)


def _reach(address: str) -> str:
    """A host a browser on this machine can open for a listening address."""
    if is_loopback(address) or address in ("0.0.0.0", "::", ""):
        return "127.0.0.1"
    return f"[{address}]" if ":" in address else address


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
    from ledger import lake
    from ledger.lake.maintain import start_maintenance

    require_free_port(config.host, config.port, "collector", "--port")  # before the ledger file exists
    if config.grpc_port is not None:
        require_free_port(config.host, config.grpc_port, "OTLP/gRPC receiver", "--grpc-port (or --no-grpc)")
    server = _start(config, a.sweep_interval, webhook_policy(a, local_default=False))
    with _announced(server):  # before it answers: a command refused the file names this address
        server.start()
        maintenance = start_maintenance(server.con, a.maintain_every)
        print(f"turnledger collector listening on {server.url} (ledger {lake.shown(str(server.db_path))})", flush=True)
        print(f"  point an agent at it: OTEL_EXPORTER_OTLP_ENDPOINT={server.url}", flush=True)
        if server.grpc_url:
            print(
                f"  or over OTLP/gRPC:    OTEL_EXPORTER_OTLP_ENDPOINT={server.grpc_url} OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
                flush=True,
            )
        print(f"  budgets and alerts while it runs: TURNLEDGER_SERVER={server.url} turnledger budget list", flush=True)
        print(f"  auth: {server.auth}", flush=True)
        print("  Ctrl-C stops it.", flush=True)
        try:
            wait_for_stop()
        finally:
            print("stopping: committing accepted spans and closing the ledger...", file=sys.stderr, flush=True)
            if maintenance is not None:
                maintenance.stop()
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
    # Everything that can refuse is checked before anything starts: no ledger file, no half-started pair.
    require_free_port(config.host, config.port, "collector", "--port")
    if config.grpc_port is not None:
        require_free_port(config.host, config.grpc_port, "OTLP/gRPC receiver", "--grpc-port (or --no-grpc)")
    if not a.no_dashboard:
        dashboard_login(a.dashboard_address, password=dashboard_password(), oidc=oidc_configured())
        require_free_port(a.dashboard_address, a.dashboard_port, "dashboard", "--dashboard-port (or --no-dashboard)")
    from ledger import lake
    from ledger.lake.maintain import start_maintenance

    server = _start(config, a.sweep_interval, webhook_policy(a, local_default=True))
    announced = contextlib.ExitStack()
    announced.enter_context(_announced(server))  # before it answers: a command refused the file names it
    dashboard: subprocess.Popen[bytes] | None = None
    maintenance = None
    failed = False
    try:
        if not a.no_samples:
            folder = a.samples or (Path("sample_traces") if Path("sample_traces").is_dir() else SAMPLES)
            n = load_samples_if_empty(server, folder)
            if n:
                print(f"empty ledger: loaded {n} sample spans from {folder}", flush=True)
        server.start()
        maintenance = start_maintenance(server.con, a.maintain_every)
        dashboard_url = None
        if not a.no_dashboard:
            dashboard = start_dashboard(
                server=server.url, port=a.dashboard_port, address=a.dashboard_address,
                headless=a.headless, usage_stats=a.usage_stats,
            )  # fmt: skip
            dashboard_url = f"http://{_reach(a.dashboard_address)}:{a.dashboard_port}"
        print("turnledger is up", flush=True)
        if dashboard_url:
            print(f"  dashboard  {dashboard_url}", flush=True)
        print(f"  collector  {server.url}  (ledger {lake.shown(str(server.db_path))})", flush=True)
        print(f"  point an agent at it:  export OTEL_EXPORTER_OTLP_ENDPOINT={server.url}", flush=True)
        if server.grpc_url:
            print(f"  or over OTLP/gRPC:     {server.grpc_url}  (OTEL_EXPORTER_OTLP_PROTOCOL=grpc)", flush=True)
        print(f"  budgets and alerts:    export TURNLEDGER_SERVER={server.url}", flush=True)
        print(f"  collector auth:        {server.auth}", flush=True)
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
        announced.close()
        print("stopping...", file=sys.stderr, flush=True)
        if dashboard is not None:
            stop_process(dashboard)
        if maintenance is not None:
            maintenance.stop()
        server.stop()
    return 1 if failed else 0
