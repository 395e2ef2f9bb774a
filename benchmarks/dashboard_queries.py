"""Dashboard page load: every query each page runs, on a ledger of ~100,000 runs (~2M spans).

The ledger is synthetic but shaped like real traffic: turns per run log-normal
(median 8, a step cap at 60), history re-sent every turn (input grows with the
turn), 80% of runs with a working prompt cache, 2% of calls retried, 3% of runs
caught looping, a few unpriced calls, and 200 runs with captured contexts
(ingested through ``ledger.ingest``); 10% of runs judged by an LLM judge, 3% given user
feedback, 2% a safety check, queued for review as ingest queues them (``ledger.quality.review``). Rows are generated column-wise with numpy
and inserted as Arrow tables; ``runs`` is derived by ``ledger.ingest.refresh_runs``
like any ingest. The file is cached under /tmp and rebuilt only when missing.

What is measured: each page is rendered once with Streamlit's AppTest while a
recording source notes every query it asks for (sidebar included: names,
filters, arguments, captured contexts). Those calls are then replayed against
the file, uncached, the way the dashboard's file source runs them: the file
opened read-only at the page's first query (the open is counted) and shared by
the rest. Three rounds; the median total per page is printed. Target: every
page under 1 s; pages in ``GOALS`` have their own (Health, Compare, Quality, Review: 250 ms). The machine is shared: run it when nothing else is (the load
average is printed with the figures).

Run: .venv/bin/python benchmarks/dashboard_queries.py [--runs 100000] [--rebuild] [--page Compare] [--lake]
The Compare page's statistics are printed on the line below the table.

``--lake``: the same recorded queries also replayed on a DuckLake copy of the ledger (team mode),
the way the dashboard reads a lake (a read-only DuckLake client, ``ledger.sources.FileSource`` on
the target): a PostgreSQL 15 catalog started for the run (``tests/lake/postgres.py``), Parquet on
local disk. The lake is made once by ``turnledger migrate`` (``ledger.lake.migrate``) and cached
beside the file (its data folder and a ``pg_dump`` of its catalog, restored into each run's
server). File and lake alternate within each round; the table gives both medians and ranges and
lake/file.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import duckdb
import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import footer, header  # noqa: E402
from collector.demo.samples import SYSTEM, TOOLS, Trace  # noqa: E402
from ledger import conventions as c  # noqa: E402
from ledger import queries as q  # noqa: E402
from ledger.health_columns import BACKFILL as HEALTH_BACKFILL  # noqa: E402
from ledger.ingest import ingest, refresh_runs  # noqa: E402
from ledger.quality import review  # noqa: E402
from ledger.schema import schema_version  # noqa: E402
from ledger.store import open_ledger  # noqa: E402

# 2: evaluations and the review queue; 4: built in chunks (a chunk's own random stream); 5: trace ids led by their chunk
GENERATOR_VERSION = 5
CACHE_DIR = Path(os.environ.get("TURNLEDGER_BENCH_DIR", "/tmp/turnledger-bench"))
T0_NS = 1_790_000_000_000_000_000  # 2026-09-21
DAY_NS = 86_400 * 10**9
MODELS = [  # name, provider, $/Mtok input, output, share of runs
    ("claude-sonnet-5", "anthropic", 3.0, 15.0, 0.55),
    ("claude-opus-5", "anthropic", 5.0, 25.0, 0.25),
    ("claude-haiku-4-5", "anthropic", 1.0, 5.0, 0.195),
    ("mystery-model-1", "someprovider", 0.0, 0.0, 0.005),  # unpriced
]
TENANTS = [f"tenant-{i:02d}" for i in range(40)]
AGENTS = ["support-agent", "ticket-triage", "report-writer", "router", "research-agent"]
TOOL_NAMES = ["search_docs", "get_account", "read_artifact", "get_shipping_status", "run_query"]
STEP_CAP = 60
CONTEXT_RUNS = 200


def _hex_ids(rng: np.random.Generator, n: int, nbytes: int) -> list[str]:
    raw = rng.bytes(n * nbytes)
    return [raw[i * nbytes : (i + 1) * nbytes].hex() for i in range(n)]


def _ts(values: np.ndarray) -> pa.Array:
    return pa.array(values.astype("int64"), type=pa.int64()).cast(pa.timestamp("ns"))


def _insert(con: Any, table: str, data: pa.Table, casts: dict[str, str] | None = None) -> None:
    con.register("_gen", data)
    cols = [f'CAST("{n}" AS {casts[n]}) AS "{n}"' if casts and n in casts else f'"{n}"' for n in data.column_names]
    names = ", ".join(f'"{n}"' for n in data.column_names)
    con.execute(f"INSERT INTO {table} ({names}) SELECT {', '.join(cols)} FROM _gen")
    con.unregister("_gen")


@dataclass
class _Runs:
    """Per run: how long, which model/tenant/agent, cache health, looping, stop cause, ids."""

    n: int
    turns: np.ndarray
    model_idx: np.ndarray
    tenant_idx: np.ndarray
    agent_idx: np.ndarray
    healthy_cache: np.ndarray
    looping: np.ndarray
    stop: np.ndarray
    start: np.ndarray
    trace_ids: list[str]
    tr: np.ndarray  # trace ids as an object array, for fancy indexing
    roots: np.ndarray
    sys_tokens: np.ndarray
    per_turn: np.ndarray

    @property
    def tenants(self) -> np.ndarray:
        return np.array(TENANTS, dtype=object)[self.tenant_idx]


@dataclass
class _Attempts:
    """Per model-call attempt (one per turn, plus a retried attempt on 2% of calls)."""

    n: int
    run: np.ndarray
    number: np.ndarray  # 1-based attempt number
    failed: np.ndarray  # the 429 that was retried
    start: np.ndarray
    end: np.ndarray
    span: np.ndarray
    model_names: np.ndarray
    cause: np.ndarray


@dataclass
class _Tools:
    """Per tool call: one after every turn but the last."""

    n: int
    run: np.ndarray
    turn: np.ndarray
    start: np.ndarray
    span: np.ndarray
    names: np.ndarray
    looping: np.ndarray  # the last three tools of a looping run repeat
    attributes: list[str]


def _plan_runs(rng: np.random.Generator, runs: int, window: tuple[int, int], chunk: int = 0) -> _Runs:
    """``runs`` runs starting in ``window`` (ns since T0_NS, from, to), in start order.

    Each trace id begins with its chunk's number: a chunk's keys then fall in one part of the primary
    keys' indexes, the only part its inserts load (a 1M-run build with random ids had ~950 MB of index
    in memory by 880,000 runs and failed its 1 GB). A live collector's ids are random, so its writer
    holds about that much index at this size: the pages measured here read no index."""
    turns = np.clip(np.round(rng.lognormal(np.log(8), 0.75, runs)), 1, STEP_CAP).astype(np.int64)
    model_idx = rng.choice(len(MODELS), runs, p=[m[4] for m in MODELS])
    tenant_idx = rng.integers(0, len(TENANTS), runs)
    agent_idx = rng.integers(0, len(AGENTS), runs)
    healthy_cache = rng.random(runs) < 0.8
    looping = (rng.random(runs) < 0.03) & (turns >= 4)
    roll = rng.random(runs)
    stop = np.where(turns >= STEP_CAP, "max_steps", np.where(looping, "loop_detected", "completed")).astype(object)
    stop[(stop == "completed") & (roll < 0.01)] = "budget_exceeded"
    stop[(stop == "completed") & (roll > 0.98)] = "error"
    start = T0_NS + np.sort(rng.integers(window[0], window[1], runs))
    trace_ids = [f"{chunk:05x}{t[5:]}" for t in _hex_ids(rng, runs, 16)]
    root_ids = _hex_ids(rng, runs, 8)
    return _Runs(
        runs, turns, model_idx, tenant_idx, agent_idx, healthy_cache, looping, stop, start, trace_ids,
        np.array(trace_ids, dtype=object), np.array(root_ids, dtype=object),
        sys_tokens=rng.integers(1_500, 6_000, runs), per_turn=rng.integers(300, 1_500, runs),
    )  # fmt: skip


def _charges(rng: np.random.Generator, r: _Runs) -> tuple[pa.Table, _Attempts]:
    run_of_call = np.repeat(np.arange(r.n), r.turns)
    n_calls = len(run_of_call)
    turn_no = np.arange(n_calls) - np.repeat(np.cumsum(r.turns) - r.turns, r.turns)  # 0-based
    retried = rng.random(n_calls) < 0.02
    attempts = retried.astype(np.int64) + 1
    call_of_attempt = np.repeat(np.arange(n_calls), attempts)
    attempt_no = np.arange(len(call_of_attempt)) - np.repeat(np.cumsum(attempts) - attempts, attempts) + 1
    n_att = len(call_of_attempt)
    run_of_att = run_of_call[call_of_attempt]
    turn_of_att = turn_no[call_of_attempt]
    total_in = r.sys_tokens[run_of_att] + turn_of_att * r.per_turn[run_of_att]
    prev_in = np.where(turn_of_att > 0, r.sys_tokens[run_of_att] + (turn_of_att - 1) * r.per_turn[run_of_att], 0)
    healthy = r.healthy_cache[run_of_att]
    read = np.where(healthy & (turn_of_att > 0), prev_in, 0)
    write = np.where(healthy, total_in - read - 20, 0)
    uncached = total_in - read - write
    out = rng.integers(40, 600, n_att)
    failed = retried[call_of_attempt] & (attempt_no == 1)  # the 429 that was retried
    for arr in (read, write, uncached, out):
        arr[failed] = 0
    m = r.model_idx[run_of_att]
    p_in = np.array([x[2] for x in MODELS])[m] / 1e6
    p_out = np.array([x[3] for x in MODELS])[m] / 1e6
    # Each call takes ~1.2 s and a tool ~0.2 s: call k of a run starts 1.5 s after call k-1.
    att_start = r.start[run_of_att] + (turn_of_att * 1_500 + (attempt_no - 1) * 700 + 1) * 1_000_000
    att_span = np.array(_hex_ids(rng, n_att, 8), dtype=object)
    call_ids = np.array(_hex_ids(rng, n_calls, 8), dtype=object)[call_of_attempt]
    model_names = np.array([x[0] for x in MODELS], dtype=object)[m]
    providers = np.array([x[1] for x in MODELS], dtype=object)[m]
    cause = np.where(attempt_no > 1, np.where(rng.random(n_att) < 0.7, "429", "529"), "")
    charges = pa.table(
        {
            "trace_id": r.tr[run_of_att], "span_id": att_span, "parent_span_id": r.roots[run_of_att],
            "call_id": call_ids, "start_time": _ts(att_start), "latency_ms": np.full(n_att, 1_200.0),
            "tenant": r.tenants[run_of_att], "call_site": np.where(turn_of_att % 7 == 6, "summarizer", "agent").astype(object),
            "provider": providers, "model": model_names, "attempt": attempt_no.astype(np.int32),
            "retry_cause": cause.astype(object), "status_code": np.where(failed, "ERROR", "UNSET").astype(object),
            "error_type": np.where(failed, "429", None), "finish_reason": np.where(failed, None, "tool_use"),
            "uncached_input_tokens": uncached, "cache_write_tokens": write, "cache_read_tokens": read,
            "output_tokens": out, "reasoning_tokens": np.zeros(n_att, dtype=np.int64),
            "usd_input": uncached * p_in, "usd_output": out * p_out, "usd_cache_write": write * p_in * 1.25,
            "usd_cache_read": read * p_in * 0.10, "unpriced": m == len(MODELS) - 1,
            "price_source": np.where(m == len(MODELS) - 1, "unpriced", "override").astype(object),
            "price_version": np.where(m == len(MODELS) - 1, "", "prices.toml@2026-01-01").astype(object),
            "token_convention": np.full(n_att, "includes_cache", dtype=object),
        }
    )  # fmt: skip
    att_end = att_start + 1_200 * 1_000_000
    return charges, _Attempts(n_att, run_of_att, attempt_no, failed, att_start, att_end, att_span, model_names, cause)


def _tool_calls(rng: np.random.Generator, r: _Runs) -> _Tools:
    tool_runs = np.repeat(np.arange(r.n), r.turns - 1)
    n_tools = len(tool_runs)
    tool_turn = np.arange(n_tools) - np.repeat(np.cumsum(r.turns - 1) - (r.turns - 1), r.turns - 1)
    tool_start = r.start[tool_runs] + (tool_turn * 1_500 + 1_250) * 1_000_000
    tool_idx = rng.integers(0, len(TOOL_NAMES), n_tools)
    loop_tool = r.looping[tool_runs] & (tool_turn >= r.turns[tool_runs] - 4)  # the last three tools repeat
    tool_idx[loop_tool] = 0
    soft = (rng.random(n_tools) < 0.08) | loop_tool
    tool_span = np.array(_hex_ids(rng, n_tools, 8), dtype=object)
    names = np.array(TOOL_NAMES, dtype=object)[tool_idx]
    args = np.where(loop_tool, '{"q": "same thing again"}', "{}")
    attributes = [
        json.dumps({c.OPERATION_NAME: "execute_tool", c.TOOL_NAME: n, "gen_ai.tool.call.arguments": a,
                    "gen_ai.tool.call.result": "No results." if s else "ok", c.TOOL_SOFT_FAILURE: bool(s)})
        for n, a, s in zip(names, args, soft, strict=True)
    ]  # fmt: skip
    return _Tools(n_tools, tool_runs, tool_turn, tool_start, tool_span, names, loop_tool, attributes)


def _guard_events(r: _Runs, a: _Attempts, t: _Tools) -> pa.Table:
    """Two loop trips per looping run, a retry event per retried call."""
    loop_spans = np.flatnonzero(t.looping & (t.turn >= r.turns[t.run] - 3))
    ev_trace = r.tr[t.run[loop_spans]]
    ev_time = t.start[loop_spans] + 200 * 1_000_000
    first_of_pair = np.r_[True, ev_trace[1:] != ev_trace[:-1]]
    retry_att = np.flatnonzero(a.number > 1)
    loops, retries = len(loop_spans), len(retry_att)
    return pa.table(
        {
            "trace_id": np.r_[ev_trace, r.tr[a.run[retry_att]]].astype(object),
            "span_id": np.r_[t.span[loop_spans], a.span[retry_att]].astype(object),
            "seq": np.zeros(loops + retries, dtype=np.int32),
            "name": np.r_[np.full(loops, c.EVENT_LOOP_TRIP, dtype=object), np.full(retries, c.EVENT_RETRY, dtype=object)],
            "time": _ts(np.r_[ev_time, a.start[retry_att]]),
            "shape": np.r_[np.full(loops, "repeat", dtype=object), np.full(retries, None)],
            "action": np.r_[np.where(first_of_pair, "nudge", "halt").astype(object), np.full(retries, None)],
            "tool": np.r_[np.full(loops, TOOL_NAMES[0], dtype=object), np.full(retries, None)],
            "cause": np.r_[np.full(loops, None), a.cause[retry_att].astype(object)],
            "attributes": np.r_[np.full(loops, '{"shape": "repeat"}', dtype=object), np.full(retries, '{"wait_s": 2.0}', dtype=object)],
        }
    )  # fmt: skip


def _spans(r: _Runs, a: _Attempts, t: _Tools) -> pa.Table:
    """Roots, model-call attempts, tools."""
    run_end = r.start + (r.turns * 1_500 + 100) * 1_000_000
    root_attrs = [
        json.dumps({c.OPERATION_NAME: "invoke_agent", c.AGENT_NAME: AGENTS[ai], c.AGENT_VERSION: "2.1.0",
                    c.PROMPT_VERSION: f"v{ai + 3}", c.TENANT: TENANTS[ti], c.STOP_CAUSE: s})
        for ai, ti, s in zip(r.agent_idx, r.tenant_idx, r.stop, strict=True)
    ]  # fmt: skip
    chat_attrs = [json.dumps({c.OPERATION_NAME: "chat", c.REQUEST_MODEL: mn}) for mn in a.model_names]
    err_root = np.isin(r.stop, ["max_steps", "budget_exceeded", "error"])
    tenants, total = r.tenants, r.n + a.n + t.n
    return pa.table(
        {
            "trace_id": np.r_[r.tr, r.tr[a.run], r.tr[t.run]].astype(object),
            "span_id": np.r_[r.roots, a.span, t.span].astype(object),
            "parent_span_id": np.r_[np.full(r.n, "", dtype=object), r.roots[a.run], r.roots[t.run]].astype(object),
            "name": np.r_[np.array([f"invoke_agent {AGENTS[ai]}" for ai in r.agent_idx], dtype=object), "chat " + a.model_names, "execute_tool " + t.names],
            "kind": np.r_[np.full(r.n, "INTERNAL", dtype=object), np.full(a.n, "CLIENT", dtype=object), np.full(t.n, "INTERNAL", dtype=object)],
            "operation": np.r_[np.full(r.n, "invoke_agent", dtype=object), np.full(a.n, "chat", dtype=object), np.full(t.n, "execute_tool", dtype=object)],
            "tenant": np.r_[tenants, tenants[a.run], tenants[t.run]].astype(object),
            "start_time": _ts(np.r_[r.start, a.start, t.start]),
            "end_time": _ts(np.r_[run_end, a.end, t.start + 200 * 1_000_000]),
            "status_code": np.r_[np.where(err_root, "ERROR", "UNSET").astype(object), np.where(a.failed, "ERROR", "UNSET").astype(object), np.full(t.n, "UNSET", dtype=object)],
            "status_message": np.full(total, "", dtype=object),
            "attributes": np.r_[np.array(root_attrs, dtype=object), np.array(chat_attrs, dtype=object), np.array(t.attributes, dtype=object)],
            "resource": np.full(total, '{"service.name": "bench-agent"}', dtype=object),
            "events": np.full(total, "[]", dtype=object),
            "scope_name": np.full(total, "turnledger.harness", dtype=object),
            "scope_version": np.full(total, "0.1.0", dtype=object),
            "ingested_at": pa.array(np.full(total, np.datetime64("2026-11-30T00:00:00", "us"))),
        }
    )  # fmt: skip


def _judgments(rng: np.random.Generator, r: _Runs) -> pa.Table:
    """Evaluations rows: an LLM judge on 10% of runs, user feedback on 3%, a safety check on 2%."""
    from ledger.quality import EVALUATION, FEEDBACK

    parts = []
    for name, kind, share, fail_share in (("faithfulness", EVALUATION, 0.10, 0.2), ("user_feedback", FEEDBACK, 0.03, 0.4),
                                          ("safety", EVALUATION, 0.02, 0.05)):  # fmt: skip
        judged = np.flatnonzero(rng.random(r.n) < share)
        failed = rng.random(len(judged)) < fail_share
        score = np.where(failed, rng.uniform(-1 if kind == FEEDBACK else 0, 0.0 if kind == FEEDBACK else 0.5, len(judged)),
                         rng.uniform(0.5, 1.0, len(judged)))  # fmt: skip
        parts.append(pa.table({
            "eval_id": [f"{kind}:{name}:{r.trace_ids[i]}" for i in judged], "kind": np.full(len(judged), kind, dtype=object),
            "trace_id": r.tr[judged], "span_id": pa.array(r.roots[judged] if kind == EVALUATION else [None] * len(judged), pa.string()),
            "tenant": r.tenants[judged], "name": np.full(len(judged), name, dtype=object), "score": score,
            "failed": failed, "safety": np.full(len(judged), name == "safety"),
            "time": _ts(r.start[judged] + (r.turns[judged] * 1_500 + 5_000) * 1_000_000), "source": np.full(len(judged), "bench", dtype=object),
            "tags": np.full(len(judged), "[]", dtype=object), "ingested_at": pa.array(np.full(len(judged), np.datetime64("2026-11-30T00:00:00", "us"))),
        }))  # fmt: skip
    return pa.concat_tables(parts)


CHUNK_RUNS = 10_000  # runs generated and inserted at a time: the build's memory follows this, not --runs
BUILD_MEMORY = "768MB"  # DuckDB's own share while building (it spills beyond it): the rest is one chunk's arrays


def _chunk(
    rng: np.random.Generator, runs: int, window: tuple[int, int], k: int = 0
) -> tuple[list[str], dict[str, pa.Table]]:
    """One chunk's trace ids and rows, table by table. The draws happen in this order (runs, then
    attempts, then tools, then judgments): a seed and a chunk number give one chunk."""
    r = _plan_runs(rng, runs, window, k)
    charges, attempts = _charges(rng, r)
    tools = _tool_calls(rng, r)
    return r.trace_ids, {
        "spans": _spans(r, attempts, tools),
        "charges": charges,
        "guard_events": _guard_events(r, attempts, tools),
        "evaluations": _judgments(rng, r),
    }


_CASTS = {
    "spans": {"attributes": "JSON", "resource": "JSON", "events": "JSON"},
    "charges": {k: "DECIMAL(38, 12)" for k in ("usd_input", "usd_output", "usd_cache_write", "usd_cache_read")},
    "guard_events": {"attributes": "JSON"},
    "evaluations": {"tags": "JSON"},
}


def _building(path: Path) -> duckdb.DuckDBPyConnection:
    con = open_ledger(path)
    con.execute(f"SET memory_limit = '{BUILD_MEMORY}'")
    return con


def generate(path: Path, runs: int, seed: int = 7) -> None:
    """Write a synthetic ledger of ``runs`` runs to ``path``, ``CHUNK_RUNS`` at a time.

    Chunk k holds the runs starting in the k-th slice of the 30 days, so rows arrive in start order as
    they would from live traffic, and each chunk's ``runs`` rows are then derived reading only the row
    groups from its first start on (``refresh_runs(since_ns=...)``)."""
    tmp = path.with_suffix(".partial")
    for p in (tmp, Path(f"{tmp}.wal")):
        p.unlink(missing_ok=True)
    con = _building(tmp)
    t_start = time.perf_counter()
    chunks = [min(CHUNK_RUNS, runs - lo) for lo in range(0, runs, CHUNK_RUNS)]
    derived: list[tuple[list[str], int]] = []  # per chunk: its trace ids, its earliest start
    n_spans = n_charges = 0
    for k, n in enumerate(chunks):
        lo = sum(chunks[:k]) * 30 * DAY_NS // runs
        hi = sum(chunks[: k + 1]) * 30 * DAY_NS // runs
        trace_ids, rows = _chunk(np.random.default_rng([seed, k]), n, (lo, max(hi, lo + 1)), k)
        for name, data in rows.items():
            _insert(con, name, data, _CASTS[name])
        review.enqueue(con, rows["spans"], rows["evaluations"])  # the queue, as ingest fills it
        # Written out and reopened: a connection keeps ~1.4 KB of every run it inserted pinned (DuckDB
        # 1.5's BASE_TABLE memory, 28 MB per chunk, released only on close), which at 580,000 runs filled
        # the 1 GB and failed the build; a fresh connection starts near zero.
        con.execute("CHECKPOINT")
        con.close()
        con = _building(tmp)
        derived.append((trace_ids, T0_NS + lo))
        n_spans += rows["spans"].num_rows
        n_charges += rows["charges"].num_rows
        _progress(f"generated {sum(chunks[: k + 1]):,} of {runs:,} runs", t_start)
    for sql in HEALTH_BACKFILL:  # the columns ingest fills (ledger.rows), for rows inserted around it
        con.execute(sql)
    for k, (trace_ids, since) in enumerate(derived):
        con.close()  # as above: each chunk's pinned memory released
        con = _building(tmp)
        refresh_runs(con, trace_ids, since_ns=since)
        _progress(f"derived the runs of chunk {k + 1} of {len(derived)}", t_start)
    # Runs with captured contexts go through the real ingest path (content store included).
    ingest(
        con,
        [s for r in range(CONTEXT_RUNS) for s in context_run(f"ctx{r}", 12 + r % 30, T0_NS + (r * 12_960 + 7) * 10**9)],
    )
    con.execute("CHECKPOINT")
    con.close()
    tmp.rename(path)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(f"\ngenerated {runs:,} runs, {n_spans:,} spans, {n_charges:,} charges in {time.perf_counter() - t_start:.1f} s "
          f"-> {path} ({path.stat().st_size / 1e6:.0f} MB); peak RSS while building {peak_mib:,.0f} MiB "
          f"(goal <= 2,048 MiB at any size)")  # fmt: skip


def _progress(what: str, since: float) -> None:
    print(f"\r  {what} ({time.perf_counter() - since:.0f} s)", end="", file=sys.stderr, flush=True)


def context_run(key: str, turns: int, start: int) -> list[Any]:
    """A run with captured payloads (history re-sent each turn; cache healthy)."""
    t = Trace(key, tenant="tenant-00", start=start)
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"Investigate incident {key}."}]
    for i in range(turns):
        payload = {"model": "claude-sonnet-5", "max_tokens": 4096, "system": SYSTEM, "tools": TOOLS,
                   "messages": [dict(msg) for msg in messages]}  # fmt: skip
        t.chat("claude-sonnet-5", (40, 300, 2_000 + 300 * i, 150), payload=payload)
        messages.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "search_docs", "input": {"q": f"page {i}"}}]})  # fmt: skip
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"page {i}: " + "status=ok " * 40}]})  # fmt: skip
        t.tool("search_docs", {"q": f"page {i}"}, "status=ok")
    return t.finish("completed")


def ledger_file(runs: int, rebuild: bool) -> Path:
    path = CACHE_DIR / f"dashboard-{runs}-g{GENERATOR_VERSION}.duckdb"
    if path.exists() and not rebuild:
        con = open_ledger(path, read_only=True)
        current = schema_version(con) == max(v for v, _, _ in __import__("ledger.schema").schema.MIGRATIONS)
        con.close()
        if current:
            return path
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    generate(path, runs)
    return path


# --- recording what each page asks for --------------------------------------------------------
class Recorder:
    """Wraps the page's source: notes each call, then runs it."""

    calls: ClassVar[list[tuple[str, Any, dict[str, Any]]]] = []

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def query(self, builder: Any, filters: Any = None, **kwargs: Any) -> Any:
        Recorder.calls.append((builder.__name__, filters, kwargs))
        return self.inner.query(builder, filters, **kwargs)

    def records(self, builder: Any, filters: Any = None, **kwargs: Any) -> Any:
        Recorder.calls.append((builder.__name__, filters, kwargs))
        return self.inner.records(builder, filters, **kwargs)

    def context(self, trace_id: str, span_id: str) -> Any:
        Recorder.calls.append(("context", None, {"trace_id": trace_id, "span_id": span_id}))
        return self.inner.context(trace_id, span_id)


