"""A body the ``serve --ray`` tests run on a Ray cluster (pickled by value: the cluster's
workers cannot import the tests)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import anyio
from agent_channel import (
    AgentChannel,
    AgentInterrupted,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageUser,
    MessageAppended,
    ToolCallFinished,
    ToolCallStarted,
    UserMessage,
    agent_channel,
)


async def echo() -> None:
    """Answer each message with ``echo: TEXT``; ``block GATE`` holds the host until the
    file ``GATE`` exists (see :func:`_block`); ``work`` starts a turn that only an
    interrupt ends (it answers ``interrupted``); ``tool`` runs tool call ``t1`` until it is
    cancelled alone (``t1 cancelled``), then answers ``after the tool``."""
    ch = agent_channel()
    say = _sayer(ch)

    while True:
        for item in await ch.receive():
            if not isinstance(item, UserMessage):
                continue
            say(ChatMessageUser(content=item.text))
            if item.text == "tool":
                await _tool(ch, say)
                continue
            if item.text.startswith("block "):
                _block(Path(item.text.removeprefix("block ")))
                continue
            if item.text != "work":
                say(ChatMessageAssistant(content=f"echo: {item.text}"))
                continue
            try:
                with ch.scope():
                    say(ChatMessageAssistant(content="working"))
                    await anyio.sleep_forever()
            except AgentInterrupted:
                say(ChatMessageAssistant(content="interrupted"))


def _block(gate: Path) -> None:
    """Hold the host actor's event loop (a host busy in synchronous code) until ``gate``
    exists; ``GATE.blocked`` says it holds it."""
    gate.with_suffix(".blocked").touch()
    while not gate.exists():
        time.sleep(0.01)  # the load the test puts on the host, not a synchronisation


async def _tool(ch: AgentChannel, say: Callable[[ChatMessage], None]) -> None:
    ch.publish(ToolCallStarted(tool_call_id="t1", name="wait", arguments={}, title="Waiting"))
    with ch.scope():
        with ch.region("t1") as region:
            say(ChatMessageAssistant(content="t1 running"))
            await anyio.sleep_forever()
        status = "cancelled" if region.cancelled else "completed"
        ch.publish(ToolCallFinished(tool_call_id="t1", name="wait", status=status))
        say(ChatMessageAssistant(content=f"t1 {status}"))
        say(ChatMessageAssistant(content="after the tool"))


async def asking() -> None:
    """``approve ID`` asks the approver about tool call ``ID`` and says ``ID allowed`` or
    ``ID rejected`` (``ID unasked`` with none); ``ask TEXT`` asks the operator to choose
    red or blue and says ``answer: ...`` (what the model would read)."""
    from agent_channel import ToolCall, ask_user

    ch = agent_channel()
    say = _sayer(ch)

    while True:
        for item in await ch.receive():
            if not isinstance(item, UserMessage):
                continue
            say(ChatMessageUser(content=item.text))
            verb, _, rest = item.text.partition(" ")
            with ch.scope():
                if verb == "approve":
                    approver = ch.approver
                    call = ToolCall(id=rest, name="shell", arguments={"command": "ls"})
                    allowed = None if approver is None else await approver(call)
                    said = {None: "unasked", True: "allowed", False: "rejected"}[allowed]
                    say(ChatMessageAssistant(content=f"{rest} {said}"))
                elif verb == "ask":
                    answer = await ask_user(rest, choices=("red", "blue"))
                    say(ChatMessageAssistant(content=f"answer: {answer.for_model()}"))


def _sayer(ch: AgentChannel) -> Callable[[ChatMessage], None]:
    """Share a conversation on ``ch``; the function that appends to it and says so."""
    messages: list[ChatMessage] = []
    ch.share(messages)

    def say(message: ChatMessage) -> None:
        messages.append(message)
        ch.publish(MessageAppended(message=message, index=len(messages) - 1))

    return say
