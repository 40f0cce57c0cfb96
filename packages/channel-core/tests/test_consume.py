"""The consumer facade: fold, repair, and waiting for the operator."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest
from agent_channel import (
    AwaitingInput,
    Cancel,
    ChatMessageAssistant,
    ChatMessageTool,
    ChatMessageUser,
    ContentImage,
    ContentText,
    ExecutionEvent,
    ToolCall,
    UserMessage,
    fold,
    open_channel,
    repair,
    wait_for_message,
)


def test_consecutive_operator_messages_become_one_user_message() -> None:
    a, b = UserMessage("first"), UserMessage("second")
    folded = fold([a, Cancel(), b, UserMessage("from elsewhere", source="supervisor")])
    assert [(m.text, m.source) for m in folded.messages] == [
        ("first\n\nsecond", "operator"),
        ("from elsewhere", "supervisor"),
    ]
    assert folded.messages[0].id == a.id
    assert folded.cancel is not None


def test_rich_parts_survive_coalescing() -> None:
    image = ContentImage(mime_type="image/png", data="AAAA")
    folded = fold([UserMessage((ContentText(text="look"), image)), UserMessage("and this")])
    assert folded.messages[0].content == (
        ContentText(text="look"),
        image,
        ContentText(text="\n\nand this"),
    )


def test_repair_answers_every_unanswered_call_of_the_last_assistant_message() -> None:
    calls = (ToolCall(id="a", name="read"), ToolCall(id="b", name="run"))
    history = [
        ChatMessageUser(content="go"),
        ChatMessageAssistant(tool_calls=calls),
        ChatMessageTool(tool_call_id="a", content="file"),
    ]
    [fix] = repair(history, "user_cancel")
    assert (fix.tool_call_id, fix.function, fix.error) == ("b", "run", "cancelled")
    assert repair([*history, fix]) == []
    assert repair([ChatMessageUser(content="no calls")]) == []


@pytest.mark.anyio
async def test_only_a_message_ends_the_wait_for_the_operator() -> None:
    events: list[ExecutionEvent] = []
    async with open_channel() as ch:
        ref = ch.ref()
        ref.subscribe(events.append)
        parked = anyio.Event()
        ref.subscribe(lambda e: parked.set() if isinstance(e, AwaitingInput) else None)
        waiting = True

        async def operator() -> None:
            await parked.wait()
            ref.interrupt()  # a stray cancel while parked: dropped, and must not wake it
            for _ in range(20):
                await anyio.lowlevel.checkpoint()
            assert waiting
            ref.post(UserMessage("now do this"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(operator)
            folded = await wait_for_message(ch, "cancelled")
            waiting = False
        assert [m.text for m in folded.messages] == ["now do this"]
        assert folded.cancel is None
        assert ch.drain() == []
    assert events[0] == AwaitingInput(stop_reason="cancelled")
    assert [e.type for e in events[1:]] == ["items_drained", "execution_finished"]
