"""The framework matrix: each framework as a user installs it (exact pins), its agent script, the
three lines of setup a user needs, and the configurations it is run in.

A configuration that today's ledger gets wrong carries ``xfail``: the reason names what is wrong and,
where the data is lost upstream, the upstream file and line. Its test is a strict xfail, so it turns
red the day the ledger gets it right and this table has to be updated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

OTEL = ("opentelemetry-sdk==1.45.2", "opentelemetry-exporter-otlp-proto-http==1.45.2")
ANTHROPIC_SDK = "anthropic==2.17.0"


@dataclass(frozen=True)
class Framework:
    name: str
    version: str  # as shown in docs/frameworks.md
    pins: tuple[str, ...]
    script: str  # tests/frameworks/agents/<script>
    setup: tuple[str, str, str]  # the three lines a user adds to send its spans to turnledger


@dataclass(frozen=True)
class Config:
    framework: Framework
    name: str
    env: dict[str, str] = field(default_factory=dict)
    ttl: str = "5m"  # the cache writes the fake reports: "5m" or "1h"
    xfail: str | None = None

    @property
    def id(self) -> str:
        return f"{self.framework.name}-{self.name}"


PYDANTIC_AI = Framework(
    "pydantic-ai",
    "pydantic-ai-slim 2.78.0",
    ("pydantic-ai-slim[anthropic]==2.78.0", ANTHROPIC_SDK, *OTEL),
    "pydantic_ai_agent.py",
    (
        "trace.set_tracer_provider(provider)  # OTLPSpanExporter → turnledger",
        "Agent.instrument_all(InstrumentationSettings(version=6))",
        "Agent('anthropic:claude-sonnet-4-6', model_settings={'anthropic_cache_instructions': '5m'})",
    ),
)

CONFIGS: tuple[Config, ...] = (
    Config(PYDANTIC_AI, "v6"),
    Config(PYDANTIC_AI, "v5"),
    Config(PYDANTIC_AI, "1h", ttl="1h"),
)
