"""Refs are safe to use from other threads and from other event loops."""

from __future__ import annotations

import asyncio
import threading

import anyio
import anyio.to_thread
import pytest
from agent_channel import AgentInterrupted, Cancel, UserMessage, open_channel

pytestmark = pytest.mark.anyio


async def test_post_from_a_worker_thread_wakes_a_waiting_consumer() -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        ch.drain()  # claim

        def from_thread() -> None:
            for i in range(100):
                ref.post(UserMessage(f"m{i}"))

        received: list[str] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, from_thread)
            while len(received) < 100:
                received.extend(i.text for i in await ch.receive())  # type: ignore[attr-defined]
        assert received == [f"m{i}" for i in range(100)]


async def test_interrupt_from_another_event_loop_stops_the_scope() -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        in_scope = threading.Event()

        def other_loop() -> None:
            async def operator() -> None:
                in_scope.wait()
                ref.post(UserMessage("from the web console"))
                ref.interrupt(Cancel("system"))

            asyncio.run(operator())

        with pytest.raises(AgentInterrupted) as caught, ch.scope():
            thread = threading.Thread(target=other_loop)
            thread.start()
            in_scope.set()
            await anyio.sleep_forever()
        thread.join()
        assert caught.value.cancel.reason == "system"
        # the cancel was delivered by the exception, not again by the drain
        assert [i.type for i in ch.drain()] == ["user_message"]
