"""LangGraph: ``create_react_agent`` over langchain-anthropic's ``ChatAnthropic``, the system prompt a
cached content block; the follow-up streamed (``stream_mode="messages"``). Instrumented by
OpenInference (``MATRIX_CONFIG`` openinference-*) or OpenLLMetry (openllmetry-*); the anthropic
SDK's own spans are on unless ANTHROPIC_OPEN_TELEMETRY=false."""

from langchain_anthropic import ChatAnthropic
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent
from scenario import CONFIG, FOLLOW_UP, MODEL, QUESTION, SYSTEM_PROMPT, flush, lookup_order, tracer_provider

provider = tracer_provider()
if CONFIG.startswith("openllmetry"):
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor

    LangchainInstrumentor().instrument(tracer_provider=provider)
else:
    from openinference.instrumentation.langchain import LangChainInstrumentor

    LangChainInstrumentor().instrument(tracer_provider=provider)

system = SystemMessage(content=[{"type": "text", "text": SYSTEM_PROMPT, "cache_control": {"type": "ephemeral"}}])
agent = create_react_agent(ChatAnthropic(model=MODEL, max_retries=2), [tool(lookup_order)], prompt=system)

first = agent.invoke({"messages": [HumanMessage(QUESTION)]})
assert "shipped" in first["messages"][-1].text, first["messages"][-1]
streamed = ""
for chunk, _ in agent.stream({"messages": [*first["messages"], HumanMessage(FOLLOW_UP)]}, stream_mode="messages"):
    streamed += chunk.text
assert "shipped" in streamed, streamed
flush(provider)
