"""The channel's queue is bounded: ``max_queued`` items wait undrained, then ``post`` raises
``ChannelFull`` at the caller and nothing already queued is lost; interrupts past as many
waiting Cancels add nothing (those stop the turn). On asyncio and trio."""

from __future__ import annotations

import random
import threading

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest
from agent_channel import (
    AgentInterrupted,
    Cancel,
    ChannelFull,
    ExecutionEvent,
    ExecutionFinished,
    UserMessage,
    open_channel,
)
from agent_channel.lowlevel import MAX_QUEUED

pytestmark = pytest.mark.anyio


async def test_a_post_past_the_limit_raises_channel_full_and_loses_nothing() -> None:
    async with open_channel(max_queued=3) as ch:
        ref = ch.ref()
        for i in range(3):
            ref.post(UserMessage(f"m{i}"))
        ref.interrupt()  # Cancels are counted apart: a stop is never refused for messages
        refused = UserMessage("one too many")
        with pytest.raises(ChannelFull, match=r"3 items already wait undrained.*not queued"):
            ref.post(refused)
        items = ch.drain()
        assert [i.text for i in items if isinstance(i, UserMessage)] == ["m0", "m1", "m2"]
        assert refused.id not in {i.id for i in items}
        ref.post(UserMessage("room again"))  # a drain makes room
        assert [i.text for i in ch.drain() if isinstance(i, UserMessage)] == ["room again"]


async def test_interrupts_past_the_limit_add_nothing_and_the_turn_still_stops() -> None:
    async with open_channel(max_queued=2) as ch:
        ref = ch.ref()
        cancels = [Cancel() for _ in range(5)]
        for c in cancels:
            ref.interrupt(c)
        ref.post(cancels[0].model_copy(update={"id": "posted"}))  # posted Cancels too
        with pytest.raises(AgentInterrupted) as stopped, ch.scope():
            pass
        assert stopped.value.cancel is cancels[0]
        assert [i.id for i in ch.drain()] == [cancels[1].id]  # the other one that fitted


async def test_the_default_limit_and_bad_limits() -> None:
    assert MAX_QUEUED == 10_000
    for bad in (0, -1, True, 2.0, "3"):
        with pytest.raises(ValueError, match="max_queued must be an int of at least 1"):
            async with open_channel(max_queued=bad):  # type: ignore[arg-type]
                pass


async def test_threads_posting_past_the_limit_get_every_item_in_or_refused() -> None:
    """Two threads post as fast as they can into a channel of 50 while the consumer drains
    at random moments: no drain sees more than 50, every item either raised ChannelFull
    at its caller or was delivered (drained or reported undelivered) exactly once, in each
    thread's order."""
    limit, per_thread = 50, 3000
    accepted: dict[str, list[str]] = {"a": [], "b": []}
    refused: dict[str, int] = {"a": 0, "b": 0}
    finished: list[ExecutionFinished] = []
    delivered: list[str] = []

    def on_event(ev: ExecutionEvent) -> None:
        if isinstance(ev, ExecutionFinished):
            finished.append(ev)

    async with open_channel(max_queued=limit) as ch:
        ref = ch.ref()
        ref.subscribe(on_event)
        ch.drain()
        done = [threading.Event(), threading.Event()]

        def producer(name: str, flag: threading.Event) -> None:
            try:
                for i in range(per_thread):
                    item = UserMessage(f"{name}{i}")
                    try:
                        ref.post(item)
                    except ChannelFull:
                        refused[name] += 1
                    else:
                        accepted[name].append(item.text)
            finally:
                flag.set()

        threads = [
            threading.Thread(target=producer, args=(n, f), daemon=True)
            for n, f in zip(("a", "b"), done, strict=True)
        ]
        for t in threads:
            t.start()
        rng = random.Random(7)
        while not all(f.is_set() for f in done):
            items = ch.drain()
            assert len(items) <= limit
            delivered.extend(i.text for i in items if isinstance(i, UserMessage))
            for _ in range(rng.randrange(0, 50)):
                await anyio.lowlevel.checkpoint()
            await anyio.to_thread.run_sync(lambda: None)  # let the producers run
        for t in threads:
            t.join()
    undelivered = [i.text for i in finished[0].undelivered if isinstance(i, UserMessage)]
    everything = delivered + undelivered
    assert sorted(everything) == sorted(accepted["a"] + accepted["b"])  # each exactly once
    for name in ("a", "b"):
        assert [t for t in everything if t.startswith(name)] == accepted[name]  # in order
        assert len(accepted[name]) + refused[name] == per_thread
    assert refused["a"] + refused["b"] > 0  # the limit was really reached
