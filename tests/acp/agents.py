"""Agent factories for the ACP suite: real react agents driven by a scripted model.

Loaded by dotted path in the agent subprocess (``--agent agents:react_agent``
with this folder on PYTHONPATH), imported directly by the in-process tests.
The model reads the last user message and follows its keywords:

- ``block``: call the ``block`` tool, which waits until cancelled.
- ``quick``: call the ``quick`` tool, then answer; ``noisy``: the tool prints to stdout.
- ``loop``: call ``quick`` forever (the turn-request limit stops it).
- ``think``: a reasoning part and a text part of one message.
- ``hang``: stream one piece, then never finish the model call.
- ``stall``: never finish the model call, streaming nothing.
- ``refuse`` / ``long``: stop reasons ``refusal`` / ``max_tokens``.
- ``inspect``: answer with a JSON summary of the model's own input.
- ``crash``: the model raises.
- anything else: ``echo: <text>``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
from agent_channel import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageTool,
    ChatMessageUser,
    MessageAppended,
    ToolCall,
    agent_channel,
    wait_for_message,
)
from agent_channel_react import (
    GenerateConfig,
    ModelOutput,
    ScriptedAgentFactory,
    ScriptedModel,
    ScriptItem,
    ScriptStep,
    Stream,
    ToolInfo,
    call,
    react,
    reply,
    scripted_agent_factory,
    tool,
    tool_call,
)
from agent_channel_react._factory import Body


@tool(kind="execute", title="Blocking: {why}")
async def block(why: str) -> str:
    """Wait until cancelled.

    Args:
        why: The prompt that asked for it.
    """
    await anyio.sleep_forever()
    return "unreachable"


@tool(kind="read", title="Quick: {why}")
async def quick(why: str) -> str:
    """Answer at once.

    Args:
        why: The prompt that asked for it.
    """
    if "noisy" in why.split():
        print("a stray print from a tool")  # must not reach the protocol stream
    return "done"


TOOLS = (block, quick)


def summary(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """What the model saw, compactly: roles, texts, part types, tool calls and results."""
    out: list[dict[str, Any]] = []
    for m in messages:
        entry: dict[str, Any] = {"role": m.role, "text": m.text}
        if not isinstance(m.content, str):
            entry["parts"] = [p.type for p in m.content]
        if isinstance(m, ChatMessageAssistant) and m.tool_calls:
            entry["tool_calls"] = [c.name for c in m.tool_calls]
        if isinstance(m, ChatMessageTool):
            entry["error"] = m.error
        out.append(entry)
    return out


def script(messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]) -> ScriptItem:
    u = max((i for i, m in enumerate(messages) if isinstance(m, ChatMessageUser)), default=-1)
    text = messages[u].text if u >= 0 else ""
    words = text.split()
    answered = any(isinstance(m, ChatMessageTool) for m in messages[u + 1 :])
    if "loop" in words:
        return call(tool_call("quick", why=text), content="again")
    for name in ("block", "quick", "noisy"):
        if name in words and not answered:
            tool = "block" if name == "block" else "quick"
            return call(tool_call(tool, why=text), content=f"calling {tool}")
    if answered:
        return reply("the tool is done")
    if "think" in words:
        return reply("thought about it", reasoning="pondering")
    if "inspect" in words:
        return reply(json.dumps(summary(messages)))
    if "refuse" in words:
        return reply("no", stop_reason="refusal")
    if "long" in words:
        return reply("cut short", stop_reason="max_tokens")
    if "crash" in words:
        return ScriptStep(error=RuntimeError("scripted crash"))
    return reply(f"echo: {text}")


class TestModel:
    """The scripted model, plus ``hang``: one streamed piece, then a call that never ends;
    and ``stall``: a call that never ends and streams nothing."""

    def __init__(self) -> None:
        self.inner = ScriptedModel(script)
        self.name: str | None = "scripted"

    async def generate(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolInfo],
        config: GenerateConfig,
        stream: Stream,
    ) -> ModelOutput:
        last = next((m for m in reversed(messages) if isinstance(m, ChatMessageUser)), None)
        if last is not None and "hang" in last.text.split() and messages[-1] is last:
            stream.text("thinking about it")
            await anyio.sleep_forever()
        if last is not None and "stall" in last.text.split() and messages[-1] is last:
            await anyio.sleep_forever()
        return await self.inner.generate(messages, tools, config, stream)


def react_agent(model: str | None = None) -> Body:
    """The suite's interactive agent (a fresh model per session)."""
    agent = react(
        model=TestModel(),
        tools=TOOLS,
        prompt="You are a test agent.",
        submit=False,
        max_turn_requests=3,
    )

    async def body() -> Any:
        from agent_channel_react import AgentState

        return await agent(AgentState())

    return body


