"""The contract's sharp edges: turn state, the inert channel, types at the producer's call,
the item registry, withdraw and readable help."""

from __future__ import annotations

import pydoc
import threading
from typing import Any, Literal

import anyio
import anyio.to_thread
import pytest
from agent_channel import (
    AgentInterrupted,
    AgentRef,
    Cancel,
    ChannelItem,
    ExecutionEvent,
    ExecutionFinished,
    NotOwner,
    TurnCancelled,
    TurnEnded,
    TurnStarted,
    UserMessage,
    agent_channel,
    open_channel,
)

pytestmark = pytest.mark.anyio


def turn_events(events: list[ExecutionEvent]) -> list[Any]:
    return [e for e in events if isinstance(e, TurnStarted | TurnEnded | TurnCancelled)]


# -- finding 4: turn_state and the turn events agree ------------------------------------


async def test_a_cancel_taken_at_a_boundary_is_a_cancelled_turn_in_state_and_events() -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        events: list[ExecutionEvent] = []
        ref.subscribe(events.append)
        with ch.scope():
            pass
        assert ref.turn_state == "ended"
        cancel = Cancel("user_cancel")
        ref.interrupt(cancel)  # between scopes
        assert ch.drain() == [cancel]
        assert ref.turn_state == "cancelled"
        assert turn_events(events)[-1] == TurnCancelled(cancel=cancel)


async def test_a_scope_left_by_an_exception_says_so_in_its_event() -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        events: list[ExecutionEvent] = []
        ref.subscribe(events.append)
        with pytest.raises(ValueError), ch.scope():
            raise ValueError("model server down")
        assert ref.turn_state == "ended"
        assert turn_events(events)[-1] == TurnEnded(error="ValueError: model server down")
        with ch.scope():
            pass
        assert turn_events(events)[-1] == TurnEnded()


async def test_a_scope_entered_with_a_stop_queued_publishes_only_the_cancel() -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        events: list[ExecutionEvent] = []
        ref.subscribe(events.append)
        cancel = Cancel("system")
        ref.interrupt(cancel)
        with pytest.raises(AgentInterrupted), ch.scope():
            pass
        assert turn_events(events) == [TurnCancelled(cancel=cancel)]
        assert ref.turn_state == "cancelled"


async def test_a_cancel_while_parked_is_dropped_and_changes_nothing() -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        events: list[ExecutionEvent] = []
        ref.subscribe(events.append)
        with ch.scope():
            pass
        ref.interrupt(Cancel())
        ref.post(UserMessage("go on"))
        items = await ch.receive()
        assert [i.type for i in items] == ["user_message"]
        assert ref.turn_state == "ended"
        assert not [e for e in events if isinstance(e, TurnCancelled)]
        assert ch.drain() == []


# -- finding 5: the shared inert channel keeps no state ---------------------------------


async def test_the_inert_channel_keeps_no_state_from_any_caller() -> None:
    inert = agent_channel()
    ref = inert.ref()
    release = ref.mark_live()
    assert not inert.is_live
    assert not agent_channel().is_live
    release()
    ref.post(UserMessage("ignored"))
    ref.interrupt(Cancel())
    assert not ref.withdraw("anything")
    assert ref.turn_state == "idle"
    with inert.scope():
        pass
    assert agent_channel().drain() == []
    assert agent_channel().turn_state == "idle"


# -- finding 6: producers get a TypeError at the call -----------------------------------


async def test_wrong_types_from_a_producer_fail_at_the_call_in_the_producers_thread() -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        errors: list[BaseException] = []

        def producer() -> None:
            for call in (
                lambda: ref.post("hello"),  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
                lambda: ref.interrupt("user_cancel"),  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
                lambda: ref.post({"type": "user_message", "content": "x"}),  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
                lambda: ref.interrupt(UserMessage("not a cancel")),  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
                lambda: ref.withdraw(42),  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
            ):
                try:
                    call()
                except TypeError as e:
                    errors.append(e)

        await anyio.to_thread.run_sync(producer)
        assert len(errors) == 5
        assert "UserMessage" in str(errors[0]) or "ChannelItem" in str(errors[0])
        assert ch.drain() == []  # nothing reached the consumer


