"""Logs ingest beside traces ingest, in one run: OTLP bodies to committed ledger rows, in process.

Two workloads of the same number of OTLP items, each in 512-item protobuf requests:

* **traces**: the agent workload other benchmarks send (``agent_workload``: roots, ``chat``
  spans with usage and cache counts, tool spans, guard events), without content;
* **logs**: Claude Code's telemetry as the CLI sends it (``ledger.claude_code``): per prompt a
  ``user_prompt`` event, 2–8 ``api_request`` events (each a charge) and a ``tool_result`` after
  most of them.

Each is decoded into rows (``collector.receiver.signals.prepare_signal``, what a decoder process
runs) and, separately, decoded and committed (``ledger.write``, 2,048-item commits, a fresh file):
items per second, the median of ``--repeats`` rounds, alternating the two. No HTTP: the receiver's
door is the same for both (``benchmarks/ingest_throughput.py`` measures it end to end for traces).

Usage: ``python benchmarks/logs_ingest.py [--items N] [--repeats N]``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest  # noqa: E402

import ledger.write as lw  # noqa: E402
from benchmarks._common import footer, header  # noqa: E402
from benchmarks.agent_workload import encode_protobuf, workload  # noqa: E402
from collector.receiver.otlp_http import PROTOBUF  # noqa: E402
from collector.receiver.signals import LOGS, TRACES, prepare_signal  # noqa: E402
from ledger.claude_code import EVENTS_SCOPE  # noqa: E402
from ledger.rows import default_prices  # noqa: E402
from ledger.store import open_ledger  # noqa: E402

BATCH = 512
COMMIT = 2048
T0 = 1_790_000_000_000_000_000
MS = 1_000_000


def _events(n: int, seed: int = 7) -> list[tuple[int, str, dict[str, Any]]]:
    """``n`` Claude Code events: (time, event name, attributes), prompts of one session after another."""
    rng = random.Random(seed)
    out: list[tuple[int, str, dict[str, Any]]] = []
    at, prompt = T0, 0
    while len(out) < n:
        common = {"user.id": "d3" * 32, "session.id": f"session-{prompt // 20}", "prompt.id": f"prompt-{prompt}",
                  "terminal.type": "non-interactive", "organization.id": "org-1"}  # fmt: skip

        def event(name: str, common: dict[str, Any] = common, **attrs: Any) -> None:
            nonlocal at
            at += rng.randint(5, 900) * MS
            stamp = {"event.name": name, "event.sequence": len(out), "event.timestamp": str(at)}
            out.append((at, name, {**common, **stamp, **attrs}))

        event("user_prompt", prompt_length=str(rng.randint(5, 400)), prompt="<REDACTED>")
        for i in range(rng.randint(2, 8)):
            read = rng.randint(0, 40_000)
            event("api_request", model="claude-sonnet-4-5", input_tokens=rng.randint(1, 3000),
                  output_tokens=rng.randint(10, 2000), cache_read_tokens=read,
                  cache_creation_tokens=rng.randint(0, 5000), cost_usd=rng.random() / 10,
                  duration_ms=rng.randint(300, 9000), request_id=f"req_{prompt:06d}_{i:02d}", speed="normal")  # fmt: skip
            if rng.random() < 0.7:
                event("tool_result", tool_name="Bash", success="true", duration_ms=str(rng.randint(1, 900)))
        prompt += 1
    return out[:n]


def _value(v: Any, av: Any) -> None:
    if isinstance(v, bool):
        av.bool_value = v
    elif isinstance(v, int):
        av.int_value = v
    elif isinstance(v, float):
        av.double_value = v
    else:
        av.string_value = str(v)


def encode_logs(events: list[tuple[int, str, dict[str, Any]]]) -> bytes:
    """One ExportLogsServiceRequest of these events, as Claude Code's exporter sends them."""
    req = ExportLogsServiceRequest()
    rl = req.resource_logs.add()
    for key, value in (("service.name", "claude-code"), ("service.version", "2.1.197")):
        kv = rl.resource.attributes.add()
        kv.key, kv.value.string_value = key, value
    sl = rl.scope_logs.add()
    sl.scope.name, sl.scope.version = EVENTS_SCOPE, "2.1.197"
    for at, name, attrs in events:
        record = sl.log_records.add()
        record.time_unix_nano = record.observed_time_unix_nano = at
        record.body.string_value = f"claude_code.{name}"
        for key, value in attrs.items():
            kv = record.attributes.add()
            kv.key = key
            _value(value, kv.value)
    return bytes(req.SerializeToString())


def _rows(bodies: list[bytes], signal: str) -> list[Any]:
    prices = default_prices()
    return [prepare_signal(b, PROTOBUF, signal, prices, redact_content=True) for b in bodies]


def _commit(bodies: list[bytes], signal: str, folder: Path, round_: int) -> None:
    con = open_ledger(folder / f"{signal}-{round_}.duckdb")
    try:
        batches = _rows(bodies, signal)
        per = max(1, COMMIT // BATCH)
        for i in range(0, len(batches), per):
            lw.write(con, [b.to_arrow() for b in batches[i : i + per]])
    finally:
        con.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=50_000, help="spans, and log records, per workload (default 50000)")
    ap.add_argument("--repeats", type=int, default=3, help="alternating rounds; medians are printed (default 3)")
    a = ap.parse_args()
    header("logs ingest beside traces ingest")
    spans, runs = workload(a.items, False)
    spans = spans[: a.items]
    events = _events(a.items)
    bodies = {
        TRACES: [encode_protobuf(spans[i : i + BATCH]) for i in range(0, len(spans), BATCH)],
        LOGS: [encode_logs(events[i : i + BATCH]) for i in range(0, len(events), BATCH)],
    }
    charged = sum(1 for _, name, _ in events if name == "api_request")
    print(f"\n{len(spans):,} spans ({runs:,} runs) and {len(events):,} Claude Code events ({charged:,} api_request) "
          f"in {BATCH}-item requests; {a.repeats} alternating rounds")  # fmt: skip
    rates: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(a.repeats):
            for signal in (TRACES, LOGS):
                n = len(spans) if signal == TRACES else len(events)
                for step, fn in (("rows", lambda s=signal: _rows(bodies[s], s)),
                                 ("committed", lambda s=signal, r=round_: _commit(bodies[s], s, Path(tmp), r))):  # fmt: skip
                    t = time.perf_counter()
                    fn()
                    rates.setdefault((signal, step), []).append(n / (time.perf_counter() - t))
    median = {k: statistics.median(v) for k, v in rates.items()}
    print(f"  {'':44s} {'items/s':>10s}   (range)")
    for (signal, step), rate in median.items():
        what = {"rows": "decode into ledger rows", "committed": "decoded and committed (ledger.write)"}[step]
        spread = rates[(signal, step)]
        print(f"  {signal + ': ' + what:44s} {rate:>10,.0f}   ({min(spread):,.0f}–{max(spread):,.0f})")
    for step in ("rows", "committed"):
        print(f"  logs / traces, {step}: x{median[(LOGS, step)] / median[(TRACES, step)]:.2f}")
    footer()


if __name__ == "__main__":
    main()
