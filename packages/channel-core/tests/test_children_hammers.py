"""Children under load (K2, K3, K7 in docs/children.md), on asyncio and trio.

Each hammer has a CI form and a ``soak`` form (``uv run pytest -m soak FILE``) at the
sizes the rules name. Each was run against a wrong supervisor and failed there (see
docs/decisions.md, "Children in the core").
"""

from __future__ import annotations

import gc
import random
import threading
import weakref

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest
from agent_channel import (
    AgentChannel,
    AgentInterrupted,
    Announce,
    Cancel,
    ChildSteered,
    ExecutionEvent,
    SpawnRefused,
    Steering,
    agent_channel,
    open_channel,
    open_supervisor,
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("eager_thread_switches")]


def spin(n: int) -> None:
    """Busy work of random length: widens the windows the races live in."""
    for _ in range(n):
        pass


# -- K2: interrupting the parent never touches its children ---------------------------------


async def interrupt_storm(interrupts: int, children: int) -> None:
    tasks_before = len(anyio.get_running_tasks())
    threads_before = threading.active_count()
    channels: list[weakref.ref[AgentChannel]] = []
    child_stops: list[str] = []
    async with open_channel() as parent:
        ref = parent.ref()
        storm_over = threading.Event()
        sent = 0

        def operator() -> None:
            nonlocal sent
            rng = random.Random(2)
            for _ in range(interrupts):
                spin(rng.randrange(0, 3000))
                ref.interrupt()
                sent += 1
            storm_over.set()

        async def worker(name: str) -> str:
            ch = agent_channel()
            channels.append(weakref.ref(ch))
            ch.ref()  # its scopes are real: only its own channel could stop them
            steps = 0
            after = 0
            while after < 50:  # its work: turns until the storm is over, then fifty more
                try:
                    with ch.scope():
                        await anyio.lowlevel.checkpoint()
                        spin(50)
                except AgentInterrupted:
                    child_stops.append(name)
                steps += 1
                after += storm_over.is_set()
            return f"{name} did {steps} steps"

        parent_stops = drained_stops = 0
        results: dict[str, Announce] = {}
        ids: list[str] = []
        async with open_supervisor() as sup, anyio.create_task_group() as tg:
            with parent.scope():  # spawned inside a turn, as a tool would
                ids.extend(sup.spawn(worker, f"w{i}") for i in range(children))
            tg.start_soon(anyio.to_thread.run_sync, operator)
            with anyio.fail_after(60):  # a child that never ended would hang the parent
                while len(results) < children or not storm_over.is_set():
                    items = parent.drain()
                    drained_stops += sum(1 for i in items if isinstance(i, Cancel))
                    results.update((a.child_id, a) for a in items if isinstance(a, Announce))
                    try:
                        with parent.scope():  # a turn: a few steps of its own work
                            for _ in range(5):
                                await anyio.lowlevel.checkpoint()
                                spin(100)
                    except AgentInterrupted:
                        parent_stops += 1
        drained_stops += sum(1 for i in parent.drain() if isinstance(i, Cancel))
        assert sent == interrupts
        assert parent_stops + drained_stops == interrupts  # every stop reached the parent ...
        assert parent_stops > 0
        assert child_stops == []  # ... and none reached a child
        assert sorted(results) == sorted(ids)
        assert {a.status for a in results.values()} == {"completed"}
        assert all(" did " in a.result for a in results.values())
    del sup, results
    gc.collect()
    assert [c for c in channels if c() is not None] == []  # no child channel left behind
    assert len(anyio.get_running_tasks()) == tasks_before  # no child task
    assert threading.active_count() <= threads_before + 1  # anyio's idle worker, at most


async def test_k2_a_thousand_parent_interrupts_leave_every_childs_work_complete() -> None:
    await interrupt_storm(1000, 8)


@pytest.mark.soak
async def test_k2_soak_ten_thousand_parent_interrupts() -> None:
    await interrupt_storm(10_000, 8)


