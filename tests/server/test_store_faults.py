"""A store that fails for a while is the store's fault: every valid request is 200 or 503, never 400.

Real faults, not simulated ones: ``turnledger serve`` runs in its own mount namespace
(``unshare -Urm``, no root needed where user namespaces are allowed) with its ledger on a
small tmpfs, and the test fills that filesystem from outside through ``/proc/PID/root``.
DuckDB then meets a real ENOSPC in the middle of a commit coalesced from 8 concurrent clients.
After a clean shutdown the ledger is copied out of the tmpfs and read directly: every span
whose request got a 200 is stored exactly once (counted by span id).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import grpc
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from collector.receiver.grpc_receiver import EXPORT_METHOD

from .conftest import ROOT, free_port, request, wait_healthy
from .exports import CLIENTS, HANG_S, Exports, stored_span_ids

DISK = "16m"  # the tmpfs: room for the empty ledger, its WAL and a few hundred requests


def _can_mount_tmpfs(where: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-Urm", "mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)],
        capture_output=True,
        timeout=60,
    )
    return probe.returncode == 0


@dataclass
class SmallDiskCollector:
    """``turnledger serve`` with its ledger on a tmpfs of its own mount namespace."""

    proc: subprocess.Popen[bytes]
    url: str
    grpc_target: str
    disk: Path  # the mount point, as the collector sees it
    out: Path  # where the ledger is copied once the collector has stopped
    log: Path

    @property
    def inside(self) -> Path:
        """The tmpfs as this process can reach it: through the collector's root."""
        return Path(f"/proc/{self.proc.pid}/root") / self.disk.relative_to("/")

    def free_bytes(self) -> int:
        st = os.statvfs(self.inside)
        return st.f_bavail * st.f_frsize

    def fill(self, leave: int) -> None:
        """Take the filesystem's space but ``leave`` bytes (tmpfs pages: ``leave`` rounds down)."""
        with (self.inside / "filler").open("ab") as f:
            f.write(b"\0" * max(0, self.free_bytes() - leave))

    def release(self, nbytes: int) -> None:
        """Free ``nbytes`` of the filler (a log rotated, a file removed: some room, not all)."""
        filler = self.inside / "filler"
        os.truncate(filler, max(0, filler.stat().st_size - nbytes))

    def free(self) -> None:
        (self.inside / "filler").unlink()

    def stop(self) -> Path:
        """SIGTERM (a clean shutdown), then the ledger as copied out of the tmpfs."""
        os.kill(self.serve_pid(), signal.SIGTERM)
        assert self.proc.wait(HANG_S) == 0, self.log.read_text()[-3000:]
        return self.out / "ledger.duckdb"

    def serve_pid(self) -> int:
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        assert len(children) == 1, children
        return int(children[0])


@pytest.fixture
def small_disk(tmp_path: Path, migrated_ledger: Path) -> Iterator[SmallDiskCollector]:
    disk, out = tmp_path / "disk", tmp_path / "out"
    disk.mkdir()
    out.mkdir()
    if not _can_mount_tmpfs(disk):
        pytest.skip("no user namespace here to mount a small tmpfs in (unshare -Urm)")
    port, grpc_port = free_port(), free_port()
    log = tmp_path / "serve.log"
    # sh stays the parent: after serve exits (SIGTERM to it alone) the ledger is copied out of the
    # tmpfs, which vanishes with the namespace. The trap keeps sh alive for that copy.
    script = (
        "set -e; trap true TERM; "
        f"mount -t tmpfs -o size={DISK} tmpfs '{disk}'; cp '{migrated_ledger}' '{disk}/ledger.duckdb'; "
        f"'{sys.executable}' -m collector.cli serve --port {port} --grpc-port {grpc_port} --decode-workers 0 "
        f"--db '{disk}/ledger.duckdb' && cp '{disk}'/ledger.duckdb* '{out}/'"
    )
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            ["unshare", "-Urm", "sh", "-c", script], cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT
        )
    collector = SmallDiskCollector(proc, f"http://127.0.0.1:{port}", f"127.0.0.1:{grpc_port}", disk, out, log)
    try:
        wait_healthy(collector.url, 60)
        yield collector
    finally:
        if proc.poll() is None:  # a failed test: serve is sh's child, and would outlive it
            with contextlib.suppress(OSError, AssertionError):
                os.kill(collector.serve_pid(), signal.SIGKILL)
            proc.kill()
            proc.wait(HANG_S)


