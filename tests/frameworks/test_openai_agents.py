"""OpenAI Agents SDK in the live matrix (tests/frameworks/matrix.py): its LiteLLM model class against
Anthropic, traced by OpenInference, alone and with LiteLLM's own otel callback beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .conftest import Serve
from .matrix import OTEL, Config, Framework, check, params

OPENAI_AGENTS = Framework(
    "openai-agents",
    "openai-agents 0.24.0, litellm 1.110.2, openinference-instrumentation-openai-agents 2.6.0",
    (
        "openai-agents[litellm]==0.24.0",
        "litellm==1.110.2",
        "tenacity==9.2.1",
        "openinference-instrumentation-openai-agents==2.6.0",
        *OTEL,
    ),
    "openai_agents_agent.py",
    (
        "trace.set_tracer_provider(provider)  # with OTLPSpanExporter(): OTEL_EXPORTER_OTLP_ENDPOINT=turnledger",
        "OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)",
        "Agent(name='desk', model=LitellmModel('anthropic/claude-sonnet-4-6'), tools=[...])",
    ),
)
CONFIGS = (
    Config(
        OPENAI_AGENTS,
        "openinference",
        xfail="#43: $0.070851 for $0.038381, unflagged: the model anthropic/claude-sonnet-4-6 beside llm.system=openai "
        "(openinference/instrumentation/openai_agents/_processor.py:227) is now priced as claude-sonnet-4-6, but its "
        "prompt count (7,477) includes the cache with no split given (_processor.py:825-833: input and output counts "
        "only), so cache reads and writes are charged as uncached input; the ledger should flag the cache split "
        "as unknown with its largest possible error",
    ),
    Config(
        OPENAI_AGENTS,
        "openinference-litellm-otel",
        xfail="#43: 2 charges for 3 billed calls, $0.004899 for $0.038381: LiteLLM writes its attributes onto the "
        "current OpenInference generation span (litellm/integrations/opentelemetry.py:1462); the first call is not "
        "charged, the second twice (once unpriced, under anthropic/...), the streamed call not at all",
    ),
)


@pytest.mark.parametrize("config", params(*CONFIGS))
def test_openai_agents(config: Config, framework_venv: Any, turnledger_serve: Serve, tmp_path: Path) -> None:
    check(config, framework_venv(config.framework.name, config.framework.pins), turnledger_serve, tmp_path)
