"""pydantic-ai in the live matrix (tests/frameworks/matrix.py): its own spans, formats 5 and 6, with
and without the anthropic SDK's spans beside them, 5-minute and 1-hour cache writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .conftest import Serve
from .matrix import ANTHROPIC_SDK, NO_SDK_SPANS, OTEL, Config, Framework, check, params

PYDANTIC_AI = Framework(
    "pydantic-ai",
    "pydantic-ai-slim 2.78.0",
    ("pydantic-ai-slim[anthropic]==2.78.0", ANTHROPIC_SDK, *OTEL),
    "pydantic_ai_agent.py",
    (
        "trace.set_tracer_provider(provider)  # with OTLPSpanExporter(): OTEL_EXPORTER_OTLP_ENDPOINT=turnledger",
        "Agent.instrument_all(InstrumentationSettings(version=6))",
        "Agent('anthropic:claude-sonnet-4-6', model_settings={'anthropic_cache_instructions': '5m'})",
    ),
)


CONFIGS = (
    Config(PYDANTIC_AI, "v6"),
    Config(PYDANTIC_AI, "v5"),
    Config(PYDANTIC_AI, "v6-no-sdk-spans", env=NO_SDK_SPANS),
    Config(PYDANTIC_AI, "1h", ttl="1h"),
)


@pytest.mark.parametrize("config", params(*CONFIGS))
def test_pydantic_ai(config: Config, framework_venv: Any, turnledger_serve: Serve, tmp_path: Path) -> None:
    check(config, framework_venv(config.framework.name, config.framework.pins), turnledger_serve, tmp_path)
