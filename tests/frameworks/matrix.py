"""The live framework matrix (one ``test_<framework>.py`` per framework, so the suite's workers share
them out): each framework, real and unmodified in its own pinned virtual environment, runs the
order-desk agent (``agents/scenario.py``) against the fake Anthropic API and exports its spans with
the official OTLP/HTTP exporter into a real ``turnledger serve``.

Ground truth is the fake's record of what it billed: each successful Messages response's usage,
priced with genai-prices from that usage alone (never from the ledger's own pricing). The ledger
must hold one charge per billed call with every token term (uncached input, cache read, cache write
5m and 1h, output) and the USD to the micro-dollar, two runs (the question and the streamed
follow-up) with two model calls and the one tool call in the first, and ``report``'s total equal to
the truth. Each run writes what it saw to ``.results/`` for ``report.py`` (docs/frameworks.md).

A configuration that today's ledger gets wrong carries ``xfail``: the reason names what is wrong and,
where the data is lost upstream, the upstream file and line. Its test is a strict xfail, so it turns
red the day the ledger gets it right and its entry has to be updated.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest
from genai_prices import extract_usage

from ledger.report import build_report
from tests.fakes.anthropic_server import FakeAnthropicServer, FakeError, FakeReply, Script, api_usage

from .conftest import INSTALLED, Serve, venv_dir

OTEL = ("opentelemetry-sdk==1.45.2", "opentelemetry-exporter-otlp-proto-http==1.45.2")
ANTHROPIC_SDK = "anthropic==2.17.0"
NO_SDK_SPANS = {"ANTHROPIC_OPEN_TELEMETRY": "false"}  # the anthropic 2.x SDK's own spans, on by default

HANG_S = 300  # hang guards only: an agent here answers in seconds
AGENTS = Path(__file__).parent / "agents"
RESULTS = Path(__file__).parent / ".results"
SYSTEM_TOKENS = 7_040  # the cached prefix the fake reports (agents/scenario.py's prompt and tool)
RUNS = ((2, 1), (1, 0))  # (model calls, tool calls): the question, then the streamed follow-up


@dataclass(frozen=True)
class Framework:
    name: str
    version: str  # as shown in docs/frameworks.md
    pins: tuple[str, ...]
    script: str  # agents/<script>
    setup: tuple[str, str, str]  # the three lines a user adds to send its spans to turnledger


@dataclass(frozen=True)
class Config:
    framework: Framework
    name: str
    env: dict[str, str] = field(default_factory=dict)
    ttl: str = "5m"  # the cache writes the fake reports: "5m" or "1h"
    classic_stream: bool = False  # message_delta with the output count only (the API's older shape)
    runs: tuple[tuple[int, int], ...] = RUNS  # (model calls, tool calls) of each run, in order
    flagged: str | None = None  # upstream loses data: the ledger must flag each charge it cannot get right
    # The source traces no model call at all: report must name its runs (runs_without_model_calls)
    no_model_calls: str | None = None
    xfail: str | None = None  # the ledger is wrong today (#43): what is wrong, and where upstream

    @property
    def id(self) -> str:
        return f"{self.framework.name}-{self.name}"


def params(*configs: Config) -> list[Any]:
    """The configurations as test parameters, each a strict xfail where the ledger is known wrong."""
    return [
        pytest.param(c, id=c.id, marks=[pytest.mark.xfail(strict=True, reason=c.xfail)] if c.xfail else [])
        for c in configs
    ]


def _last_user_content(body: dict[str, Any]) -> list[dict[str, Any]]:
    content = (body.get("messages") or [{}])[-1].get("content") or []
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


class OrderDesk:
    """The fake model: asked about order 17 with the tool offered, it calls ``lookup_order``; given
    the tool's result, or asked anything else, it answers in text. Each billed call's usage is
    distinct: the first writes the cached prefix, later ones read it and write the new turns."""

    def __init__(self, ttl: str) -> None:
        self.ttl = ttl
        self.n = 0

    def __call__(self, body: dict[str, Any]) -> Script:
        self.n += 1
        n, write = self.n, "cache_1h" if self.ttl == "1h" else "cache_5m"
        cache = {write: SYSTEM_TOKENS} if n == 1 else {"cache_read": SYSTEM_TOKENS, write: 150 + 11 * n}
        usage = api_usage(400 + 37 * n, 30 + 9 * n, **cache)
        content = _last_user_content(body)
        if any(b.get("type") == "tool_result" for b in content):
            return FakeReply.text("Order 17 shipped on 2026-12-01.", usage=usage)
        asked = " ".join(b.get("text", "") for b in content if b.get("type") == "text")
        if "order 17" in asked.lower() and body.get("tools"):
            return FakeReply.tools((f"toolu_{n:02d}", "lookup_order", {"order_id": "17"}), usage=usage)
        return FakeReply.text("Order 17 shipped on 2026-12-01, as said.", usage=usage)


def _truth(response: dict[str, Any]) -> tuple[Any, ...]:
    """One billed call as the ledger must charge it, priced by genai-prices from the response: its
    token terms and USD (the model's name as the ledger shows it is not asserted: a routing form such
    as ``anthropic/claude-sonnet-4-6`` may stay as the source wrote it, priced as the model)."""
    u = response["usage"]
    usd = extract_usage(response, provider_id="anthropic").calc_price().total_price
    writes = u["cache_creation"]  # the ledger keeps the 5-minute and 1-hour writes apart
    return (u["input_tokens"], writes["ephemeral_5m_input_tokens"], u["cache_read_input_tokens"], u["output_tokens"],
            writes["ephemeral_1h_input_tokens"], Decimal(str(usd)))  # fmt: skip


def _ledger(db: Path) -> dict[str, Any]:
    with duckdb.connect(str(db), read_only=True) as con:
        charges = con.execute(
            "SELECT uncached_input_tokens, cache_write_tokens, cache_read_tokens, output_tokens, "
            "cache_write_1h_tokens, usd_input + usd_output + usd_cache_write + usd_cache_read + usd_cache_write_1h, "
            "unpriced OR invalid_usage OR incomplete_usage, model FROM charges"
        ).fetchall()
        runs = tuple(con.execute("SELECT model_calls, tool_calls FROM runs ORDER BY started_at").fetchall())
        report = build_report(con.cursor())
    return {"charges": charges, "runs": runs, "total_usd": Decimal(str(report["total_usd"])),
            "blind_runs": sum(r["runs"] for r in report["runs_without_model_calls"])}  # fmt: skip


def _record(config: Config, outcome: dict[str, Any]) -> None:
    marker = venv_dir(config.framework.name, config.framework.pins) / INSTALLED
    RESULTS.mkdir(exist_ok=True)
    f = config.framework
    row = {
        "framework": f.name, "version": f.version, "pins": f.pins, "setup": f.setup, "configuration": config.name,
        "env": config.env, "ttl": config.ttl, "classic_stream": config.classic_stream,
        "flagged": config.flagged, "no_model_calls": config.no_model_calls, "xfail": config.xfail,
        "install_s": json.loads(marker.read_text())["install_s"], **outcome,
    }  # fmt: skip
    (RESULTS / f"{config.id}.json").write_text(json.dumps(row, indent=1, default=str))


def check(config: Config, python: Path, serve: Serve, tmp_path: Path) -> None:
    """Runs the configuration's agent and asserts the ledger against the fake's record."""
    started = time.monotonic()
    with FakeAnthropicServer(OrderDesk(config.ttl), full_delta_usage=not config.classic_stream) as fake:
        fake.enqueue(FakeError.rate_limited(retry_after=0.1))  # the first call is retried by the SDK
        (tmp_path / "home").mkdir()
        env = {
            "PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"), "PYTHONPATH": str(AGENTS),
            "ANTHROPIC_BASE_URL": fake.base_url, "ANTHROPIC_API_KEY": "sk-ant-fake", "MATRIX_CONFIG": config.name,
            "OTEL_EXPORTER_OTLP_ENDPOINT": serve.url, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **config.env,
        }  # fmt: skip
        agent = subprocess.run(
            [python, AGENTS / config.framework.script], env=env, cwd=tmp_path, capture_output=True, text=True,
            timeout=HANG_S,
        )  # fmt: skip
        assert agent.returncode == 0, agent.stdout[-2000:] + agent.stderr[-6000:]
        exchanges = list(fake.exchanges)
    out = serve.stop()  # the exporter flushed before the agent exited: every span is committed
    assert serve.proc.returncode == 0, out
    # The scenario ran as written: one 429, retried; one streamed call.
    assert [e.status for e in exchanges].count(429) == 1
    billed = [e.response for e in exchanges if e.status == 200 and e.response and e.path == "/v1/messages"]
    assert any(e.body.get("stream") for e in exchanges if e.status == 200)
    want = sorted(_truth(r) for r in billed)
    truth = sum(w[5] for w in want)
    seen = _ledger(serve.db)
    charges = sorted(c[:6] for c in seen["charges"])
    ledger_usd = sum((c[5] for c in charges), Decimal(0))
    wrong = [c for c in seen["charges"] if c[:6] not in want]
    _record(config, {
        "billed_calls": len(billed), "charges": len(charges), "flagged_charges": sum(c[6] for c in seen["charges"]),
        "truth_usd": truth, "ledger_usd": ledger_usd, "report_usd": seen["total_usd"], "runs": seen["runs"],
        "exact": charges == want and seen["runs"] == config.runs and seen["total_usd"] == truth,
        "wrong_unflagged": sum(not c[6] for c in wrong),
        "test_s": round(time.monotonic() - started, 1), "seen": seen["charges"], "want": want,
        "exchanges": [(e.path, e.status, e.body.get("stream", False), len(e.body.get("messages", []))) for e in exchanges],
    })  # fmt: skip
    assert seen["runs"] == config.runs
    if config.no_model_calls:  # nothing to charge: every run that called a tool is named, none is a $0 run
        assert charges == [] and seen["blind_runs"] == sum(1 for _, tools in config.runs if tools)
        return
    if config.flagged:  # one charge per billed call, each one it cannot get right flagged
        assert len(charges) == len(want)
        assert wrong and all(c[6] for c in wrong), wrong
        return
    assert charges == want
    assert seen["total_usd"] == truth