# -- finding 7: one class per item type name --------------------------------------------


def test_a_second_item_class_with_a_taken_type_name_is_an_error() -> None:
    class Ping(ChannelItem):
        type: Literal["test_ping_unique"] = "test_ping_unique"  # pyright: ignore[reportIncompatibleVariableOverride]

    with pytest.raises(TypeError, match="test_ping_unique"):

        class Ping(ChannelItem):  # same name, other class: still an error
            type: Literal["test_ping_unique"] = "test_ping_unique"  # pyright: ignore[reportIncompatibleVariableOverride]

    with pytest.raises(TypeError, match="user_message"):

        class Imposter(ChannelItem):
            type: Literal["user_message"] = "user_message"  # pyright: ignore[reportIncompatibleVariableOverride]


# -- finding 8: withdraw ----------------------------------------------------------------


async def test_withdraw_takes_back_a_queued_item_and_only_one_no_drain_took() -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        a, b, c = UserMessage("a"), UserMessage("b"), Cancel()
        ref.post(a)
        ref.post(b)
        ref.interrupt(c)
        assert ref.withdraw(b.id)
        assert not ref.withdraw(b.id)  # already gone
        assert ref.withdraw(c.id)  # a withdrawn stop no longer stops the next scope
        with ch.scope():
            pass
        assert ch.drain() == [a]
        assert not ref.withdraw(a.id)  # drained: too late
        assert not ref.withdraw("unknown")


async def test_withdraw_races_drain_and_each_item_goes_exactly_one_way() -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        ch.drain()
        n = 3000
        withdrawn: list[str] = []
        posted: list[str] = []
        done = threading.Event()

        def producer() -> None:
            for i in range(n):
                item = UserMessage(str(i))
                posted.append(item.id)
                ref.post(item)
                if i % 2 and ref.withdraw(item.id):
                    withdrawn.append(item.id)
            done.set()

        drained: list[str] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, producer)
            while not done.is_set() or len(drained) + len(withdrawn) < n:
                drained.extend(i.id for i in ch.drain())
                await anyio.lowlevel.checkpoint()
        assert sorted(drained + withdrawn) == sorted(posted)
        assert not set(drained) & set(withdrawn)


# -- finding 11: readable help and errors -----------------------------------------------


def test_help_on_agentref_documents_post_and_interrupt() -> None:
    text = pydoc.plain(pydoc.render_doc(AgentRef))
    for name in ("post", "interrupt", "withdraw"):
        assert f"{name}(self" in text, name
    assert (
        "Data descriptors defined here"
        not in text.split("class AgentRef")[-1].split("Readonly properties")[0]
        or "post" not in text.split("Data descriptors defined here")[-1]
    )


async def test_not_owner_names_the_tasks_briefly() -> None:
    async with open_channel() as ch:
        ch.drain()
        errors: list[NotOwner] = []

        async def intruder() -> None:
            try:
                ch.drain()
            except NotOwner as e:
                errors.append(e)

        async with anyio.create_task_group() as tg:
            tg.start_soon(intruder, name="intruder-task")
        message = str(errors[0])
        assert len(message) < 240, message
        assert "intruder-task" in message
        assert "<" not in message  # no object reprs


async def test_execution_finished_lists_only_what_nobody_took() -> None:
    finished: list[ExecutionFinished] = []
    async with open_channel() as ch:
        ref = ch.ref()
        ref.subscribe(lambda e: finished.append(e) if isinstance(e, ExecutionFinished) else None)
        kept = UserMessage("never read")
        ref.post(kept)
    assert [i.id for i in finished[0].undelivered] == [kept.id]
