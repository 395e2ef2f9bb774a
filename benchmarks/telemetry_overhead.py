"""Telemetry overhead per model call, with the scripted model.

Runs the harness's eleven named scenarios (every stop cause, parallel tools,
loops, the budget burner's long history) again and again under each setting,
and prints the time per model call (attempt), the overhead against no
observer, and the ratio:

  none       no observer at all (the baseline)
  off        tracing, capture off (spans, usage, guard events; no content)
  redacted   tracing, request payloads and tool content captured through redaction (the default)
  full       tracing, content captured as is
  ledger     redacted, exported in-process into a DuckDB file (flush included):
             the whole pipeline, for scale; the export runs off the agent's thread

Settings are measured in interleaved rounds (none, off, redacted, ...; again)
so load from anything else on the machine hits them alike; each figure is the
median over rounds. Time is the process's CPU time (all its threads: the
harness's tool workers and the exporter's thread included), which other
processes on a shared machine cannot inflate; wall time is printed alongside.
The target is under 1 ms of overhead per model call.

Run: .venv/bin/python benchmarks/telemetry_overhead.py [--rounds 7 --repeat 6]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from benchmarks._common import footer, header
from collector.demo.scenarios import SCENARIOS, build
from collector.harness import Observer, Runtime, run_agent
from collector.harness.telemetry import LedgerSpanExporter, OTelObserver, build_resource, tracer_provider

TARGET_US = 1_000.0


class Discard(SpanExporter):
    """Takes spans and drops them: what remains is the cost on the agent's path."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def workload(observer: Observer | None, repeat: int) -> int:
    """Every named scenario ``repeat`` times; returns the number of model calls made."""
    calls = 0
    for i in range(repeat):
        for name in SCENARIOS:
            b = build(name)
            r = run_agent(
                b.llm, b.task, b.tools, observer=observer, runtime=Runtime.seeded(i, sleep=lambda s: None), **b.options
            )
            calls += len(r.charges)
    return calls


def setting(name: str, tmp: Path) -> tuple[Observer | None, Callable[[], None]]:
    """An observer for the setting and what to do after the round (flush, close)."""
    if name == "none":
        return None, lambda: None
    resource = build_resource("benchmark", detect=False)
    if name == "ledger":
        exporter: SpanExporter = LedgerSpanExporter(
            tmp / f"bench-{time.perf_counter_ns()}.duckdb", redact_content=False
        )
        capture = "redacted"
    else:
        exporter, capture = Discard(), name
    provider = tracer_provider([exporter], resource=resource, max_queue_size=100_000, max_export_batch_size=4_096)
    return OTelObserver(provider, capture=capture), provider.shutdown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds per setting (median taken)")
    parser.add_argument("--repeat", type=int, default=6, help="passes over the scenarios per round")
    parser.add_argument("--no-ledger", action="store_true", help="skip the in-process ledger setting")
    args = parser.parse_args()
    header("telemetry overhead per model call")
    names = ["none", "off", "redacted", "full"] + ([] if args.no_ledger else ["ledger"])
    per_call: dict[str, list[float]] = {n: [] for n in names}
    wall: dict[str, list[float]] = {n: [] for n in names}
    workload(None, 1)  # warm imports and caches
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        for _ in range(args.rounds):
            for name in names:
                observer, finish = setting(name, tmp)
                cpu, started = time.process_time(), time.perf_counter()
                calls = workload(observer, args.repeat)
                finish()  # the ledger setting pays for its export here
                per_call[name].append((time.process_time() - cpu) / calls * 1e6)
                wall[name].append((time.perf_counter() - started) / calls * 1e6)
    base, wall_base = statistics.median(per_call["none"]), statistics.median(wall["none"])
    print(f"telemetry overhead per model call ({calls} calls per round, median of {args.rounds} rounds)")
    print(f"{'setting':<10} {'CPU µs/call':>12} {'overhead µs':>12} {'ratio':>7}   {'wall µs/call':>12} {'ratio':>7}")
    for name in names:
        median, wall_median = statistics.median(per_call[name]), statistics.median(wall[name])
        print(
            f"{name:<10} {median:>12.0f} {median - base:>12.0f} {median / base:>7.2f}   "
            f"{wall_median:>12.0f} {wall_median / wall_base:>7.2f}"
        )
    worst = max(statistics.median(per_call[n]) - base for n in ("off", "redacted", "full"))
    verdict = "meets" if worst < TARGET_US else "MISSES"
    print(f"worst tracing overhead on the agent's path: {worst:.0f} µs/call ({verdict} the {TARGET_US:.0f} µs target)")


if __name__ == "__main__":
    main()
    footer()