PAGES = [
    ("Spend overview", None, {}),
    ("Long tail", "views/long_tail.py", {}),
    ("Run explorer", "views/run_explorer.py", {"trace": "ctx"}),
    ("Guards", "views/guards.py", {}),
    ("Budgets & alerts", "views/budgets.py", {}),
    ("Models & prices", "views/models.py", {}),
    ("Health", "views/health.py", {}),
    ("Compare", "views/compare.py", {"by": "prompt_version", "a": "v3", "b": "v4"}),  # ~20k runs a side
    ("Quality", "views/quality.py", {}),
    ("Review", "views/review.py", {}),
]
# Pages with their own goal (s, median at 100k runs), printed after the table.
GOALS = {"Health": 0.250, "Compare": 0.250, "Quality": 0.250, "Review": 0.250}


def record_pages(db: Path, context_trace: str) -> dict[str, list[tuple[str, Any, dict[str, Any]]]]:
    import logging

    from streamlit import config
    from streamlit.testing.v1 import AppTest

    import dashboard.loaders as loaders
    from collector.client import make_source

    logging.getLogger("streamlit").setLevel(logging.ERROR)
    config.set_option("server.address", "127.0.0.1")  # AppTest serves no one: no login gate
    os.environ.pop("TURNLEDGER_DASHBOARD_PASSWORD", None)
    os.environ["TURNLEDGER_DB"] = str(db)
    os.environ.pop("TURNLEDGER_SERVER", None)
    loaders.make_source = lambda spec: Recorder(make_source(spec))  # type: ignore[assignment]
    out = {}
    for title, page, params in PAGES:
        at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=300)
        at.query_params.update({k: context_trace if v == "ctx" else v for k, v in params.items()})
        if page:
            at.switch_page(page)  # before the first run: the app script and its sidebar run too
        loaders._load.clear()  # record every query the page asks for
        loaders._context.clear()
        Recorder.calls = []
        at.run()
        if at.exception:
            raise SystemExit(f"{title}: {at.exception[0].value}")
        out[title] = list(Recorder.calls)
    return out


