"""pydantic-ai: ``Agent.instrument_all`` with the global TracerProvider; the system prompt cached
through ``anthropic_cache_instructions`` ("5m" or "1h" by configuration), the follow-up streamed.

Configurations: ``v5`` / ``v6`` (its instrumentation data format), ``1h`` (1-hour cache writes);
the anthropic SDK's own spans are on unless ANTHROPIC_OPEN_TELEMETRY=false."""

import asyncio

from pydantic_ai import Agent
from pydantic_ai.models.anthropic import AnthropicModelSettings
from pydantic_ai.models.instrumented import InstrumentationSettings
from scenario import CONFIG, FOLLOW_UP, MODEL, QUESTION, SYSTEM_PROMPT, flush, lookup_order, tracer_provider

provider = tracer_provider()
Agent.instrument_all(InstrumentationSettings(version=5 if CONFIG == "v5" else 6))
ttl = "1h" if CONFIG == "1h" else "5m"
agent = Agent(
    f"anthropic:{MODEL}",
    instructions=SYSTEM_PROMPT,
    tools=[lookup_order],
    model_settings=AnthropicModelSettings(anthropic_cache_instructions=ttl, anthropic_cache_tool_definitions=ttl),
)


async def main() -> None:
    first = await agent.run(QUESTION)
    assert "shipped" in first.output, first.output
    async with agent.run_stream(FOLLOW_UP, message_history=first.all_messages()) as streamed:
        assert "shipped" in await streamed.get_output()


asyncio.run(main())
flush(provider)
