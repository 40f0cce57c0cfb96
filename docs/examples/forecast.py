"""forecast.py: a LangGraph agent written as any other; agent-channel serves it as it is.

agent-channel-acp serve --agent forecast:graph --input "weather in Paris"
"""

import anyio
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent

forecast_seconds = 2.0


@tool
async def forecast(city: str) -> str:
    """The forecast for a city (slow: long enough to stop it)."""
    await anyio.sleep(forecast_seconds)
    return f"sunny in {city}"


class StandIn(BaseChatModel):
    """A scripted model (no key): look the forecast up, then answer from what the tool said."""

    _llm_type = property(lambda self: "stand-in")

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        last = messages[-1]
        if isinstance(last, ToolMessage):
            answer = AIMessage(f"It is {last.text}.")
        else:
            city = last.text.split()[-1]
            call = {"name": "forecast", "args": {"city": city}, "id": f"call-{len(messages)}"}
            answer = AIMessage("", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=answer)])


graph = create_react_agent(StandIn(), [forecast])