def _writer(url: str) -> dict[str, object]:
    return request(f"{url}/healthz").json()["writer"]  # type: ignore[no-any-return]


def _stored(ledger: Path) -> Counter[str]:
    con = duckdb.connect(str(ledger), read_only=True)
    try:
        return stored_span_ids(con)
    finally:
        con.close()


def _sdk_export_request() -> tuple[bytes, list[str]]:
    """An ExportTraceServiceRequest as the official SDK encodes it (3 spans), and its span ids."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("store-faults")
    for i in range(3):
        with tracer.start_as_current_span(f"step {i}"):
            pass
    spans = memory.get_finished_spans()
    provider.shutdown()
    return encode_spans(spans).SerializeToString(), [format(s.context.span_id, "016x") for s in spans]


def _grpc_export(target: str, body: bytes) -> bytes | grpc.RpcError:
    """One raw Export call (an exporter's own retries would hide the status): the reply or the error."""
    with grpc.insecure_channel(target) as channel:
        try:
            return channel.unary_unary(EXPORT_METHOD)(body, timeout=HANG_S)  # type: ignore[no-any-return]
        except grpc.RpcError as exc:
            return exc


def test_disk_nearly_full_during_coalesced_commits_is_503_never_400(small_disk):
    exports = Exports(small_disk.url)
    exports.burst("warm", rounds=2)
    assert exports.statuses == Counter({200: CLIENTS * 2})
    # Room for a few commits' WAL but not all of them: some coalesced commits fit, others
    # fail on ENOSPC halfway. The requests of a failed one are nobody's fault but the disk's.
    for leave in (400_000, 200_000, 100_000):
        small_disk.fill(leave)
        exports.burst(f"nearly-{leave}")
    assert exports.statuses[503], "the disk never filled: nothing was tested"
    assert _writer(small_disk.url)["failed_batches"]
    small_disk.free()
    exports.retry_unacked()
    assert not exports.odd, exports.odd
    writer = _writer(small_disk.url)
    assert writer["requests"] > writer["batches"], "no commit coalesced two requests"  # type: ignore[operator]
    exports.assert_stored_exactly_once(_stored(small_disk.stop()))


def test_disk_full_then_freed_resumes_and_nothing_is_blamed_on_the_requests(small_disk):
    exports = Exports(small_disk.url)
    exports.burst("warm", rounds=2)
    small_disk.fill(0)
    exports.burst("full", rounds=3)
    assert exports.statuses[503] == CLIENTS * 3  # nothing fits: every request retryable
    grpc_body, grpc_ids = _sdk_export_request()
    refused = _grpc_export(small_disk.grpc_target, grpc_body)  # OTLP/gRPC is told the same: UNAVAILABLE
    assert isinstance(refused, grpc.RpcError) and refused.code() is grpc.StatusCode.UNAVAILABLE, refused
    assert "google.rpc.retryinfo-bin" in dict(refused.trailing_metadata() or ())
    small_disk.release(300_000)  # just after some space was freed: some commits fit, some do not
    exports.burst("freed")
    small_disk.free()
    assert not isinstance(_grpc_export(small_disk.grpc_target, grpc_body), grpc.RpcError)  # its retry lands
    exports.acked.extend(grpc_ids)
    exports.retry_unacked()
    assert not exports.odd, exports.odd
    assert exports.statuses[200] == CLIENTS * (2 + 3 + 6)  # every body landed, once
    exports.assert_stored_exactly_once(_stored(small_disk.stop()))