def replay(db: Path | str, calls: list[tuple[str, Any, dict[str, Any]]]) -> tuple[float, list[tuple[float, str]]]:
    """One page's queries as the file source runs them (on a file or a lake target), starting from a
    closed connection (cold open included)."""
    from ledger.sources import FileSource

    source = FileSource(db)
    source.close()
    timings = []
    for name, filters, kwargs in calls:
        t = time.perf_counter()
        if name == "context":
            source.context(**kwargs)
        else:
            source.query(q.QUERIES[name], filters, **kwargs)
        timings.append((time.perf_counter() - t, name))
    return sum(t for t, _ in timings), timings


def _compare_statistics(db: Path) -> None:
    """The Compare page's work beyond its queries: the intervals (scipy), on the rows the queries return."""
    from ledger.compare_stats import compare_rows
    from ledger.sources import FileSource

    _, _, by_a_b = next(p for p in PAGES if p[0] == "Compare")
    source = FileSource(db)
    runs = source.records(q.compare_runs, q.NO_FILTERS, **by_a_b)
    tools = source.records(q.compare_tools, q.NO_FILTERS, **by_a_b)
    rounds = []
    for _ in range(3):
        t = time.perf_counter()
        compare_rows(runs, tools, **by_a_b)
        rounds.append(time.perf_counter() - t)
    print(
        f"{'  statistics':<18} {len(runs):>7} {statistics.median(rounds) * 1000:>9.0f} ms {min(rounds) * 1000:>5.0f} ms "
        f"{max(rounds) * 1000:>5.0f} ms   runs compared (intervals in Python; cached per selection, not a query)"
    )


