"""LangGraph + langchain-anthropic in the live matrix (tests/frameworks/matrix.py), instrumented by
OpenInference or by OpenLLMetry, with and without the anthropic SDK's own spans beside them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .conftest import Serve
from .matrix import ANTHROPIC_SDK, NO_SDK_SPANS, OTEL, Config, Framework, check, params

_LANGGRAPH = ("langgraph==1.2.24", "langchain-anthropic==1.7.10", ANTHROPIC_SDK, *OTEL)
OPENINFERENCE = Framework(
    "langgraph-openinference",
    "langgraph 1.2.24, langchain-anthropic 1.7.10, openinference-instrumentation-langchain 0.1.80",
    (*_LANGGRAPH, "openinference-instrumentation-langchain==0.1.80"),
    "langgraph_agent.py",
    (
        "trace.set_tracer_provider(provider)  # with OTLPSpanExporter(): OTEL_EXPORTER_OTLP_ENDPOINT=turnledger",
        "from openinference.instrumentation.langchain import LangChainInstrumentor",
        "LangChainInstrumentor().instrument(tracer_provider=provider)",
    ),
)


OPENLLMETRY = Framework(
    "langgraph-openllmetry",
    "langgraph 1.2.24, langchain-anthropic 1.7.10, opentelemetry-instrumentation-langchain 0.62.4",
    (*_LANGGRAPH, "opentelemetry-instrumentation-langchain==0.62.4"),
    "langgraph_agent.py",
    (
        "trace.set_tracer_provider(provider)  # with OTLPSpanExporter(): OTEL_EXPORTER_OTLP_ENDPOINT=turnledger",
        "from opentelemetry.instrumentation.langchain import LangchainInstrumentor",
        "LangchainInstrumentor().instrument(tracer_provider=provider)",
    ),
)
CONFIGS = (
    Config(OPENINFERENCE, "openinference-no-sdk-spans", env=NO_SDK_SPANS),
    Config(
        OPENINFERENCE,
        "openinference-no-sdk-spans-classic-stream",
        env=NO_SDK_SPANS,
        classic_stream=True,
        flagged="incomplete usage: streamed with the classic message_delta (output count only), langchain-anthropic "
        "1.7.10 reports input 0: it drops message_start's usage (langchain_anthropic/chat_models.py:2334) and "
        "takes the usage from message_delta alone (:2495)",
    ),
    Config(
        OPENINFERENCE,
        "openinference",
        xfail="#43: 4 charges for 3 billed calls, 5 runs for 2: OpenInference never makes its span current "
        "(openinference-instrumentation-langchain 0.1.80, instrumentation/langchain/_tracer.py:198, the attach "
        "commented out), so each anthropic SDK span is the root of a trace of its own, counted as a run; the "
        "streamed call's LangChain span has no response id (no output.value) to join its SDK copy by",
    ),
    Config(OPENLLMETRY, "openllmetry"),
    Config(
        OPENLLMETRY,
        "openllmetry-no-sdk-spans",
        env=NO_SDK_SPANS,
        xfail="#43: every cache write reported as 0 and its tokens charged as uncached input: $0.032835 for "
        "$0.038381 (-14.5%), no flag. langchain-anthropic 1.7.10 puts the writes under ephemeral_5m_input_tokens and "
        "sets cache_creation to 0 when the API gives the TTL split (langchain_anthropic/chat_models.py:3359); "
        "opentelemetry-instrumentation-langchain 0.62.4 reads cache_creation only "
        "(opentelemetry/instrumentation/langchain/span_utils.py:430)",
    ),
)


@pytest.mark.parametrize("config", params(*CONFIGS))
def test_langgraph(config: Config, framework_venv: Any, turnledger_serve: Serve, tmp_path: Path) -> None:
    check(config, framework_venv(config.framework.name, config.framework.pins), turnledger_serve, tmp_path)