def task_agent(model: str | None = None) -> Body:
    """Starts on a task of its own (a ``task`` user message) before any prompt."""
    return scripted_factory(input=[ChatMessageUser(content="quick task", source="task")])(model)


def blocking_task_agent(model: str | None = None) -> Body:
    """Starts on a task of its own that blocks (a ``block`` tool) before any prompt."""
    return scripted_factory(input=[ChatMessageUser(content="block task", source="task")])(model)


def core_loop_agent(model: str | None = None) -> Callable[[], Awaitable[None]]:
    """A loop written from the core's docs alone: every message it adds is published as
    ``MessageAppended`` and nothing else (no deltas, no model-call events). It answers
    ``echo: <text>``; with ``tool`` in the prompt its answer also names a tool call it never
    runs (so no ``ToolCallStarted`` either)."""

    async def body() -> None:
        ch = agent_channel()
        conversation: list[ChatMessage] = []

        def append(message: ChatMessage) -> None:
            conversation.append(message)
            ch.publish(MessageAppended(message=message, index=len(conversation) - 1))

        while True:
            for m in (await wait_for_message(ch)).messages:
                append(m)
            text = conversation[-1].text
            calls = (ToolCall(id="t1", name="quick", arguments={"why": text}),)
            with ch.scope():
                append(
                    ChatMessageAssistant(
                        content=f"echo: {text}", tool_calls=calls if "tool" in text else ()
                    )
                )

    return body


def scripted_factory(**options: Any) -> ScriptedAgentFactory:
    """A react agent on the plain scripted model; ``.models[-1].calls`` is its input log."""
    options.setdefault("tools", TOOLS)
    options.setdefault("prompt", "You are a test agent.")
    options.setdefault("max_turn_requests", 3)
    return scripted_agent_factory(script, **options)


def chatty_agent(model: str | None = None) -> Body:
    """``react_agent`` that first logs, then prints, 20,000 distinct lines (2 MB) each.

    Far more than a pipe holds; ``print`` lands on stderr too (stdout is the protocol's).
    """
    import logging

    inner = react_agent(model)

    async def body() -> Any:
        log = logging.getLogger("agents.chatty")
        for i in range(20_000):
            log.warning(f"chatty line {i}: " + "x" * 80)  # distinct texts: no rate limit applies
        for i in range(20_000):
            print(f"chatty print {i}:", "y" * 80)
        return await inner()

    return body


# -- attach mode: agents that run on their own, with steps slow enough to catch -------------

GATES_ENV = "AGENT_CHANNEL_TEST_GATES"
"""A directory: the ``gate`` tool waits until a file of its name exists there."""


@tool(kind="execute", title="Gate: {name}")
async def gate(name: str) -> str:
    """Wait until the test opens the gate (creates a file named ``name``).

    Args:
        name: The gate's name.
    """
    import os
    from pathlib import Path

    path = Path(os.environ[GATES_ENV]) / name
    while not path.exists():  # noqa: ASYNC110 (the test process cannot set an in-process event)
        await anyio.sleep(0.01)
    return f"gate {name} opened"