# --- the same ledger on a DuckLake (--lake) ---------------------------------------------------
def ledger_lake(db: Path, server: Any) -> str:
    """A lake holding ``db``'s rows, as a new database of ``server``: its cached catalog restored, or
    ``db`` migrated into it (``turnledger migrate``) and cached (the Parquet folder and a catalog dump)."""
    from ledger.lake.migrate import migrate_to_lake
    from ledger.sources import FileSource

    folder = db.with_suffix(".lake")
    dump, made_from = folder / "catalog.dump", folder / "made-from"
    target = f"ducklake:postgres:{server.create_database('bench')}"
    if dump.exists() and made_from.exists() and made_from.read_text() == _file_stamp(db):
        server.restore("bench", dump)
        return target
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "data").mkdir(parents=True)
    FileSource(db).close()  # the recording's read-only connection: the migration opens the file to write
    t = time.perf_counter()
    copied = migrate_to_lake(db, target, data_path=str(folder / "data"))
    server.dump("bench", server.root / "catalog.dump")  # written by the server's user, under its root
    shutil.copyfile(server.root / "catalog.dump", dump)
    dump.chmod(0o644)  # restored by the server's user
    made_from.write_text(_file_stamp(db))
    files = sum(1 for _ in (folder / "data").rglob("*.parquet"))
    print(f"migrated {sum(copied.rows.values()):,} rows into a lake in {time.perf_counter() - t:.0f} s "
          f"({files} Parquet files) -> {folder}")  # fmt: skip
    return target


