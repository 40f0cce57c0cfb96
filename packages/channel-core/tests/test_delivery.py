"""The brief's delivery requirements, one test each, on asyncio and trio."""

from __future__ import annotations

import anyio
import pytest
from agent_channel import (
    AgentInterrupted,
    Cancel,
    UserMessage,
    agent_channel,
    fold,
    open_channel,
)

pytestmark = pytest.mark.anyio


async def test_posted_message_is_folded_at_the_next_boundary_not_before() -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        conversation: list[str] = ["task"]
        in_turn, posted = anyio.Event(), anyio.Event()

        async def producer() -> None:
            await in_turn.wait()
            ref.post(UserMessage("also check the tests"))
            posted.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(producer)
            for boundary in range(2):
                conversation.extend(m.text for m in fold(ch.drain()).messages)
                with ch.scope():
                    model_input = list(conversation)
                    if boundary == 0:
                        in_turn.set()
                        await posted.wait()  # the post does not stop the turn
                        await anyio.lowlevel.checkpoint()
                    conversation.append(f"answer to {model_input}")
        assert conversation == [
            "task",
            "answer to ['task']",
            "also check the tests",
            "answer to ['task', \"answer to ['task']\", 'also check the tests']",
        ]


async def test_interrupt_during_a_long_await_raises_and_the_loop_takes_the_redirect() -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        working = anyio.Event()
        turns: list[str] = []

        async def operator() -> None:
            await working.wait()
            ref.interrupt(Cancel("user_cancel"))
            ref.post(UserMessage("stop that, write the docs instead"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(operator)
            with pytest.raises(AgentInterrupted) as caught, ch.scope():
                working.set()
                await anyio.sleep_forever()
            folded = fold(ch.drain())
            turns.extend(m.text for m in folded.messages)
            with ch.scope():  # the next turn runs normally
                await anyio.lowlevel.checkpoint()
        assert caught.value.cancel.reason == "user_cancel"
        assert folded.cancel is None  # delivered once: by the exception, not by the drain
        assert turns == ["stop that, write the docs instead"]


async def test_interrupt_with_no_scope_bound_stops_the_next_scope_as_it_is_entered() -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        cancel = Cancel("limit")
        ref.interrupt(cancel)  # between regions: no error, and not lost
        with pytest.raises(AgentInterrupted) as caught, ch.scope():
            pytest.fail("the body of a stopped turn must not run")
        assert caught.value.cancel is cancel
        assert ch.drain() == []


async def test_interrupt_with_no_scope_bound_is_delivered_by_the_next_drain() -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        cancel = Cancel("limit")
        ref.interrupt(cancel)
        assert ch.drain() == [cancel]  # the boundary takes it: the next scope runs
        assert ch.turn_state == "cancelled"
        with ch.scope():
            await anyio.lowlevel.checkpoint()


async def test_outer_cancellation_propagates_unchanged() -> None:
    async with open_channel() as ch:
        ch.ref()
        with anyio.CancelScope() as outer:
            with ch.scope():
                outer.cancel()
                await anyio.sleep_forever()
        assert outer.cancelled_caught
        assert ch.turn_state == "ended"


async def test_outer_cancellation_wins_when_it_races_an_interrupt() -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        cancel = Cancel()
        with anyio.CancelScope() as outer:
            with ch.scope():
                ref.interrupt(cancel)
                outer.cancel()
                await anyio.sleep_forever()
        assert outer.cancelled_caught  # not converted into AgentInterrupted
        assert ch.drain() == [cancel]  # and the cancel item is not lost either


async def test_an_interrupt_from_a_task_inside_the_scope_stops_the_scope_and_that_task() -> None:
    # The interrupting task is itself inside the scope (a tool running beside the turn):
    # it is cancelled too, at its next unshielded checkpoint, as any task in a cancelled
    # scope is (so the interrupt must not hide it from anyio: a shield still holds).
    async with open_channel() as ch:
        ref = ch.ref()
        after: list[str] = []
        with pytest.raises(AgentInterrupted), ch.scope():
            async with anyio.create_task_group() as tg:

                async def tool() -> None:
                    ref.interrupt()
                    with anyio.CancelScope(shield=True):
                        await anyio.lowlevel.checkpoint()
                        after.append("shielded cleanup ran")
                    await anyio.sleep_forever()
                    after.append("tool went on")  # never

                tg.start_soon(tool)
                await anyio.sleep_forever()
        assert after == ["shielded cleanup ran"]
        assert ch.turn_state == "cancelled"


async def test_an_interrupt_from_a_task_outside_the_scope_leaves_that_task_running() -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        working, resumed = anyio.Event(), anyio.Event()
        after: list[str] = []

        async def operator() -> None:
            await working.wait()
            ref.interrupt()
            await anyio.lowlevel.checkpoint()  # not cancelled: it is outside the scope
            after.append("operator went on")
            resumed.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(operator)
            with pytest.raises(AgentInterrupted), ch.scope():
                working.set()
                await anyio.sleep_forever()
            await resumed.wait()
        assert after == ["operator went on"]


async def test_deadline_inside_a_scope_is_not_an_interrupt() -> None:
    async with open_channel() as ch:
        ch.ref()
        with anyio.move_on_after(0) as deadline:
            with ch.scope():
                await anyio.sleep_forever()
        assert deadline.cancelled_caught


async def test_interrupt_works_on_an_agent_that_never_drains() -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        started = anyio.Event()

        async def never_drains() -> str:
            try:
                with ch.scope():
                    started.set()
                    await anyio.sleep_forever()
            except AgentInterrupted:
                return "stopped"
            return "finished"

        result: list[str] = []
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                result.append(await never_drains())

            tg.start_soon(run)
            await started.wait()
            ref.interrupt()
        assert result == ["stopped"]


async def test_a_ref_taken_while_a_scope_runs_cannot_stop_that_scope() -> None:
    """The rule: scopes entered while nobody holds a ref are free; their interrupts degrade."""
    async with open_channel() as ch:
        with ch.scope():
            ref = ch.ref()
            ref.interrupt()
            await anyio.lowlevel.checkpoint()  # not cancelled
        [item] = ch.drain()
        assert isinstance(item, Cancel)
        with pytest.raises(AgentInterrupted), ch.scope():  # the next scope is interruptible
            ref.interrupt()
            await anyio.lowlevel.checkpoint()


async def test_parent_interrupt_leaves_a_detached_child_running_and_vice_versa() -> None:
    async with open_channel() as parent:
        parent_ref = parent.ref()
        child_ready = anyio.Event()
        refs: list[object] = []
        outcome: list[str] = []

        async def child() -> None:
            async with open_channel() as ch:
                refs.append(ch.ref())
                try:
                    with ch.scope():
                        child_ready.set()
                        await anyio.sleep_forever()
                except AgentInterrupted:
                    outcome.append("child interrupted")

        async with anyio.create_task_group() as tg:
            tg.start_soon(child)
            await child_ready.wait()
            with pytest.raises(AgentInterrupted), parent.scope():
                parent_ref.interrupt()
                await anyio.lowlevel.checkpoint()
            assert outcome == []  # the child's scope is untouched
            assert parent.drain() == [] and agent_channel() is parent
            with parent.scope():
                (child_ref,) = refs
                child_ref.interrupt()  # type: ignore[attr-defined]
                await anyio.lowlevel.checkpoint()  # the parent's scope is untouched
        assert outcome == ["child interrupted"]
        assert parent.drain() == []
