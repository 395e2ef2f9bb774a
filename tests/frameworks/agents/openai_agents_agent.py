"""OpenAI Agents SDK with its LiteLLM model class against Anthropic, traced by OpenInference's
instrumentation (its processor replaces the SDK's own exporter); the system prompt cached through
LiteLLM's ``cache_control_injection_points``, the follow-up streamed (``Runner.run_streamed``).
``MATRIX_CONFIG`` *-litellm-otel: LiteLLM's own otel callback on as well."""

import asyncio

import litellm
from agents import Agent, ModelSettings, Runner, function_tool
from agents.extensions.models.litellm_model import LitellmModel
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from scenario import CONFIG, FOLLOW_UP, MODEL, QUESTION, SYSTEM_PROMPT, flush, lookup_order, tracer_provider

provider = tracer_provider()
OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
if CONFIG.endswith("litellm-otel"):
    litellm.callbacks = ["otel"]
settings = ModelSettings(
    include_usage=True,
    extra_args={"num_retries": 2, "cache_control_injection_points": [{"location": "message", "role": "system"}]},
)
agent = Agent(
    name="order-desk",
    instructions=SYSTEM_PROMPT,
    model=LitellmModel(f"anthropic/{MODEL}"),
    model_settings=settings,
    tools=[function_tool(lookup_order)],
)


async def main() -> None:
    first = await Runner.run(agent, QUESTION)
    assert "shipped" in first.final_output, first.final_output
    streamed = Runner.run_streamed(agent, [*first.to_input_list(), {"role": "user", "content": FOLLOW_UP}])
    async for _ in streamed.stream_events():
        pass
    assert "shipped" in streamed.final_output, streamed.final_output
    await asyncio.sleep(0.5)  # LiteLLM logs a streamed call's success from a background task


asyncio.run(main())
flush(provider)
