"""Single writer and inert-by-default."""

from __future__ import annotations

import anyio
import pytest
from agent_channel import (
    AgentChannel,
    Cancel,
    NotOwner,
    UserMessage,
    agent_channel,
    open_channel,
)

pytestmark = pytest.mark.anyio


async def test_the_first_consuming_task_owns_the_channel_and_others_are_refused() -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        errors: list[str] = []
        consumer_ready = anyio.Event()

        async def consumer() -> None:  # started inside the block, like a real runtime
            ch.drain()
            consumer_ready.set()
            items = await ch.receive()
            assert [i.type for i in items] == ["user_message"]

        async def intruder() -> None:
            for attempt in (ch.drain, ch.scope):
                with pytest.raises(NotOwner) as e:
                    attempt()
                errors.append(str(e.value))
            with pytest.raises(NotOwner):
                await ch.receive()

        async with anyio.create_task_group() as tg:
            tg.start_soon(consumer)
            await consumer_ready.wait()
            await intruder()
            ref.post(UserMessage("hello"))
        assert len(errors) == 2
        assert "only the task that consumes this channel" in errors[0]


async def test_outside_any_execution_the_channel_is_inert() -> None:
    ch = agent_channel()
    ch.post(UserMessage("discarded"))
    ch.interrupt(Cancel())
    ch.ref().post(UserMessage("also discarded"))
    with ch.scope():
        await anyio.lowlevel.checkpoint()
    assert ch.drain() == []
    assert not ch.is_live and not ch.observed
    ch.stop_reason = "refusal"  # shared by every caller, so it keeps nothing
    assert ch.stop_reason is None and ch.turn_state == "idle" and ch.approver is None
    with pytest.raises(RuntimeError, match="no execution is open"):
        await ch.receive()


async def _loop(ch: AgentChannel) -> list[object]:
    """A tiny consumer: three turns, recording what it saw."""
    trace: list[object] = []
    for turn in range(3):
        trace.append(ch.drain())
        with ch.scope():
            await anyio.lowlevel.checkpoint()
            trace.append(f"turn {turn}")
    return trace


async def test_a_channel_nobody_holds_a_ref_to_behaves_like_no_channel() -> None:
    without = await _loop(agent_channel())
    async with open_channel() as ch:
        inside = await _loop(ch)
        assert ch.turn_state == "idle"  # its scopes were free no-ops
    async with open_channel() as ch:
        ch.ref().subscribe(lambda e: None)  # a producer that never posts
        attached = await _loop(ch)
    assert without == inside == attached


async def test_ambient_channel_follows_the_block_and_its_tasks() -> None:
    seen: list[AgentChannel] = []
    async with open_channel() as ch:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: _record(seen))
        assert agent_channel() is ch
    assert seen == [ch]
    assert agent_channel() is not ch


async def _record(seen: list[AgentChannel]) -> None:
    seen.append(agent_channel())


async def test_a_detached_child_cannot_consume_its_parents_channel_by_accident() -> None:
    """Tasks copy the context, so a child sees the parent's channel until it opens its own."""
    async with open_channel() as parent:
        parent.drain()  # the parent's loop owns it
        outcome: list[str] = []

        async def careless_child() -> None:
            with pytest.raises(NotOwner):
                agent_channel().drain()
            outcome.append("refused")

        async def proper_child() -> None:
            async with open_channel() as own:
                assert agent_channel() is own is not parent
                own.drain()
                outcome.append("own channel")

        async with anyio.create_task_group() as tg:
            tg.start_soon(careless_child)
            tg.start_soon(proper_child)
        assert sorted(outcome) == ["own channel", "refused"]
