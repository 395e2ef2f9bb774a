"""LiteLLM's own OpenTelemetry callback in the live matrix (tests/frameworks/matrix.py): default and
latest GenAI conventions, with and without an application span around each turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .conftest import Serve
from .matrix import OTEL, Config, Framework, check, params

LITELLM = Framework(
    "litellm",
    "litellm 1.110.2",
    ("litellm==1.110.2", "tenacity==9.2.1", *OTEL),  # tenacity: litellm's num_retries needs it, undeclared
    "litellm_agent.py",
    (
        "trace.set_tracer_provider(provider)  # with OTLPSpanExporter(): OTEL_EXPORTER_OTLP_ENDPOINT=turnledger",
        'litellm.callbacks = ["otel"]',
        'litellm.completion(model="anthropic/claude-sonnet-4-6", messages=...)',
    ),
)
LATEST = {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}
# LiteLLM traces model calls only (the tool loop is the application's): without an application span
# each call is a run of its own; with one, each turn is a run, its tool call not reported.
ALONE, TURNS = ((1, 0), (1, 0), (1, 0)), ((2, 0), (1, 0))
CONFIGS = (
    Config(LITELLM, "latest", env=LATEST, runs=ALONE),
    Config(
        LITELLM,
        "default",
        runs=ALONE,
        xfail="#43: 5 charges for 3 billed calls (1.86x): each non-streamed call is two spans with different ids, "
        "litellm_request carrying LiteLLM's own chatcmpl-... as gen_ai.response.id "
        "(litellm/integrations/opentelemetry.py:2603) and its raw_gen_ai_request child Anthropic's msg_... (:1527), "
        "and both are charged; the two calls of the question are counted as two runs of 2 calls",
    ),
    Config(
        LITELLM,
        "parent-default",
        runs=TURNS,
        xfail="#43: money exact, but 3 runs for 2 turns: LiteLLM logs a streamed call from a background thread "
        "without the caller's context, so its span is the root of a new trace (a run of its own) and the follow-up "
        "turn's application span a run of 0 calls; no conversation id joins them",
    ),
    Config(
        LITELLM,
        "parent-latest",
        env=LATEST,
        runs=TURNS,
        xfail="#43: 1 of 3 calls charged (0.14x), no flag: with an application span current, LiteLLM writes each "
        "call's attributes onto that span (litellm/integrations/opentelemetry.py:1462), each call overwriting the "
        "last, and creates no span of its own",
    ),
)


@pytest.mark.parametrize("config", params(*CONFIGS))
def test_litellm(config: Config, framework_venv: Any, turnledger_serve: Serve, tmp_path: Path) -> None:
    check(config, framework_venv(config.framework.name, config.framework.pins), turnledger_serve, tmp_path)
