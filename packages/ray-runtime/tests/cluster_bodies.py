"""Agent bodies the tests run on the cluster (pickled by value: workers cannot import tests)."""

from __future__ import annotations

import anyio
from agent_channel import (
    AgentInterrupted,
    ChatMessage,
    ChatMessageUser,
    MessageAppended,
    UserMessage,
    agent_channel,
)


async def inbox() -> int:
    """Fold every message into the shared conversation until one says ``stop``."""
    ch = agent_channel()
    messages: list[ChatMessage] = []
    ch.share(messages)
    while True:
        for item in await ch.receive():
            if not isinstance(item, UserMessage):
                continue
            if item.text == "stop":
                return len(messages)
            message = ChatMessageUser(content=item.text)
            messages.append(message)
            ch.publish(MessageAppended(message=message, index=len(messages) - 1))


async def stoppable() -> str:
    """Work in a scope until interrupted; say how it ended."""
    ch = agent_channel()
    try:
        with ch.scope():
            await anyio.sleep_forever()
    except AgentInterrupted:
        return "interrupted"
    return "not reached"


async def forever() -> None:
    """Never drain anything: items stay queued (for withdraw and ChannelFull)."""
    await anyio.sleep_forever()


def quickstart_agent() -> object:
    """The react README's quickstart agent: a scripted model looks 'answer' up and submits."""
    from agent_channel_react import ScriptedModel, call, react, tool, tool_call

    @tool(kind="search", title="Looking up {topic}")
    async def lookup(topic: str) -> str:
        """Look a topic up.

        Args:
            topic: What to look up.
        """
        return f"{topic}: 42"

    model = ScriptedModel(
        [call(tool_call("lookup", topic="answer")), call(tool_call("submit", answer="42"))]
    )
    return react(model=model, tools=[lookup])


async def asks() -> None:
    """``approve NAME`` asks the approver about tool call NAME and says ``NAME: True``,
    ``NAME: False`` or ``NAME: no approver``; ``ask TEXT`` asks the operator and says
    ``answer: ...`` (what the model would read). Each inside a scope: an interrupt says
    ``interrupted``."""
    from agent_channel import ToolCall, ask_user

    ch = agent_channel()
    messages: list[ChatMessage] = []
    ch.share(messages)

    def say(text: str) -> None:
        messages.append(ChatMessageUser(content=text))
        ch.publish(MessageAppended(message=messages[-1], index=len(messages) - 1))

    while True:
        for item in await ch.receive():
            if not isinstance(item, UserMessage):
                continue
            verb, _, rest = item.text.partition(" ")
            try:
                with ch.scope():
                    if verb == "approve":
                        approver = ch.approver
                        if approver is None:
                            say(f"{rest}: no approver")
                        else:
                            say(f"{rest}: {await approver(ToolCall(id=rest, name='shell'))}")
                    elif verb == "ask":
                        say(f"answer: {(await ask_user(rest)).for_model()}")
            except AgentInterrupted:
                say("interrupted")
            except Exception as e:
                say(f"failed: {type(e).__name__}: {e}")


def chatty_agent() -> object:
    """An interactive ReAct agent (no submit): answers ``first``, then ``second``."""
    from agent_channel_react import ScriptedModel, react, reply

    return react(model=ScriptedModel([reply("first"), reply("second")]), submit=False)


async def durable_inbox() -> int:
    """``inbox`` that goes on from its store: it starts from the restored conversation, folds
    each message in a turn of its own, and checkpoints after each (so each is delivered
    once across a crash: drained and folded but not checkpointed, it comes again)."""
    ch = agent_channel()
    restored = ch.restored
    messages: list[ChatMessage] = list(restored.messages) if restored is not None else []
    ch.share(messages)
    while True:
        for item in await ch.receive():
            if not isinstance(item, UserMessage):
                continue
            if item.text == "stop":
                return len(messages)
            with ch.scope():
                await anyio.sleep(0.01)  # a turn, for a node to die in
                message = ChatMessageUser(content=item.text)
                messages.append(message)
                ch.publish(MessageAppended(message=message, index=len(messages) - 1))
        ch.checkpoint()


async def durable_echo(*, note_on_restore: bool = False) -> None:
    """Answer each message with ``echo: TEXT``, going on from its store (a checkpoint after
    each batch). ``block GATE`` holds the host's event loop, synchronously, until the file
    ``GATE`` exists (``GATE.blocked`` says it holds it): a call to the host waits meanwhile,
    not done, for a node to die under it."""
    from agent_channel import ChatMessageAssistant

    ch = agent_channel()
    restored = ch.restored
    messages: list[ChatMessage] = list(restored.messages) if restored is not None else []
    ch.share(messages)

    def say(message: ChatMessage) -> None:
        messages.append(message)
        ch.publish(MessageAppended(message=message, index=len(messages) - 1))

    if note_on_restore and restored is not None:
        say(ChatMessageUser(content="noted on restore"))
    while True:
        for item in await ch.receive():
            if not isinstance(item, UserMessage):
                continue
            say(ChatMessageUser(content=item.text))
            if item.text.startswith("block "):
                _hold(item.text.removeprefix("block "))
            else:
                say(ChatMessageAssistant(content=f"echo: {item.text}"))
        ch.checkpoint()


def _hold(gate: str) -> None:
    """Hold the calling event loop (synchronous code) until the file ``gate`` exists."""
    import time
    from pathlib import Path

    Path(gate).with_suffix(".blocked").touch()
    while not Path(gate).exists():
        time.sleep(0.01)  # the host held, not a synchronisation


def durable_tool_agent() -> object:
    """An interactive ReAct agent whose every prompt calls a tool (a short wait, for a node
    to die in) and then answers: run it durably, it goes on from its store (the loop
    settles a call cut off by a crash, D4). A body with its state: launch it as it is."""
    import functools

    from agent_channel import ChatMessageUser
    from agent_channel_react import AgentState, ScriptedModel, call, react, reply, tool, tool_call

    @tool(kind="other", title="Working")
    async def work(note: str) -> str:
        """Work on a note.

        Args:
            note: What to work on.
        """
        await anyio.sleep(0.05)
        return f"worked on {note}"

    def script(messages: object, tools: object) -> object:
        del tools
        last = list(messages)[-1] if messages else None  # type: ignore[call-overload]
        if isinstance(last, ChatMessageUser):  # a prompt (or a steer after a result): a call
            return call(tool_call("work", note=last.text[:20]))
        return reply("done")  # after the results (a restart's "interrupted" ones too)

    agent = react(model=ScriptedModel(script), tools=[work], submit=False)  # type: ignore[arg-type]
    return functools.partial(agent, AgentState())


async def durable_noted() -> None:
    """``durable_echo`` whose restore adds a message of its own (``noted on restore``, as a
    loop's "interrupted by a restart" result) before its first await: so before any
    watcher's snapshot of the restored execution."""
    await durable_echo(note_on_restore=True)
