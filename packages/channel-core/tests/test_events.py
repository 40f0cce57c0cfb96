"""What producers observe: turn transitions, drains, the end of an execution."""

from __future__ import annotations

import anyio
import pydantic
import pytest
from agent_channel import (
    AgentInterrupted,
    Cancel,
    ChannelClosed,
    ChatMessageAssistant,
    ExecutionEvent,
    ExecutionFinished,
    ItemsDrained,
    MessageAppended,
    ToolCall,
    TurnCancelled,
    UserMessage,
    open_channel,
)

pytestmark = pytest.mark.anyio


async def test_turn_transitions_and_drains_are_published_in_order() -> None:
    events: list[ExecutionEvent] = []
    async with open_channel() as ch:
        ref = ch.ref()
        ref.subscribe(events.append)
        with ch.scope():
            await anyio.lowlevel.checkpoint()
        ref.post(UserMessage("hi"))
        ch.drain()
        with pytest.raises(AgentInterrupted), ch.scope():
            ref.interrupt()
            await anyio.lowlevel.checkpoint()
        assert ref.turn_state == "cancelled"
    kinds = [e.type for e in events]
    assert kinds == [
        "turn_started",
        "turn_ended",
        "items_drained",
        "turn_started",
        "turn_cancelled",
        "execution_finished",
    ]
    assert isinstance(events[4], TurnCancelled)


async def test_items_nobody_drained_are_reported_when_the_execution_ends() -> None:
    events: list[ExecutionEvent] = []
    async with open_channel() as ch:
        ref = ch.ref()
        ref.subscribe(events.append)
        ref.post(UserMessage("too late"))
        ch.stop_reason = "end_turn"
    finished = events[-1]
    assert isinstance(finished, ExecutionFinished)
    assert [i.text for i in finished.undelivered] == ["too late"]  # type: ignore[attr-defined]
    assert finished.stop_reason == "end_turn"
    with pytest.raises(ChannelClosed):
        ref.post(UserMessage("after the end"))
    ref.interrupt()  # nothing to stop: no error
    assert ref.closed


async def test_an_execution_ended_by_outer_cancellation_says_so() -> None:
    events: list[ExecutionEvent] = []
    with anyio.CancelScope() as outer:
        async with open_channel() as ch:
            ch.ref().subscribe(events.append)
            outer.cancel()
            await anyio.sleep_forever()
    assert isinstance(events[-1], ExecutionFinished)
    assert events[-1].stop_reason == "cancelled" and events[-1].error is None


async def test_a_failing_subscriber_does_not_break_the_consumer() -> None:
    seen: list[str] = []

    def broken(event: ExecutionEvent) -> None:
        raise ValueError("bad producer")

    async with open_channel() as ch:
        ref = ch.ref()
        ref.subscribe(broken)
        unsubscribe = ref.subscribe(lambda e: seen.append(e.type))
        with ch.scope():
            pass
        unsubscribe()
        with ch.scope():
            pass
    assert seen == ["turn_started", "turn_ended"]


def test_events_are_frozen_snapshots() -> None:
    call = ToolCall(id="c1", name="edit", arguments={"path": "a.py", "lines": [1, 2]})
    event = MessageAppended(message=ChatMessageAssistant(content="ok", tool_calls=(call,)), index=3)
    with pytest.raises(pydantic.ValidationError):
        event.message.content = "changed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        event.message.tool_calls[0].arguments["path"] = "b.py"  # type: ignore[index]
    with pytest.raises(AttributeError):
        event.message.tool_calls[0].arguments["lines"].append(3)  # type: ignore[union-attr]
    assert event.model_dump()["message"]["tool_calls"][0]["arguments"] == {
        "path": "a.py",
        "lines": [1, 2],
    }


def test_events_round_trip_through_json() -> None:
    adapter: pydantic.TypeAdapter[ExecutionEvent] = pydantic.TypeAdapter(ExecutionEvent)
    drained = ItemsDrained(items=(UserMessage("a"), Cancel("limit")))
    back = adapter.validate_json(adapter.dump_json(drained))
    assert back == drained