def _file_stamp(db: Path) -> str:
    stat = db.stat()
    return f"{stat.st_size} {stat.st_mtime_ns}"


def _range(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1000:>7.0f} ms ({min(xs) * 1000:.0f}-{max(xs) * 1000:.0f})"


def compare_on_lake(db: Path, target: str, recorded: dict[str, list[tuple[str, Any, dict[str, Any]]]]) -> None:
    """Each page's queries on the file and on the lake, alternating within each of 3 rounds."""
    print(f"\n{'page':<18} {'queries':>7} {'file: median (range)':>24} {'lake: median (range)':>24} "
          f"{'lake/file':>9}   slowest on the lake (ms)")  # fmt: skip
    for title, calls in recorded.items():
        rounds: dict[str, list[tuple[float, list[tuple[float, str]]]]] = {"file": [], "lake": []}
        for _ in range(3):
            rounds["file"].append(replay(db, calls))
            rounds["lake"].append(replay(target, calls))
        file, lake = ([total for total, _ in rounds[k]] for k in ("file", "lake"))
        median_lake = sorted(rounds["lake"], key=lambda r: r[0])[1]
        slow = sorted(median_lake[1], reverse=True)[:3]
        print(
            f"{title:<18} {len(calls):>7} {_range(file):>24} {_range(lake):>24} "
            f"{statistics.median(lake) / statistics.median(file):>8.1f}x   "
            + ", ".join(f"{n} {t * 1000:.0f}" for t, n in slow)
        )
    fixed: dict[str, dict[str, list[float]]] = {
        "opening": {"file": [], "lake": []},
        "one query": {"file": [], "lake": []},
    }
    for _ in range(3):
        for kind, where in (("file", db), ("lake", target)):
            opening, query = _fixed_costs(where)
            fixed["opening"][kind].append(opening)
            fixed["one query"][kind].append(query)
    notes = {
        "opening": "in each page's first query above",
        "one query": "an empty table counted, the ledger already open",
    }
    for line, xs in fixed.items():
        print(f"{'  ' + line:<18} {'':>7} {_range(xs['file']):>24} {_range(xs['lake']):>24} "
              f"{statistics.median(xs['lake']) / statistics.median(xs['file']):>8.1f}x   ({notes[line]})")  # fmt: skip
    load = os.getloadavg()[0]
    print(f"\n(1-min load average {load:.1f} on {os.cpu_count()} cores)")