# -- K3: a steer racing the child's end is reported exactly once ------------------------------


async def steer_races(races: int) -> dict[str, int]:
    rng = random.Random(3)
    tally = {"delivered": 0, "undelivered": 0}
    async with open_channel() as parent, open_supervisor(max_total=races) as sup:
        events: list[ExecutionEvent] = []
        parent.ref().subscribe(events.append)
        for race in range(races):
            drained: dict[str, int] = {}  # steer id -> number of the drain event that took it
            rounds = rng.randrange(0, 4)
            spins = rng.randrange(0, 400)

            async def body(
                _: str, rounds: int = rounds, spins: int = spins, drained: dict[str, int] = drained
            ) -> str:
                ch = agent_channel()
                counted: list[int] = []
                snapshot, _unsubscribe = ch.ref().watch(lambda e: counted.append(0))
                for _round in range(rounds):
                    spin(spins)
                    for item in ch.drain():
                        drained[item.id] = snapshot.seq + len(counted) - 1
                    await anyio.lowlevel.checkpoint()
                return ""

            child_id = sup.spawn(body)
            for _ in range(rng.randrange(0, 6)):
                await anyio.lowlevel.checkpoint()
            from_thread = race % 2 == 1
            if from_thread:  # the operator's path: another thread, through the top-level ref

                def steer_now(cid: str = child_id, n: int = spins) -> Steering:
                    spin(n)
                    return parent.ref().children.steer(cid, "now")

                steering = await anyio.to_thread.run_sync(steer_now)
            else:
                steering = sup.steer(child_id, "now")
            with anyio.fail_after(10):  # a steer never resolved would hang here
                await steering.wait()
                await sup.wait(child_id)
            seen = steering.id in drained
            assert steering.outcome == ("delivered" if seen else "undelivered"), race
            if seen:
                assert steering.seq == drained[steering.id], race
            tally[steering.outcome] += 1
            parent.drain()  # the announce, and the operator's note
        reported = [e.steer_id for e in events if isinstance(e, ChildSteered)]
        assert len(reported) == len(set(reported)) == races  # each exactly once
    return tally


async def test_k3_a_steer_racing_the_childs_end_is_reported_once_and_truly() -> None:
    tally = await steer_races(2000)
    assert tally["delivered"] > 50 and tally["undelivered"] > 50  # both sides were hit


@pytest.mark.soak
async def test_k3_soak_ten_thousand_steer_races() -> None:
    await steer_races(10_000)


# -- K7: the cap on children running at once holds under a storm of spawns ---------------------


async def spawn_storm(attempts: int, cap: int) -> None:
    rng = random.Random(4)
    running = 0
    most = 0
    refused = 0
    async with (
        open_channel() as parent,
        open_supervisor(max_running=cap, max_total=attempts) as sup,
    ):

        async def body(_: str) -> str:
            nonlocal running, most
            running += 1
            most = max(most, running)
            try:
                for _step in range(rng.randrange(0, 4)):
                    await anyio.lowlevel.checkpoint()
            finally:
                running -= 1
            return "ok"

        async def spawner(n: int) -> None:
            nonlocal refused
            for _ in range(n):
                try:
                    sup.spawn(body)
                except SpawnRefused as e:
                    assert "the limit at once" in str(e)
                    refused += 1
                if rng.random() < 0.5:
                    await anyio.lowlevel.checkpoint()

        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(spawner, attempts // 4)
        spawned = len(sup.children())
        while sup.running:
            await sup.wait()
        assert most == cap  # the cap was reached, never passed
        assert refused > 0 and spawned + refused == attempts
        assert {c.end for c in sup.children()} == {"completed"}
        assert len([i for i in parent.drain() if isinstance(i, Announce)]) == spawned


async def test_k7_ten_thousand_spawns_never_run_more_than_eight_children() -> None:
    await spawn_storm(10_000, 8)
