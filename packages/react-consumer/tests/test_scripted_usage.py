"""The scripted model's usage: input "tokens" are the words of every message it is given."""

from __future__ import annotations

import pytest
from agent_channel import ChatMessage, ChatMessageAssistant, ChatMessageUser
from agent_channel_react import GenerateConfig, ScriptedModel, Stream, reply

pytestmark = pytest.mark.anyio


async def input_tokens(model: ScriptedModel, messages: list[ChatMessage]) -> int:
    out = await model.generate(messages, [], GenerateConfig(), Stream("m"))
    assert out.usage is not None
    return out.usage.input_tokens


async def test_input_tokens_follow_the_messages_given_also_when_earlier_ones_change() -> None:
    # The model reuses counts for the messages it saw last time: a replaced or removed
    # message must be counted afresh, never from the earlier call.
    model = ScriptedModel([reply("ok")] * 5)
    a, b = ChatMessageUser(content="one two three"), ChatMessageAssistant(content="four five")
    c, x = ChatMessageUser(content="six"), ChatMessageUser(content="seven eight nine ten")
    assert await input_tokens(model, [a, b]) == 5
    assert await input_tokens(model, [a, b, c]) == 6
    assert await input_tokens(model, [a, x, c]) == 8  # b replaced by a longer message
    assert await input_tokens(model, [a]) == 3
    assert await input_tokens(model, [x, a, b]) == 9
