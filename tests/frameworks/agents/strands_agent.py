"""Strands Agents with its AnthropicModel (which streams every call); the system prompt cached with a
cache point; its own OpenTelemetry spans on the global TracerProvider. One agent, asked twice: in one
event loop (``invoke_async``), or with the synchronous call (``MATRIX_CONFIG`` sync), which runs
each invocation on a new event loop."""

import asyncio

from scenario import CONFIG, FOLLOW_UP, MODEL, QUESTION, SYSTEM_PROMPT, flush, lookup_order, tracer_provider
from strands import Agent, tool
from strands.models.anthropic import AnthropicModel

provider = tracer_provider()
model = AnthropicModel(model_id=MODEL, max_tokens=1024, client_args={"max_retries": 2})
agent = Agent(
    model=model,
    system_prompt=[{"text": SYSTEM_PROMPT}, {"cachePoint": {"type": "default"}}],
    tools=[tool(lookup_order)],
    callback_handler=None,
)


async def main() -> None:
    assert "shipped" in str(await agent.invoke_async(QUESTION))
    assert "shipped" in str(await agent.invoke_async(FOLLOW_UP))


if CONFIG.startswith("sync"):
    assert "shipped" in str(agent(QUESTION))
    assert "shipped" in str(agent(FOLLOW_UP))
else:
    asyncio.run(main())
flush(provider)