@tool(kind="read", title="Big: {size}")
async def big(size: int) -> str:
    """Return ``size`` characters.

    Args:
        size: How many.
    """
    return "x" * size


def attach_script(messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]) -> ScriptItem:
    """``script`` plus ``gate=NAME`` (wait at that gate), ``gates=A,B,…`` (a call per gate
    in one message), ``helper`` (a nested agent as a tool), ``big=N`` (a tool returning N
    characters) and ``say=WORD`` (answer ``WORD``)."""
    u = max((i for i, m in enumerate(messages) if isinstance(m, ChatMessageUser)), default=-1)
    text = messages[u].text if u >= 0 else ""
    answered = [m for m in messages[u + 1 :] if isinstance(m, ChatMessageTool)]
    words = text.split()
    if not any(w.startswith(("gate=", "gates=", "say=", "big=")) or w == "helper" for w in words):
        return script(messages, tools)
    for word in words:
        if word.startswith("gate=") and not answered:
            return call(tool_call("gate", name=word[5:]), content=f"waiting at {word[5:]}")
        if word.startswith("gates=") and not answered:
            calls = [tool_call("gate", name=name) for name in word[6:].split(",")]
            return call(*calls, content=f"{len(calls)} gates")
        if word == "helper" and not answered:
            inner = " ".join(w for w in words if w.startswith("gate=")) or "inner work"
            return call(tool_call("helper", input=inner), content="asking the helper")
        if word.startswith("big=") and not answered:
            return call(tool_call("big", size=int(word[4:])), content="a big one")
        if word.startswith("say=") and not answered:
            return reply(word[4:])
    if answered:
        return reply("results: " + "; ".join(f"{m.text} ({m.error})" for m in answered))
    return script(messages, tools)


def _inner_script(messages: Sequence[ChatMessage], tools: Sequence[ToolInfo]) -> ScriptItem:
    """The nested agent: ``gate=NAME`` waits at that gate first; then it answers."""
    text = messages[-1].text if messages else ""
    if text.startswith("gate=") and messages[-1].role == "user":
        return call(tool_call("gate", name=text[5:]), content="inner waits")
    return reply("inner secret text")


def attach_agent(model: str | None = None) -> Body:
    """The attach suite's interactive agent: ``attach_script`` on the streaming test model."""
    from agent_channel_react import as_tool

    inner = react(
        model=ScriptedModel(_inner_script), tools=(gate,), submit=False, prompt="inner agent"
    )
    helper = as_tool(inner, name="helper", description="A nested agent.")
    agent = react(
        model=_AttachModel(),
        tools=(*TOOLS, gate, big, helper),
        prompt="You are a test agent.",
        submit=False,
        max_turn_requests=5,
    )

    async def body() -> Any:
        from agent_channel_react import AgentState

        return await agent(AgentState())

    return body


class _AttachModel(TestModel):
    def __init__(self) -> None:
        super().__init__()
        self.inner = ScriptedModel(attach_script)


def crowded_agent(model: str | None = None) -> Body:
    """An agent whose own channel another producer filled to the limit: it posts that many
    items itself, says ``filled``, and then never reads."""
    from agent_channel import Conversation, UserMessage
    from agent_channel.lowlevel import MAX_QUEUED

    async def body() -> Any:
        ch = agent_channel()
        ref = ch.ref()
        for i in range(MAX_QUEUED):
            ref.post(UserMessage(f"from a supervisor {i}"))
        Conversation(ch).append(ChatMessageAssistant(content="filled"))
        await anyio.sleep_forever()

    return body


# -- hand-written factories, for what the CLI and the verbs say about them ------------------