def _fixed_costs(where: Path | str) -> tuple[float, float]:
    """Opening a closed ledger read-only (as a page's first query does), then one query that reads no
    rows: what every query pays whatever it reads (on a lake, its catalog reads in PostgreSQL)."""
    from ledger.sources import FileSource

    source = FileSource(where)
    source.close()
    t0 = time.perf_counter()
    with source.cursor() as cur:  # opens the ledger
        cur.execute("SELECT 1").fetchall()
        t1 = time.perf_counter()
        cur.execute("SELECT count(*) FROM budgets").fetchall()
        t2 = time.perf_counter()
    source.close()
    return t1 - t0, t2 - t1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--rebuild", action="store_true", help="regenerate the cached ledger (and so its lake)")
    ap.add_argument("--page", action="append", metavar="TITLE", help="only this page (repeatable), e.g. Compare")
    ap.add_argument("--lake", action="store_true", help="also replay on a DuckLake copy, beside the file")
    a = ap.parse_args()
    header(f"dashboard page load, {a.runs:,} runs" + (" (file and lake)" if a.lake else ""))
    if a.page:
        unknown = set(a.page) - {title for title, _, _ in PAGES}
        if unknown:
            raise SystemExit(f"unknown page(s) {sorted(unknown)}: choose from {[t for t, _, _ in PAGES]}")
        PAGES[:] = [p for p in PAGES if p[0] in a.page]
    db = ledger_file(a.runs, a.rebuild)
    con = open_ledger(db, read_only=True)
    spans, runs, charges = con.execute(
        "SELECT (SELECT count(*) FROM spans), (SELECT count(*) FROM runs), (SELECT count(*) FROM charges)"
    ).fetchone()
    context_trace = con.execute(
        "SELECT trace_id FROM runs WHERE trace_id IN (SELECT trace_id FROM contexts) ORDER BY turns DESC LIMIT 1"
    ).fetchone()[0]
    con.close()
    print(f"ledger {db}: {runs:,} runs, {spans:,} spans, {charges:,} charges ({db.stat().st_size / 1e6:.0f} MB)")
    recorded = record_pages(db, context_trace)
    if not a.lake:
        file_table(db, recorded)
        return
    from tests.lake.postgres import find_bin_dir, start_server

    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise SystemExit("--lake needs PostgreSQL's server binaries (apt-get install postgresql)")
    server = start_server(bin_dir)
    try:
        compare_on_lake(db, ledger_lake(db, server), recorded)
    finally:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)


