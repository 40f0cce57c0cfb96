"""A body the ``serve --ray`` tests run on a Ray cluster (pickled by value: the cluster's
workers cannot import the tests)."""

from __future__ import annotations

import anyio
from agent_channel import (
    AgentInterrupted,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageUser,
    MessageAppended,
    UserMessage,
    agent_channel,
)


async def echo() -> None:
    """Answer each message with ``echo: TEXT``; ``work`` starts a turn that only an
    interrupt ends (it answers ``interrupted``)."""
    ch = agent_channel()
    messages: list[ChatMessage] = []
    ch.share(messages)

    def say(message: ChatMessage) -> None:
        messages.append(message)
        ch.publish(MessageAppended(message=message, index=len(messages) - 1))

    while True:
        for item in await ch.receive():
            if not isinstance(item, UserMessage):
                continue
            say(ChatMessageUser(content=item.text))
            if item.text != "work":
                say(ChatMessageAssistant(content=f"echo: {item.text}"))
                continue
            try:
                with ch.scope():
                    say(ChatMessageAssistant(content="working"))
                    await anyio.sleep_forever()
            except AgentInterrupted:
                say(ChatMessageAssistant(content="interrupted"))
