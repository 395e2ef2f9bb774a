"""Google ADK: an ``LlmAgent`` on ``LiteLlm("anthropic/…")`` (num_retries for the 429, the system
prompt cached through LiteLLM's ``cache_control_injection_points``), ADK's native spans on the global
TracerProvider; the follow-up streamed (``StreamingMode.SSE``). One session, asked twice."""

import asyncio

from google.adk.agents import LlmAgent
from google.adk.agents.run_config import RunConfig, StreamingMode
from google.adk.models.lite_llm import LiteLlm
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types
from scenario import FOLLOW_UP, MODEL, QUESTION, SYSTEM_PROMPT, flush, lookup_order, tracer_provider

provider = tracer_provider()
model = LiteLlm(
    f"anthropic/{MODEL}", num_retries=2, cache_control_injection_points=[{"location": "message", "role": "system"}]
)
agent = LlmAgent(name="order_desk", model=model, instruction=SYSTEM_PROMPT, tools=[lookup_order])
runner = Runner(app_name="order-desk", agent=agent, session_service=InMemorySessionService())


async def ask(session_id: str, text: str, config: RunConfig | None = None) -> str:
    message = types.Content(role="user", parts=[types.Part(text=text)])
    answer = ""
    async for event in runner.run_async(user_id="u", session_id=session_id, new_message=message, run_config=config):
        if event.content and event.content.parts and not event.partial:
            answer += "".join(p.text or "" for p in event.content.parts)
    return answer


async def main() -> None:
    session = await runner.session_service.create_session(app_name="order-desk", user_id="u")
    assert "shipped" in await ask(session.id, QUESTION)
    assert "shipped" in await ask(session.id, FOLLOW_UP, RunConfig(streaming_mode=StreamingMode.SSE))
    await asyncio.sleep(0.5)


asyncio.run(main())
flush(provider)
