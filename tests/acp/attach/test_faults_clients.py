"""Client faults against a real ``agent-channel-acp serve`` (issue 10): client processes
SIGKILLed mid-turn, mid-replay and mid-approval; half-open connections; clients that stop
reading. The agent keeps going, the other clients keep their streams, the server's
memory stays under the stated bound (figures printed; ``-s`` shows them).

Long form: ``uv run pytest -m soak tests/acp/test_faults_clients.py``.
"""

from __future__ import annotations

import asyncio
import os
import time

import anyio
import pytest
from agent_channel_acp.agent._execution import BACKLOG_LIMIT
from agent_channel_acp.stream._ring import REPLAY_BYTES
from attach_harness import Client, Server, card_status, parked, tool_ids
from conftest import GUARD
from faults import fault_client, frame, half_open, one_result_each, real_serve, rss_kib

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("transport")]

MIB = 1024
"""KiB in a MiB (RSS is read in KiB)."""
ROUNDS = int(os.environ.get("AGENT_CHANNEL_FAULT_ROUNDS", "10"))


async def _clients(c: Client) -> int:
    return (await c.ext("list"))["executions"][0]["clients"]


async def _until_clients(c: Client, n: int) -> None:
    with anyio.fail_after(GUARD * 3):
        while await _clients(c) != n:  # noqa: ASYNC110 (polling the server's own answer)
            await asyncio.sleep(0.01)


async def _turn(c: Client, sid: str, text: str) -> None:
    """One keeper turn: prompt, then wait for the agent to wait for the operator again."""
    done = len([u for u in c.rec.updates_of(sid) if u["sessionUpdate"] == "user_message_chunk"])
    await c.prompt(sid, text)
    await c.until(
        lambda: (
            len([u for u in c.rec.updates_of(sid) if u["sessionUpdate"] == "user_message_chunk"])
            > done
        )
    )
    await parked(c)


async def _timed_turns(c: Client, sid: str, n: int) -> float:
    """Seconds for ``n`` small turns (a figure for the note; machine load makes it noisy)."""
    start = time.perf_counter()
    for i in range(n):
        await _turn(c, sid, f"quick pace{i}")
    return time.perf_counter() - start


async def _kill_rounds(
    server: Server, keeper: Client, sid: str, rounds: int, rss: list[int]
) -> int:
    killed = 0
    for r in range(rounds):
        # six bound (mid-turn at the kill) and three mid-replay ...
        crowd = await asyncio.gather(
            *(fault_client(server, sid, "bound") for _ in range(6)),
            *(fault_client(server, sid, "replay") for _ in range(3)),
        )
        asked = len(keeper.rec.permissions)
        # ... and the driver holding the approval request when it dies
        driver = await fault_client(server, sid, "approval")
        for k in (*crowd, driver):
            k.kill()
        for k in (*crowd, driver):
            assert await k.reaped() == -9
        killed += len(crowd) + 1
        # the approval moves on until a live driver (the keeper) answers it (A20)
        await keeper.until(lambda asked=asked: len(keeper.rec.permissions) > asked)
        await parked(keeper)
        assert keeper.rec.texts(sid).endswith("the tool is done"), r
        rss.append(rss_kib(server.proc.pid))
    return killed


async def test_100_clients_killed_mid_turn_mid_replay_mid_approval() -> None:
    await _killing(ROUNDS)


@pytest.mark.soak
async def test_soak_300_clients_killed() -> None:
    await _killing(max(ROUNDS, 30))


async def _killing(rounds: int) -> None:
    async with real_serve("--approve") as server:
        sid = server.ids[0]
        keeper = await server.connect()
        await keeper.load(sid)
        await keeper.until(lambda: keeper.rec.states(sid))
        for _ in range(3):  # a replay ring of big results: a late binder's replay is long
            await _turn(keeper, sid, "big=400000")
        base = rss_kib(server.proc.pid)
        rss: list[int] = []
        killed = await _kill_rounds(server, keeper, sid, rounds, rss)
        await _until_clients(keeper, 1)  # every killed client left the execution
        after = rss_kib(server.proc.pid)
        print(f"killed {killed} clients; server RSS {base} KiB -> {after} KiB; by round {rss}")
        assert killed == rounds * 10
        # the keeper's stream went on: every approved card completed, in order
        cards = tool_ids(keeper, sid)
        assert len(cards) == 3 + rounds
        assert all(card_status(keeper, sid, t) == "completed" for t in cards)
        full = (await keeper.ext("messages", sessionId=sid, all=True, full=True))["messages"]
        one_result_each(full)
        approvals = [m for m in full if m["role"] == "user" and "approval" in str(m["content"])]
        assert len(approvals) == rounds  # each dead driver's prompt, once
        # The stated bound is per live client (backlog + replay ring); ten are alive at once.
        # Dead ones keep nothing: RSS plateaus (300 kills measured as 100 kills), so it stays
        # under the bound of the clients alive at once however many die.
        live_bound = 10 * (BACKLOG_LIMIT + REPLAY_BYTES) // 1024
        assert max(rss) - base < live_bound and after - base < live_bound, (base, rss)


async def test_half_open_and_stalled_clients_cost_only_their_bound() -> None:
    half = 50
    stalled = 20
    async with real_serve() as server:
        sid = server.ids[0]
        keeper = await server.connect()
        await keeper.load(sid)
        watcher = await server.connect()
        await watcher.load(sid, observe=True)
        await watcher.until(lambda: watcher.rec.states(sid))
        await _turn(keeper, sid, "say=warm")
        pace = [await _timed_turns(keeper, sid, 10)]  # reported, never asserted
        base = rss_kib(server.proc.pid)
        silent = [half_open(server) for _ in range(half)]  # connect, never send
        deaf = [half_open(server, small_buffer=True) for _ in range(stalled)]
        for s in deaf:  # bind, then never read
            s.sendall(frame(1, "initialize", {"protocolVersion": 1}))
            s.sendall(frame(2, "session/load", {"sessionId": sid, "cwd": "/", "mcpServers": []}))
        await _until_clients(keeper, 2 + stalled)
        pace.append(await _timed_turns(keeper, sid, 10))  # with all of them attached
        turns = 24  # 24 x 400 kB: more than a client's backlog, so the deaf ones are dropped
        peak = base
        for i in range(turns):
            await _turn(keeper, sid, f"big=400000 t{i}")
            peak = max(peak, rss_kib(server.proc.pid))
        await _until_clients(keeper, 2)  # the stalled ones were shed (A-slow client rule)
        await _turn(keeper, sid, "say=alive")
        after = rss_kib(server.proc.pid)
        for s in (*silent, *deaf):
            s.close()
        # the other clients kept their whole streams
        for c in (keeper, watcher):
            cards = tool_ids(c, sid)
            assert len(cards) == turns + 20  # and the 2 x 10 timed quick ones
            assert all(card_status(c, sid, t) == "completed" for t in cards)
            assert c.rec.texts(sid).endswith("alive")
        bound_kib = stalled * (BACKLOG_LIMIT + REPLAY_BYTES + (1 << 20)) // 1024
        print(
            f"{half} half-open + {stalled} stalled clients, {turns} turns of 400 kB: server RSS "
            f"{base} KiB -> peak {peak} KiB -> after {after} KiB "
            f"(bound {bound_kib} KiB above base); "
            f"small-turn time with them attached / before: {pace[1] / pace[0]:.2f}"
        )
        assert peak - base < bound_kib
