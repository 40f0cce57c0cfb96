"""weather.py: a pydantic-ai agent written as any other; agent-channel serves it as it is.

agent-channel-acp serve --agent weather:agent --input "weather in Paris"
"""

import json
from collections.abc import AsyncIterator

import anyio
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel


async def stand_in(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | DeltaToolCalls]:
    """A scripted model (no key): look the city up, then answer from what the tool said."""
    last = messages[-1].parts[-1]
    if isinstance(last, ToolReturnPart):
        yield f"It is {last.content}."
    else:
        city = str(getattr(last, "content", "")).split()[-1]
        yield {0: DeltaToolCall("forecast", json.dumps({"city": city}))}


agent = Agent(FunctionModel(stream_function=stand_in), name="weather")
forecast_seconds = 2.0


@agent.tool_plain
async def forecast(city: str) -> str:
    """The forecast for a city (slow: long enough to stop it)."""
    await anyio.sleep(forecast_seconds)
    return f"sunny in {city}"
