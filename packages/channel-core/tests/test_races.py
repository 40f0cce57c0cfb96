"""Races between producer threads and the consumer, hammered rather than reasoned about.

Each test runs a real foreign thread against the consumer's loop on both backends. The
``HAMMER_CYCLES`` environment variable scales them up (the long form, e.g. ``100000``);
the default keeps CI in seconds.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import deque
from typing import SupportsIndex

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest
from agent_channel import (
    AgentInterrupted,
    AgentRef,
    Cancel,
    ChannelClosed,
    ChannelFull,
    ChannelItem,
    ExecutionFinished,
    UserMessage,
    open_channel,
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("eager_thread_switches")]

CYCLES = int(os.environ.get("HAMMER_CYCLES", "3000"))


def spin(n: int) -> None:
    """Busy work of random length: widens the windows the races live in."""
    for _ in range(n):
        pass


async def test_a_stop_between_the_boundary_drain_and_the_scope_is_not_lost() -> None:
    """Finding 1, deterministically: the interrupt lands after drain(), before scope()."""
    async with open_channel() as ch:
        ref = ch.ref()
        assert ch.drain() == []
        cancel = Cancel("user_cancel")
        ref.interrupt(cancel)
        ran = False
        with pytest.raises(AgentInterrupted) as caught, ch.scope():
            ran = True
        assert caught.value.cancel is cancel
        assert not ran  # nothing of the turn ran
        assert ch.turn_state == "cancelled"
        assert ch.drain() == []  # delivered once: by the scope, not again by the next drain


async def test_no_stop_is_lost_or_delivered_twice_under_a_thread_hammering_interrupt() -> None:
    """Finding 1 under load: each cycle's stop ends that cycle exactly once, whenever it lands."""
    rng = random.Random(7)
    async with open_channel() as ch:
        ref = ch.ref()
        go, sent, stop = threading.Event(), threading.Event(), threading.Event()
        cancels: list[Cancel] = []

        def operator() -> None:
            r = random.Random(11)
            while True:
                go.wait()
                go.clear()
                if stop.is_set():
                    return
                spin(r.randrange(0, 400))
                cancel = Cancel("user_cancel")
                cancels.append(cancel)
                ref.interrupt(cancel)
                sent.set()

        delivered: list[tuple[str, str]] = []
        thread = threading.Thread(target=operator, daemon=True)
        thread.start()
        try:
            for cycle in range(CYCLES):
                sent.clear()
                go.set()
                spin(rng.randrange(0, 200))
                items = ch.drain()
                if items:
                    assert [type(i) for i in items] == [Cancel]
                    delivered.append(("drain", items[0].id))
                    while not sent.is_set():
                        await anyio.lowlevel.checkpoint()
                    continue
                spin(rng.randrange(0, 200))
                try:
                    # If the stop was lost, nothing can end this wait: the bound catches it.
                    with anyio.fail_after(10), ch.scope():
                        await anyio.sleep_forever()
                except AgentInterrupted as e:
                    delivered.append(("scope", e.cancel.id))
                except TimeoutError:
                    pytest.fail(f"cycle {cycle}: the stop was lost (the turn ran on)")
                assert ch.drain() == [], f"cycle {cycle}: the cancel was delivered twice"
        finally:
            stop.set()
            go.set()
            thread.join()
        assert [d[1] for d in delivered] == [c.id for c in cancels]


async def test_receive_returns_only_with_items_despite_stale_cross_thread_wakes() -> None:
    """Finding 2: a wake meant for an earlier waiter must not end a later wait empty."""
    async with open_channel() as ch:
        ref = ch.ref()
        ch.drain()
        total = CYCLES * 10
        received: list[str] = []

        def producer() -> None:  # bursts: a second post lands while the consumer wakes
            r = random.Random(3)
            for i in range(total):
                while True:
                    try:
                        ref.post(UserMessage(str(i)))
                        break
                    except ChannelFull:  # a loaded machine's consumer fell 10,000 behind
                        time.sleep(0.001)
                spin(r.choice((0, 0, 0, 50, 200)))

        with anyio.fail_after(120):  # a lost item would otherwise hang here
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, producer)
                while len(received) < total:
                    items = await ch.receive()
                    assert items, "receive() returned no items"
                    received.extend(i.text for i in items if isinstance(i, UserMessage))
        assert received == [str(i) for i in range(total)]


