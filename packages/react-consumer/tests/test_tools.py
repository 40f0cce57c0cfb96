"""Tools: schema from the signature and docstring, validation, concurrency."""

from __future__ import annotations

import anyio
import pytest
from agent_channel import ChatMessageTool, ChatMessageUser
from agent_channel_react import AgentState, ScriptedModel, ToolError, call, react, tool, tool_call

from .helpers import add

pytestmark = pytest.mark.anyio


def test_schema_and_description_come_from_the_function() -> None:
    assert add.description == "Add two integers."
    assert add.parameters["properties"] == {
        "a": {"type": "integer", "description": "The first."},
        "b": {"type": "integer", "description": "The second."},
    }
    assert add.parameters["required"] == ["a", "b"]
    assert add.validate({"a": "3", "b": 4}) == {"a": 3, "b": 4}
    with pytest.raises(ToolError, match="c: Extra inputs are not permitted"):
        add.validate({"a": 1, "b": 2, "c": 3})


def test_a_sync_function_is_refused() -> None:
    def not_async() -> str:
        return ""

    with pytest.raises(TypeError):
        tool(not_async)  # pyright: ignore[reportArgumentType]


async def test_calls_of_one_message_run_concurrently() -> None:
    a_ran, b_ran = anyio.Event(), anyio.Event()

    @tool
    async def ping() -> str:
        """Waits for pong."""
        a_ran.set()
        await b_ran.wait()
        return "ping"

    @tool
    async def pong() -> str:
        """Waits for ping."""
        b_ran.set()
        await a_ran.wait()
        return "pong"

    model = ScriptedModel([call(tool_call("ping"), tool_call("pong")), "Both done."])
    state = await react(model=model, tools=[ping, pong], submit=False)(
        AgentState(messages=[ChatMessageUser(content="Go.")])
    )
    results = [m.text for m in state.messages if isinstance(m, ChatMessageTool)]
    assert results == ["ping", "pong"]  # sequentially this would deadlock


def test_a_title_that_does_not_fit_the_models_arguments_falls_back_to_the_template() -> None:
    @tool(title="Reading {path[0]} as {mode.upper} ({n:d})")
    async def read(path: object = None, mode: object = None, n: object = None) -> str:
        """Read."""
        return ""

    for arguments in ({"path": 3}, {"path": "ab", "mode": 1}, {"path": "ab", "n": "x"}, {}):
        assert read.describe(arguments) == read.title
    assert read.describe({"path": "ab", "mode": "r", "n": 2}) == (f"Reading a as {'r'.upper} (2)")
