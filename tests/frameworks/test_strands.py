"""Strands Agents in the live matrix (tests/frameworks/matrix.py): its own spans (it streams every
call, on the anthropic 0.x SDK, which has no spans of its own)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .conftest import Serve
from .matrix import Config, Framework, check, params

STRANDS = Framework(
    "strands",
    "strands-agents 1.62.0 (anthropic 0.125.0)",
    # strands pins the OpenTelemetry instrumentation betas: the SDK one release behind the others here
    (
        "strands-agents[anthropic]==1.62.0",
        "anthropic==0.125.0",
        "opentelemetry-sdk==1.45.1",
        "opentelemetry-exporter-otlp-proto-http==1.45.1",
    ),
    "strands_agent.py",
    (
        "trace.set_tracer_provider(provider)  # with OTLPSpanExporter(): OTEL_EXPORTER_OTLP_ENDPOINT=turnledger",
        "model = AnthropicModel(model_id='claude-sonnet-4-6', max_tokens=1024)",
        "Agent(model=model, system_prompt=[{'text': prompt}, {'cachePoint': {'type': 'default'}}])",
    ),
)


CONFIGS = (
    Config(STRANDS, "async"),
    Config(STRANDS, "async-classic-stream", classic_stream=True),
    Config(
        STRANDS,
        "sync",
        xfail="#43, upstream, not the ledger's to fix: 4 billed calls, 3 charges. Agent.__call__ runs each "
        "invocation under asyncio.run (strands/_async.py:38) while AnthropicModel keeps one AsyncAnthropic client "
        "(strands/models/anthropic.py:189) whose pooled connection belongs to the closed loop: the follow-up's "
        "request reaches the API and is billed, its response is lost ('Event loop is closed'), the SDK sends it "
        "again; no span holds the lost call's usage",
    ),
)


@pytest.mark.parametrize("config", params(*CONFIGS))
def test_strands(config: Config, framework_venv: Any, turnledger_serve: Serve, tmp_path: Path) -> None:
    check(config, framework_venv(config.framework.name, config.framework.pins), turnledger_serve, tmp_path)