async def test_a_post_racing_the_close_is_refused_or_reported_undelivered() -> None:
    """Finding 3: either ChannelClosed at the call or listed undelivered, never neither."""
    for round_ in range(max(20, CYCLES // 100)):
        await _post_while_closing(random.Random(round_).randrange(0, 2000))


async def _post_while_closing(delay: int) -> None:
    accepted: list[str] = []
    finished: list[ExecutionFinished] = []
    started, done = threading.Event(), threading.Event()
    async with open_channel(max_queued=1 << 40) as ch:  # the close, not the limit, refuses
        ref = ch.ref()
        ref.subscribe(lambda ev: finished.append(ev) if isinstance(ev, ExecutionFinished) else None)
        ch.drain()

        def producer() -> None:
            started.set()
            try:
                while True:
                    item = UserMessage("late")
                    ref.post(item)
                    accepted.append(item.id)
            except ChannelClosed:
                pass
            finally:
                done.set()

        thread = threading.Thread(target=producer, daemon=True)
        thread.start()
        await anyio.to_thread.run_sync(started.wait)
        spin(delay)
        drained = [i.id for i in ch.drain()]
    await anyio.to_thread.run_sync(done.wait)
    thread.join()
    undelivered = [i.id for i in finished[0].undelivered]
    assert drained + undelivered == accepted


async def test_threads_hammering_post_interrupt_withdraw_deliver_every_item_exactly_once() -> None:
    """Finding 30: delivery is exactly-once and in order under a foreign-thread hammer.

    A producer thread posts, interrupts and withdraws at random while the consumer cycles
    drain / scope / receive. Every item is delivered exactly once (through drain, receive or
    AgentInterrupted) unless it was withdrawn (then never) or it was a Cancel that arrived while
    the consumer was parked in receive() (dropped: there was no turn to stop); messages keep
    their order; no AgentInterrupted carries a cancel twice.
    """
    async with open_channel() as ch:
        ref = ch.ref()
        ch.drain()
        sent: list[ChannelItem] = []
        withdrawn: set[str] = set()
        finished = threading.Event()

        def producer() -> None:
            _post_interrupt_withdraw(ref, sent, withdrawn, random.Random(5))
            last = UserMessage("done")
            sent.append(last)
            # Finished first, then the last post: had the consumer taken "done" before it
            # saw `finished`, it could have gone on to a receive() nothing would ever end.
            finished.set()
            ref.post(last)

        got: list[str] = []
        parked_cancels: set[str] = set()
        rng = random.Random(9)
        thread = threading.Thread(target=producer, daemon=True)
        thread.start()
        try:
            while not (finished.is_set() and sent[-1].id in got):
                roll = rng.random()
                if roll < 0.4:
                    got.extend(_ids(ch.drain()))
                elif roll < 0.8:
                    try:
                        with ch.scope():
                            for _ in range(rng.randrange(0, 3)):
                                await anyio.lowlevel.checkpoint()
                    except AgentInterrupted as e:
                        got.append(e.cancel.id)
                else:
                    with anyio.fail_after(120):  # a lost item would otherwise hang here
                        items = await ch.receive()
                    assert items
                    assert not any(isinstance(i, Cancel) for i in items)
                    got.extend(_ids(items))
                    # a Cancel sent before this wait ended may have been dropped while parked
                    parked_cancels |= {i.id for i in list(sent) if isinstance(i, Cancel)}
        finally:
            thread.join()
        ids = got
        assert len(ids) == len(set(ids)), "an item was delivered twice"
        assert not set(ids) & withdrawn, "a withdrawn item was delivered"
        expected_messages = [
            i.id for i in sent if isinstance(i, UserMessage) and i.id not in withdrawn
        ]
        assert [i for i in ids if i in {m.id for m in sent if isinstance(m, UserMessage)}] == (
            expected_messages
        )
        missing_cancels = {
            i.id for i in sent if isinstance(i, Cancel) and i.id not in withdrawn
        } - set(ids)
        assert missing_cancels <= parked_cancels, "a stop was lost outside a parked wait"


async def test_a_stop_being_delivered_cannot_also_be_withdrawn() -> None:
    """A Cancel that stopped the scope is delivered by its AgentInterrupted, never also
    reported withdrawn: a thread withdrawing it at random moments while the scope exits
    gets ``False`` whenever the consumer catches it (it raced the claim's release)."""
    async with open_channel() as ch:
        ref = ch.ref()
        current: list[Cancel] = []
        stop = threading.Event()
        taken_back: list[str] = []

        def withdrawer() -> None:
            r = random.Random(3)
            while not stop.is_set():
                if current and ref.withdraw(current[-1].id):
                    taken_back.append(current[-1].id)
                spin(r.randrange(0, 50))

        thread = threading.Thread(target=withdrawer, daemon=True)
        thread.start()
        delivered: list[str] = []
        try:
            for _ in range(CYCLES * 3):
                cancel = Cancel("user_cancel")
                current.append(cancel)
                try:
                    with ch.scope():
                        ref.interrupt(cancel)  # on the loop's thread: claimed at once
                        await anyio.lowlevel.checkpoint()
                except AgentInterrupted as e:
                    delivered.append(e.cancel.id)
                ch.drain()
        finally:
            stop.set()
            await anyio.to_thread.run_sync(thread.join)
        assert len(delivered) == CYCLES * 3, "a claimed stop did not stop its scope"
        both = set(delivered) & set(taken_back)
        assert not both, f"{len(both)} of {len(delivered)} stops were delivered and withdrawn"


def _ids(items: list[ChannelItem]) -> list[str]:
    return [i.id for i in items]


def _post_interrupt_withdraw(
    ref: AgentRef, sent: list[ChannelItem], withdrawn: set[str], r: random.Random
) -> None:
    """The hammering thread: CYCLES random posts, interrupts and withdraws of a recent item,
    with busy work of random length between them; ``sent`` and ``withdrawn`` record them."""
    for i in range(CYCLES):
        roll = r.random()
        if roll < 0.55:
            item: ChannelItem = UserMessage(f"m{i}")
            sent.append(item)
            ref.post(item)
        elif roll < 0.8:
            item = Cancel("user_cancel")
            sent.append(item)
            ref.interrupt(item)
        elif sent:
            target = r.choice(sent[-5:])
            if ref.withdraw(target.id):
                withdrawn.add(target.id)
        spin(r.randrange(0, 300))


class _PausingQueue(deque[ChannelItem]):
    """A channel queue whose first ``del`` (a withdraw) pauses right after removing the
    item, inside the channel's lock, until ``resume`` is set: the window in which the
    queue and the Cancel count may disagree."""

    def __init__(self) -> None:
        super().__init__()
        self.paused = threading.Event()
        self.resume = threading.Event()

    def __delitem__(self, index: SupportsIndex | slice) -> None:
        super().__delitem__(index)  # pyright: ignore[reportArgumentType]
        if not self.paused.is_set():
            self.paused.set()
            assert self.resume.wait(30), "the consumer never reached its decision"


class _TellingLock:
    """The channel's lock, which says when another thread had to wait for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.contended = threading.Event()

    def acquire(self) -> bool:
        if not self._lock.acquire(blocking=False):
            self.contended.set()
            self._lock.acquire()
        return True

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


async def test_receive_does_not_park_on_a_message_while_a_withdraw_takes_a_cancel() -> None:
    # A withdraw of a queued Cancel, paused inside the lock after removing it: receive()
    # reads the queue's length and the Cancel count without the lock, and must decide
    # "a message is waiting" (then wait for the lock and take it), not "only Cancels"
    # (then park, with nothing left to wake it). The pause ends as soon as the consumer
    # has decided either way: it waits for the lock, or it is parked.
    async with open_channel() as ch:
        ref = ch.ref()
        queue, lock = _PausingQueue(), _TellingLock()
        ch._queue, ch._lock = queue, lock  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]
        cancel, message = Cancel(), UserMessage("still here")
        ref.post(cancel)
        ref.post(message)
        loop_ran = threading.Event()

        def withdraw() -> bool:
            return ref.withdraw(cancel.id)

        def release_when_decided() -> None:
            queue.paused.wait(30)
            give_up = time.monotonic() + 30
            while not lock.contended.is_set() and time.monotonic() < give_up:
                if ch._waiter is not None:  # pyright: ignore[reportPrivateUsage]
                    # Parked, or about to: once the loop runs a callback, it is parked.
                    ch._loop.call_soon_threadsafe(loop_ran.set)  # pyright: ignore[reportPrivateUsage]
                    loop_ran.wait(30)
                    break
                lock.contended.wait(0.001)
            queue.resume.set()

        withdrawer = threading.Thread(target=withdraw)
        releaser = threading.Thread(target=release_when_decided)
        withdrawer.start()
        releaser.start()
        try:
            while not queue.paused.is_set():  # the withdraw is inside its window
                await anyio.lowlevel.checkpoint()
            with anyio.fail_after(10):
                got = await ch.receive()
        finally:
            queue.resume.set()
            await anyio.to_thread.run_sync(withdrawer.join)
            await anyio.to_thread.run_sync(releaser.join)
        assert got == [message]


async def test_drains_inside_a_scope_under_a_thread_hammer_deliver_every_stop_once() -> None:
    """A drain inside a bound scope takes the messages and leaves every Cancel to the scope.

    A producer thread posts, interrupts and withdraws at random while the consumer drains at
    random moments inside its scopes (as a loop does between a model call and its tools) and
    between them. No drain inside a scope ever returns a Cancel; every item is delivered
    exactly once (a message by a drain, a Cancel by the scope it stopped or by a drain between
    scopes) unless it was withdrawn, then never; messages keep their order; nothing is lost.
    """
    async with open_channel() as ch:
        ref = ch.ref()
        sent: list[ChannelItem] = []
        withdrawn: set[str] = set()
        finished = threading.Event()

        def producer() -> None:
            _post_interrupt_withdraw(ref, sent, withdrawn, random.Random(11))
            finished.set()

        got: list[str] = []
        rng = random.Random(13)
        thread = threading.Thread(target=producer, daemon=True)
        thread.start()
        try:
            while not finished.is_set():
                if rng.random() < 0.3:
                    got.extend(_ids(ch.drain()))  # between scopes: a Cancel is the boundary's
                    continue
                try:
                    with ch.scope():
                        for _ in range(rng.randrange(1, 4)):
                            items = ch.drain()
                            assert not any(isinstance(i, Cancel) for i in items), (
                                "a drain inside a scope returned a Cancel"
                            )
                            got.extend(_ids(items))
                            await anyio.lowlevel.checkpoint()
                except AgentInterrupted as e:
                    got.append(e.cancel.id)
        finally:
            await anyio.to_thread.run_sync(thread.join)
        got.extend(_ids(ch.drain()))  # whatever the producer sent last
        assert len(got) == len(set(got)), "an item was delivered twice"
        assert not set(got) & withdrawn, "a withdrawn item was delivered"
        expected = [i.id for i in sent if i.id not in withdrawn]
        assert sorted(got) == sorted(expected), "an item was lost"
        messages = {i.id for i in sent if isinstance(i, UserMessage)}
        assert [i for i in got if i in messages] == [i for i in expected if i in messages]