def file_table(db: Path, recorded: dict[str, list[tuple[str, Any, dict[str, Any]]]]) -> None:
    """Each page's queries on the file, 3 rounds: median, min, max, slowest queries; the goals."""
    print(f"\n{'page':<18} {'queries':>7} {'median of 3':>12} {'min':>8} {'max':>8}   slowest query (ms)")
    worst = 0.0
    medians = {}
    for title, calls in recorded.items():
        rounds = [replay(db, calls) for _ in range(3)]
        totals = sorted(r[0] for r in rounds)
        median_round = sorted(rounds, key=lambda r: r[0])[1]
        slow = sorted(median_round[1], reverse=True)[:3]
        worst = max(worst, statistics.median(totals))
        medians[title] = statistics.median(totals)
        print(
            f"{title:<18} {len(calls):>7} {statistics.median(totals) * 1000:>9.0f} ms {totals[0] * 1000:>5.0f} ms "
            f"{totals[-1] * 1000:>5.0f} ms   " + ", ".join(f"{n} {t * 1000:.0f}" for t, n in slow)
        )
    if "Compare" in recorded:
        _compare_statistics(db)
    for title, goal in GOALS.items():
        if title not in medians:
            continue
        verdict = "OK" if medians[title] <= goal else "OVER GOAL"
        print(f"{title}: {medians[title] * 1000:.0f} ms median (goal <= {goal * 1000:.0f} ms) -> {verdict}")
    load = os.getloadavg()[0]
    print(
        f"\nslowest page: {worst * 1000:.0f} ms median (target < 1000 ms) -> {'OK' if worst < 1 else 'OVER TARGET'}"
        f"   (1-min load average {load:.1f} on {os.cpu_count()} cores)"
    )


if __name__ == "__main__":
    main()
    footer()
