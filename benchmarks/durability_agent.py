"""The agent ``benchmarks/durability.py`` serves (``serve --agent durability_agent:agent``).

An interactive react agent on a scripted model that answers every operator message with
one line, with the ``search`` tool the stored conversations' calls name. Not a test.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_channel import ChatMessage
from agent_channel_react import Body, ScriptedModel, react, tool


@tool(kind="search", idempotent=True)
async def search(query: str) -> str:
    """Search the notes.

    Args:
        query: What to look for.
    """
    return f"3 results for {query!r}."


def script(messages: Sequence[ChatMessage], tools: object) -> str:
    return "Noted."


def agent(model: str | None = None) -> Body:
    run = react(model=ScriptedModel(script), tools=[search], prompt=None, submit=False)

    async def body() -> Any:
        from agent_channel_react import AgentState

        return await run(AgentState())

    return body
