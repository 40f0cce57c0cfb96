"""The publishing facade: one call per usual event, nothing built when unobserved."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest
from agent_channel import (
    AgentInterrupted,
    Cancel,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    Conversation,
    ExecutionEvent,
    MessageAppended,
    ModelCallFinished,
    ModelCallStarted,
    ModelDelta,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    open_channel,
)

pytestmark = pytest.mark.anyio


def brief(events: list[ExecutionEvent]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for e in events:
        if isinstance(e, MessageAppended):
            out.append(("message", e.index, e.message.role, e.message.text))
        elif isinstance(e, ModelDelta):
            out.append(("delta", e.kind, e.text))
        elif isinstance(e, ModelCallFinished):
            text = e.message.text if e.message else None
            out.append(("model_finished", text, e.cancelled, e.error))
        elif isinstance(e, ToolCallStarted):
            out.append(("tool_started", e.name, e.title, e.kind))
        elif isinstance(e, ToolCallFinished):
            out.append(("tool_finished", e.status, e.content, e.error))
        elif isinstance(e, ModelCallStarted):
            out.append(("model_started", e.model))
    return out


async def test_a_turn_through_the_facade_publishes_what_a_producer_renders() -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        events: list[ExecutionEvent] = []
        ref.subscribe(events.append)
        conv = Conversation(ch, [ChatMessageSystem(content="be brief")])
        conv.append(ChatMessageUser(content="count the letters of 'otter'"))
        with conv.model_call(model="scripted") as call:
            call.reasoning("a tool can count")
            call.text("Counting")
            call.text(" now.")
            count = ToolCall(id="t1", name="count", arguments={"w": "otter"})
            reply = call.finish(tool_calls=[count])
        with conv.tool_call(reply.tool_calls[0], title="Counting 'otter'", kind="think") as tool:
            tool.finish("5")
        assert [m.role for m in conv] == ["system", "user", "assistant", "tool"]
        assert reply.text == "Counting now." and reply.id == call.message_id
        assert {e.message_id for e in events if isinstance(e, ModelDelta)} == {reply.id}
        assert brief(events) == [
            ("message", 0, "system", "be brief"),
            ("message", 1, "user", "count the letters of 'otter'"),
            ("model_started", "scripted"),
            ("delta", "reasoning", "a tool can count"),
            ("delta", "text", "Counting"),
            ("delta", "text", " now."),
            ("model_finished", "Counting now.", False, None),
            ("message", 2, "assistant", "Counting now."),
            ("tool_started", "count", "Counting 'otter'", "think"),
            ("tool_finished", "completed", "5", None),
            ("message", 3, "tool", "5"),
        ]


async def test_an_interrupt_reports_the_model_call_and_the_tool_cancelled() -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        events: list[ExecutionEvent] = []
        ref.subscribe(events.append)
        conv = Conversation(ch)
        with pytest.raises(AgentInterrupted), ch.scope(), conv.model_call() as call:
            call.text("partial")
            ref.interrupt(Cancel())
            await anyio.lowlevel.checkpoint()
        call_ = ToolCall(id="t2", name="slow")
        with pytest.raises(AgentInterrupted), ch.scope(), conv.tool_call(call_):
            ref.interrupt(Cancel())
            await anyio.sleep_forever()
        assert conv.messages == []  # nothing partial entered the conversation
        assert ("model_finished", None, True, None) in brief(events)
        assert ("tool_finished", "cancelled", "", None) in brief(events)


async def test_a_failing_tool_and_a_failing_model_are_reported_with_their_errors() -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        events: list[ExecutionEvent] = []
        ref.subscribe(events.append)
        conv = Conversation(ch)
        with conv.tool_call(ToolCall(id="t3", name="read")) as tool:
            result = tool.fail("no such file")
        assert isinstance(result, ChatMessageTool) and result.error == "no such file"
        with pytest.raises(ConnectionError), conv.model_call():
            raise ConnectionError("model server down")
        with pytest.raises(ValueError), conv.tool_call(ToolCall(id="t4", name="parse")):
            raise ValueError("bad input")
        assert brief(events) == [
            ("tool_started", "read", None, "other"),
            ("tool_finished", "failed", "no such file", "no such file"),
            ("message", 0, "tool", "no such file"),
            ("model_started", None),
            ("model_finished", None, False, "ConnectionError: model server down"),
            ("tool_started", "parse", None, "other"),
            ("tool_finished", "failed", "", "ValueError: bad input"),
        ]


async def test_an_unobserved_conversation_builds_no_events_and_keeps_the_same_messages() -> None:
    async with open_channel() as ch:
        conv = Conversation(ch)
        with conv.model_call() as call:
            call.text("hi")
            call.finish()
        with conv.tool_call(ToolCall(id="t5", name="noop")) as tool:
            tool.finish("ok")
        assert [(m.role, m.text) for m in conv] == [("assistant", "hi"), ("tool", "ok")]
        assert isinstance(conv[0], ChatMessageAssistant) and len(conv) == 2


async def test_a_model_call_must_be_finished_once() -> None:
    async with open_channel() as ch:
        conv = Conversation(ch)
        with pytest.raises(RuntimeError, match="finish"), conv.model_call():
            pass
        with conv.model_call() as call:
            call.finish()
            with pytest.raises(RuntimeError, match="already finished"):
                call.finish()
