"""Google ADK in the live matrix (tests/frameworks/matrix.py): ``LiteLlm("anthropic/…")``, ADK's
native spans."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .conftest import Serve
from .matrix import Config, Framework, check, params

GOOGLE_ADK = Framework(
    "google-adk",
    "google-adk 2.13.0, litellm 1.110.2",
    # google-adk 2.13 caps the OpenTelemetry SDK at 1.44
    (
        "google-adk==2.13.0",
        "litellm==1.110.2",
        "opentelemetry-sdk==1.44.0",
        "opentelemetry-exporter-otlp-proto-http==1.44.0",
    ),
    "google_adk_agent.py",
    (
        "trace.set_tracer_provider(provider)  # with OTLPSpanExporter(): OTEL_EXPORTER_OTLP_ENDPOINT=turnledger",
        "model = LiteLlm('anthropic/claude-sonnet-4-6')",
        "LlmAgent(name='desk', model=model, instruction=prompt, tools=[...])",
    ),
)
CONFIGS = (
    Config(GOOGLE_ADK, "native"),  # anthropic/claude-sonnet-4-6 resolves (ledger.model_names)
)


@pytest.mark.parametrize("config", params(*CONFIGS))
def test_google_adk(config: Config, framework_venv: Any, turnledger_serve: Serve, tmp_path: Path) -> None:
    check(config, framework_venv(config.framework.name, config.framework.pins), turnledger_serve, tmp_path)
