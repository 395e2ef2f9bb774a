"""CrewAI with its native Anthropic provider (``LLM("anthropic/…")``; its agent executor marks the
system prompt as a cache breakpoint), traced by OpenInference's CrewAI instrumentation (its
documented mode); ``MATRIX_CONFIG`` *-sdk-spans: the anthropic SDK's calls traced as well, by
OpenLLMetry's anthropic instrumentation. Two crews: the question, then the follow-up streamed."""

from crewai import LLM, Agent, Crew, Task
from crewai.tools import tool
from openinference.instrumentation.crewai import CrewAIInstrumentor
from scenario import CONFIG, FOLLOW_UP, MODEL, QUESTION, SYSTEM_PROMPT, TOOL_NAME, flush, lookup_order, tracer_provider

provider = tracer_provider()
CrewAIInstrumentor().instrument(tracer_provider=provider)
if CONFIG.endswith("sdk-spans"):
    from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor

    AnthropicInstrumentor().instrument(tracer_provider=provider)


def crew(question: str, stream: bool) -> str:
    llm = LLM(model=f"anthropic/{MODEL}", max_retries=2, stream=stream)
    desk = Agent(role="order desk", goal="answer order questions", backstory=SYSTEM_PROMPT, llm=llm,
                 tools=[tool(TOOL_NAME)(lookup_order)], verbose=False)  # fmt: skip
    task = Task(description=question, expected_output="one line", agent=desk)
    return str(Crew(agents=[desk], tasks=[task], verbose=False).kickoff())


assert "shipped" in crew(QUESTION, stream=False)
assert "shipped" in crew(FOLLOW_UP, stream=True)
flush(provider)
