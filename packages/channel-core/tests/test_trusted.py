"""The models a supervisor builds without validation (``_trusted.trusted``) are the models
validation would build: every field set, each value one validation keeps as it is."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest
from agent_channel import (
    Announce,
    ChildEnded,
    ChildInfo,
    ChildStarted,
    ChildUpdated,
    ExecutionEvent,
    agent_channel,
    open_channel,
    open_supervisor,
)
from pydantic import BaseModel

pytestmark = pytest.mark.anyio


def assert_as_validated(model: BaseModel) -> None:
    cls = type(model)
    assert set(model.__dict__) == set(cls.model_fields), cls.__name__
    again = cls.model_validate(model.model_dump())
    assert again == model
    assert again.model_dump_json() == model.model_dump_json()


async def test_rows_announces_and_child_events_equal_their_validated_selves() -> None:
    events: list[ExecutionEvent] = []

    async def body(_: str) -> str:
        ch = agent_channel()
        ch.drain()
        with ch.scope():
            await anyio.lowlevel.checkpoint()
        return "x" * 2_500  # bounded in the row and the announce

    async def stuck(_: str) -> None:
        with agent_channel().scope():
            await anyio.sleep_forever()

    async with open_channel() as parent, open_supervisor() as sup:
        parent.ref().subscribe(events.append)
        done = sup.spawn(body, "the input", name="done")
        killed = sup.spawn(stuck)
        await sup.wait(done)
        sup.kill(killed, "enough")
        await sup.wait(killed)
        rows = sup.children()
        items = parent.drain()
    child_events = [e for e in events if isinstance(e, ChildStarted | ChildUpdated | ChildEnded)]
    assert {type(e) for e in child_events} == {ChildStarted, ChildUpdated, ChildEnded}
    for model in [*rows, *child_events, *(e.child for e in child_events)]:
        assert_as_validated(model)
    announces = [i for i in items if isinstance(i, Announce)]
    assert [a.status for a in announces] == ["completed", "killed"]
    for a in announces:
        assert_as_validated(a)
        assert isinstance(a.model_copy(), Announce)
    assert all(isinstance(r, ChildInfo) for r in rows)


async def test_the_items_drained_a_drain_publishes_equal_their_validated_selves() -> None:
    from agent_channel import Cancel, ItemsDrained, UserMessage

    seen: list[ExecutionEvent] = []
    async with open_channel() as ch:
        ref = ch.ref()
        ref.subscribe(seen.append)
        ref.post(UserMessage("one"))
        ref.post(UserMessage("two", source="supervisor"))
        ch.drain()
        ref.interrupt(Cancel())
        ch.drain()
    drained = [e for e in seen if isinstance(e, ItemsDrained)]
    assert [len(e.items) for e in drained] == [2, 1]
    for event in drained:
        assert_as_validated(event)
        assert event.model_fields_set == {"type", "items"}
        assert ItemsDrained.model_validate_json(event.model_dump_json()) == event
