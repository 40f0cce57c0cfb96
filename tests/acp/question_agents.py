"""Agents that ask the operator (Q1-Q4), for the ACP suite: a react loop with ``ask_user``.

Loaded by dotted path in the agent subprocess (``--agent question_agents:asking_agent``
with this folder on PYTHONPATH). The scripted model reads the last user message:

- ``choose``: asks "Which colour?" with the choices red and blue;
- ``form``: asks "Trip details?" with the fields city and days;
- ``free``: asks "What is the deadline?" (free text);
- ``child``: a child (``researcher``) asks "Which source?" with the choices web and books;
- anything else: ``echo: <text>``.

Once the question's tool result is in, the model answers ``answer: <result>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_channel import ChatMessage, ChatMessageTool, ChatMessageUser, agent_supervisor
from agent_channel_react import (
    AgentState,
    ScriptedModel,
    ScriptItem,
    ToolInfo,
    ask_user,
    call,
    react,
    reply,
    tool,
    tool_call,
)
from agent_channel_react._factory import Body


@tool(kind="other", title="Asking through a child")
async def via_child() -> str:
    """Spawn a researcher that asks the operator, and wait for its result."""
    sup = agent_supervisor()
    assert sup is not None

    async def researcher(_: str) -> str:
        from agent_channel import ask_user as ask

        return (await ask("Which source?", choices=["web", "books"])).for_model()

    child = sup.spawn(researcher, name="researcher")
    await sup.wait(child)
    return sup.result(child)


QUESTIONS: dict[str, ScriptItem] = {
    "choose": call(tool_call("ask_user", question="Which colour?", choices=["red", "blue"])),
    "form": call(tool_call("ask_user", question="Trip details?", fields=["city", "days"])),
    "free": call(tool_call("ask_user", question="What is the deadline?")),
    "child": call(tool_call("via_child")),
}


def script(messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]) -> ScriptItem:
    u = max((i for i, m in enumerate(messages) if isinstance(m, ChatMessageUser)), default=-1)
    text = messages[u].text if u >= 0 else ""
    results = [m for m in messages[u + 1 :] if isinstance(m, ChatMessageTool)]
    if results:
        return reply(f"answer: {results[-1].text}")
    for word in text.split():
        if word in QUESTIONS:
            return QUESTIONS[word]
    return reply(f"echo: {text}")


def asking_agent(model: str | None = None) -> Body:
    """A react agent with ``ask_user`` (and a child that asks), a fresh model per session."""
    agent = react(
        model=ScriptedModel(script),
        tools=[ask_user, via_child],
        prompt="You are a test agent.",
        submit=False,
    )

    async def body() -> Any:
        from agent_channel import open_supervisor

        async with open_supervisor():
            return await agent(AgentState())

    return body
