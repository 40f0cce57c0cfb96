"""The library entry point, ``agent_channel_acp.attachable``: a program that starts its own
agents serves them (several per process, each one ACP session id; operators optional).

The program is ``library_program.py``, a real subprocess; the clients are the SDK's, over
its real unix socket. One of its executions runs on another thread under trio, added with
``add()`` from the server's loop: its events, prompts and cancels cross threads.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError
from agents import GATES_ENV
from attach_harness import Client, Server, card_status, parked, tool_ids
from conftest import GUARD, HERE, agent_env

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def program(tmp: Path, *args: str) -> AsyncIterator[tuple[Server, dict[str, Any]]]:
    gates = Path(tempfile.mkdtemp(prefix="acp-gates-"))
    rt = tmp / "rt"
    rt.mkdir(mode=0o700)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / "library_program.py"),
        str(tmp / "sock"),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=agent_env(**{GATES_ENV: str(gates), "AGENT_CHANNEL_RUNTIME_DIR": str(rt)}),
    )
    assert proc.stdout is not None and proc.stdin is not None
    with anyio.fail_after(GUARD * 3):
        line = await proc.stdout.readline()
    assert line, "the program did not start"
    info = json.loads(line)
    server = Server(Path(info["socket"]), list(info["ids"].values()), proc, gates)
    try:
        yield server, info
    finally:
        await server.stop()


async def listed(c: Client) -> dict[str, dict[str, Any]]:
    return {e["title"]: e for e in (await c.ext("list"))["executions"]}


async def test_attachable_serves_several_executions_each_its_own_session_id(
    tmp_path: Path,
) -> None:
    async with program(tmp_path) as (server, info):
        ids = info["ids"]
        assert len(set(ids.values())) == 4
        with anyio.fail_after(GUARD):  # the record follows the changes (coalesced)
            while True:
                record = json.loads(await anyio.Path(info["record"]).read_text())
                if {e["id"] for e in record["executions"]} == set(ids.values()):
                    break
                await anyio.sleep(0.05)
        assert record["transport"] == {"kind": "unix", "path": str(tmp_path / "sock")}
        c = await server.connect()
        executions = await listed(c)
        assert {t: e["id"] for t, e in executions.items()} == ids
        # three drivable executions: session/new shows the picker (A3)
        sid = await c.new()
        assert sid.startswith("pick-")
        # nobody attached to "here": it worked its task and answered on its own
        with anyio.fail_after(GUARD):
            while True:
                said = await c.ext("messages", sessionId=ids["here"], all=True)
                if any(
                    m["role"] == "assistant" and not m.get("toolCalls") for m in said["messages"]
                ):
                    break
                await anyio.sleep(0.01)
        # run(): bound by session/load, it streams and takes a prompt
        await c.load(ids["run"])
        await c.until(lambda: "Gate: g_run" in json.dumps(c.rec.updates_of(ids["run"])))
        await c.prompt(ids["run"], "say=from-the-run")
        server.open("g_run")
        await c.until(lambda: "from-the-run" in c.rec.texts(ids["run"]))
    assert not await anyio.Path(info["record"]).exists(), "leaving the block removes the record"
    assert not await anyio.Path(tmp_path / "sock").exists(), "and the socket"


async def test_attachable_add_serves_an_execution_running_on_another_thread(
    tmp_path: Path,
) -> None:
    """``add()`` of an execution on a trio thread; and of one already at work (added while a
    tool call runs): a client gets that call's card from the conversation (asked for, not
    answered) and can cancel it alone (A22)."""
    async with program(tmp_path) as (server, info):
        there = info["ids"]["there"]
        c = await server.connect()
        watcher = await server.connect()
        await c.load(there)
        await watcher.load(there, observe=True)
        for client in (c, watcher):  # the replay: its task and the card of the tool it runs
            await client.until(lambda cl=client: tool_ids(cl, there))
        (gate,) = tool_ids(c, there)
        assert card_status(c, there, gate) == "in_progress"
        # a prompt crosses to the trio thread; its answer streams back to both clients
        assert (await c.prompt(there, "say=over-the-thread"))["stopReason"] == "end_turn"
        await c.until(
            lambda: any(m == "agent_channel/queue" and p["messages"] for m, p in c.rec.notes)
        )
        server.open("g_there")
        for client in (c, watcher):
            await client.until(lambda cl=client: "over-the-thread" in cl.rec.texts(there))
        await c.until(lambda: c.rec.states(there)[-1:] == ["ended"])
        # a cancel crosses too: the turn stops mid-tool, both see turn_state cancelled
        await c.prompt(there, "gate=never")
        await c.until(lambda: len(tool_ids(c, there)) == 2)
        await c.cancel(there)
        for client in (c, watcher):
            await client.until(lambda cl=client: cl.rec.states(there)[-1:] == ["cancelled"])
        assert card_status(c, there, tool_ids(c, there)[1]) == "failed"
        # the wait for the operator follows the cancel on the agent's own thread: poll for it
        assert (await parked(c, there))["clients"] == 2
        # the program ends it, not an operator (A23: only run() executions take `end`)
        with pytest.raises(RequestError) as refused:
            await c.ext("end", sessionId=there)
        assert "its program ends it" in (refused.value.data or {})["reason"]
        # the one added while its tool call ran
        late = info["ids"]["late"]
        await c.load(late)
        await c.until(lambda: c.rec.states(late))
        cards = tool_ids(c, late)
        assert len(cards) == 1, c.rec.updates_of(late)
        assert card_status(c, late, cards[0]) == "in_progress"
        assert (await c.ext("cancel_tool_call", sessionId=late, toolCallId=cards[0]))["cancelled"]
        await c.until(lambda: card_status(c, late, cards[0]) == "failed")


async def test_a5_binds_racing_a_fast_stream_see_each_event_once_in_order(tmp_path: Path) -> None:
    """Clients bind while the execution appends messages several per loop step: each one's
    replay plus live stream is ``m<k>``, ``m<k+1>``, ... to the last, none missed or twice
    (a bind landing between an event and the end of its loop step is the edge)."""
    count = 3000
    rt = tmp_path / "rt"
    rt.mkdir(mode=0o700)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / "stream_program.py"),
        str(tmp_path / "sock"),
        str(count),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=agent_env(AGENT_CHANNEL_RUNTIME_DIR=str(rt)),
    )
    assert proc.stdout is not None and proc.stdin is not None
    with anyio.fail_after(GUARD * 3):
        line = (await proc.stdout.readline()).decode().split()
    assert line and line[0] == "READY", line
    server = Server(Path(line[1]), [line[2]], proc, tmp_path)
    sid = line[2]
    try:
        clients = [await server.connect() for _ in range(12)]
        proc.stdin.write(b"go\n")
        await proc.stdin.drain()
        rng = random.Random(8)
        for c in clients:  # bind at scattered moments of the stream
            for _ in range(rng.randrange(50)):
                await asyncio.sleep(0)
            await c.load(sid)

        def numbers(c: Client) -> list[int]:
            texts = [u["content"]["text"] for u in user_chunks_all(c, sid)]
            return [int(t[1:]) for t in texts]

        for c in clients:
            await c.until(lambda c=c: (n := numbers(c)) and n[-1] == count - 1)
            seen = numbers(c)
            assert seen == list(range(seen[0], count)), (seen[:5], len(seen))
    finally:
        await server.stop()


def user_chunks_all(c: Client, sid: str) -> list[dict[str, Any]]:
    return [u for u in c.rec.updates_of(sid) if u["sessionUpdate"] == "user_message_chunk"]