def regionless_agent(model: str | None = None) -> Callable[[], Awaitable[None]]:
    """A core loop that runs a tool without ``ch.region``: each message starts a tool call
    (announced with ``ToolCallStarted``) that blocks until the turn is cancelled, so it is
    running but cannot be cancelled alone."""
    from uuid import uuid4

    from agent_channel import AgentInterrupted, Conversation, ToolCallStarted

    async def body() -> None:
        ch = agent_channel()
        conversation = Conversation(ch)
        while True:
            for m in (await wait_for_message(ch)).messages:
                conversation.append(m)
            call = ToolCall(id=f"call-{uuid4().hex[:8]}", name="slow", arguments={})
            try:
                with ch.scope():
                    conversation.append(ChatMessageAssistant(content="slow", tool_calls=(call,)))
                    ch.publish(
                        ToolCallStarted(
                            tool_call_id=call.id, name="slow", arguments={}, title="Slow"
                        )
                    )
                    await anyio.sleep_forever()
            except AgentInterrupted:
                pass

    return body


def int_factory(model: str | None = None) -> Any:
    """Not an agent factory: it returns 42, not an execution body."""
    return 42


def sync_body_factory(model: str | None = None) -> Callable[[], object]:
    """Its body is a plain function: calling it returns 42, not an awaitable."""
    return lambda: 42


def named_agent(model: str | None = None) -> Callable[[], Awaitable[None]]:
    """A generic-looking factory whose body names its agent (a ``name`` attribute)."""

    class Scout:
        name = "scout"

        async def __call__(self) -> None:
            ch = agent_channel()
            while True:
                await wait_for_message(ch)

    return Scout()


def raising_body(model: str | None = None) -> Any:
    """A factory whose body raises when called (a plain function, not an async one)."""

    def body() -> Any:
        raise RuntimeError("no body today")

    return body


# -- children (K11, K12): an orchestrator on the core's supervisor ------------------------


def orchestrator_agent(model: str | None = None) -> Callable[[], Awaitable[None]]:
    """A core loop that orchestrates: ``spawn a b c`` spawns a researcher per word (named
    by it), ``ask a`` a child whose one tool call needs approval; anything else is
    answered ``seen: <text>``. A researcher parks waiting for input until a message with
    ``finish`` comes (a steer): then it answers and returns.
    Everything the parent reads (the supervisor's notes, the children's announcements)
    lands in its conversation, and it answers each."""
    from agent_channel import Conversation, open_supervisor

    async def researcher(topic: str) -> str:
        ch = agent_channel()
        conversation = Conversation(ch)
        conversation.append(ChatMessageUser(content=f"research {topic}"))
        while True:
            for m in (await wait_for_message(ch)).messages:
                conversation.append(m)
                if "finish" in m.text:
                    with ch.scope():
                        conversation.append(ChatMessageAssistant(content=f"{topic}: done"))
                    return f"{topic}: done ({m.text})"

    async def asking(topic: str) -> str:
        """A child whose one tool call needs approval (K9): it says what it was told."""
        approver = agent_channel().approver
        call = ToolCall(id="call_1", name="quick", arguments={"why": topic})
        allowed = approver is None or await approver(call)
        return f"{topic}: {'allowed' if allowed else 'rejected'}"

    async def body() -> None:
        ch = agent_channel()
        conversation = Conversation(ch)
        async with open_supervisor() as sup:
            while True:
                for m in (await wait_for_message(ch)).messages:
                    conversation.append(m)
                    words = m.text.split()
                    with ch.scope():
                        if words[:1] == ["spawn"] and getattr(m, "source", None) != "child":
                            ids = [sup.spawn(researcher, w, name=w) for w in words[1:]]
                            answer = "spawned " + " ".join(ids)
                        elif words[:1] == ["ask"] and getattr(m, "source", None) != "child":
                            ids = [sup.spawn(asking, w, name=w) for w in words[1:]]
                            answer = "spawned " + " ".join(ids)
                        else:
                            answer = f"seen: {m.text}"
                        conversation.append(ChatMessageAssistant(content=answer))

    return body
