"""A demo agent for trying an operator surface by hand.

``demo`` is interactive: every operator message leads to at least one slow
tool call (``AGENT_CHANNEL_DEMO_TOOL_SECONDS``, default 1.5, so a person can
interrupt mid-tool) and then a streamed text answer that quotes what the
model saw, including tool results that were cancelled. ``task_demo`` starts
on a built-in multi-step task by itself, then takes operator messages like
``demo``. Given a model name (or OPENAI_BASE_URL / OPENAI_API_KEY /
AGENT_CHANNEL_MODEL in the environment) both use an OpenAI-compatible
endpoint with the same tools; ``model="scripted"`` forces the script.

Load them by dotted path: ``agent_channel_react.demo:demo``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import anyio
from agent_channel import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageTool,
    ChatMessageUser,
    ContentImage,
    ContentResource,
    ContentResourceLink,
)

from ._factory import Body
from ._model import Model, ToolInfo
from ._react import ReactAgent, react
from ._scripted import ScriptedModel, ScriptItem, ScriptStep, call, reply, tool_call
from ._state import AgentState
from ._tool import Tool, tool

TOOL_SECONDS_ENV = "AGENT_CHANNEL_DEMO_TOOL_SECONDS"
MODEL_ENV = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "AGENT_CHANNEL_MODEL")
TASK = (
    "Prepare a short briefing on interruptible agents: search for the topic, read the notes "
    "on it, and count the words of your summary before you answer."
)
TOPIC = "interruptible agents"
PROMPT = "You are a demo agent. Use the tools to look things up before you answer."


def tool_seconds() -> float:
    """How long each demo tool takes (read at call time, so tests can change it)."""
    try:
        return max(0.0, float(os.environ.get(TOOL_SECONDS_ENV, "1.5")))
    except ValueError:
        return 1.5


@tool(kind="search", title="Searching for {query}")
async def search(query: str) -> str:
    """Search the demo knowledge base.

    Args:
        query: What to look for.
    """
    await anyio.sleep(tool_seconds())
    return f"3 results for {query!r}: an overview, a how-to and a design note."


@tool(kind="read", title="Reading notes on {topic}")
async def read_notes(topic: str) -> str:
    """Read the notes kept on a topic.

    Args:
        topic: The topic.
    """
    await anyio.sleep(tool_seconds())
    return (
        f"Notes on {topic}: an operator can send a message at any time, and it is read at the "
        "next step; an interrupt stops the current step at once."
    )


@tool(kind="think", title="Counting words")
async def word_count(text: str) -> int:
    """Count the words of a text.

    Args:
        text: The text.
    """
    await anyio.sleep(tool_seconds())
    return len(text.split())


TOOLS: tuple[Tool, ...] = (search, read_notes, word_count)
SUMMARY = "Interruptible agents take messages at step boundaries and stop at once when interrupted."


def _last_user(messages: Sequence[ChatMessage]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], ChatMessageUser):
            return i
    return -1


def _describe(message: ChatMessage) -> str:
    extras: list[str] = []
    if not isinstance(message.content, str):
        for p in message.content:
            if isinstance(p, ContentImage):
                extras.append(f"an image ({p.mime_type})")
            elif isinstance(p, ContentResource):
                extras.append(f"a resource {p.uri}")
            elif isinstance(p, ContentResourceLink):
                extras.append(f"a link to {p.uri}")
    text = f"You said: {message.text.strip()!r}"
    return f"{text}, with {', '.join(extras)}" if extras else text


def _interrupted(messages: Sequence[ChatMessage], upto: int) -> list[str]:
    """Tool calls that were cancelled or failed since the last plain answer."""
    notes: list[str] = []
    for m in reversed(messages[:upto]):
        if isinstance(m, ChatMessageAssistant) and not m.tool_calls:
            break
        if isinstance(m, ChatMessageTool) and m.error is not None:
            notes.append(f"{m.function} ({m.error}: {m.text or m.error})")
    return list(reversed(notes))


def demo_script(messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]) -> ScriptItem:
    """The demo model: tool calls first, then an answer about what it saw."""
    slow = min(0.5, tool_seconds() / 3)
    u = _last_user(messages)
    if u < 0:
        return reply("Hello! Send me a message and I will look it up.", delay=slow)
    user = messages[u]
    after = messages[u + 1 :]
    results = [m for m in after if isinstance(m, ChatMessageTool)]
    rounds = sum(1 for m in after if isinstance(m, ChatMessageAssistant) and m.tool_calls)
    if isinstance(user, ChatMessageUser) and user.source == "task":
        plan: list[ScriptStep] = [
            call(tool_call("search", query=TOPIC), content="First, a search."),
            call(tool_call("read_notes", topic=TOPIC), content="Now the notes."),
            call(tool_call("word_count", text=SUMMARY), content="Checking the length."),
        ]
        if rounds < len(plan):
            return plan[rounds]
        body = f"Briefing: {SUMMARY} (Steps done: {len(results)} tool results.)"
    else:
        if rounds == 0:
            query = user.text.strip()[:80] or "(empty)"
            return call(tool_call("search", query=query), content="Let me look that up.")
        last = results[-1] if results else None
        found = f"The search said: {last.text or last.error}" if last else "Nothing came back."
        body = f"{_describe(user)}. {found}"
    notes = _interrupted(messages, u)
    if notes:
        body += " Note: before your message, these tool calls did not finish: " + "; ".join(notes)
    return reply(body, delay=slow)


def _model(model: str | None) -> Model:
    env = any(os.environ.get(k) for k in MODEL_ENV)
    if model == "scripted" or (model is None and not env):
        return ScriptedModel(demo_script, name="demo-scripted")
    from ._openai import OpenAIModel

    return OpenAIModel(model)


def demo_agent(model: str | None = None) -> ReactAgent:
    """The demo's react agent (interactive: no submit tool)."""
    return react(model=_model(model), tools=TOOLS, prompt=PROMPT, submit=False)


def demo(model: str | None = None) -> Body:
    """Factory for an interactive demo execution that waits for the operator's messages."""
    agent = demo_agent(model)

    async def body() -> AgentState:
        return await agent(AgentState())

    return body


def task_demo(model: str | None = None) -> Body:
    """Factory for a demo execution that works a built-in task by itself, then stays interactive."""
    agent = demo_agent(model)

    async def body() -> AgentState:
        return await agent(AgentState(messages=[ChatMessageUser(content=TASK, source="task")]))

    return body
