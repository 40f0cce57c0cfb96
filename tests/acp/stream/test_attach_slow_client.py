"""Attach mode, a client that stops reading: it costs at most its backlog limit, never slows
the agent or another client, is dropped with a reason it can see, and may reattach with
session/load and the replay."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from attach_harness import bound, card_status, parked, serving, tool_ids
from conftest import GUARD

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("transport")]

LIMIT = 256 * 1024  # well above one update (see the notes: one update over it drops a client)
BIG = 60_000  # characters per tool result: a few dozen overflow any socket buffer


async def send(writer: asyncio.StreamWriter, msg_id: int, method: str, params: Any) -> None:
    frame = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
    writer.write(json.dumps(frame).encode() + b"\n")
    await writer.drain()


async def test_attach_slow_client_is_dropped_with_a_reason_and_reattaches() -> None:
    async with serving("--backlog-limit", str(LIMIT), "--input", "say=ready") as server:
        reader, writer = await server.raw()  # binds, then stops reading
        await send(writer, 1, "initialize", {"protocolVersion": 1})
        await send(writer, 2, "session/new", {"cwd": "/", "mcpServers": []})
        writer.transport.pause_reading()  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
        c, sid = await bound(server)
        with anyio.fail_after(GUARD):
            while (await c.ext("list"))["executions"][0]["clients"] < 2:
                await anyio.lowlevel.checkpoint()  # only the server sees it: poll
        # The reading client keeps its pace throughout, until the stalled one is let go: how
        # much the kernel's buffers hold first varies (TCP's grow with the load), so the
        # rounds go on until the drop (the premise, forced; 400 rounds only stop a hang).
        for i in range(400):
            await c.prompt(sid, f"big={BIG} round {i}")
            await c.until(lambda i=i: len(tool_ids(c, sid)) == i + 1)
            await c.until(lambda: card_status(c, sid, tool_ids(c, sid)[-1]) == "completed")
            if i >= 29 and (await c.ext("list"))["executions"][0]["clients"] == 1:
                break
        listed = (await c.ext("list"))["executions"][0]
        assert listed["clients"] == 1  # the stalled one was let go
        # it reads again: what was written before the drop, then why it was dropped
        writer.transport.resume_reading()  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
        seen: list[dict[str, Any]] = []
        with anyio.fail_after(GUARD):
            while not any(f.get("method") == "_agent_channel/dropped" for f in seen):
                seen.append(json.loads(await reader.readline()))
        dropped = next(f for f in seen if f.get("method") == "_agent_channel/dropped")
        assert "session/load" in dropped["params"]["reason"]
        notes = [
            f["params"]["update"]["content"]["text"]
            for f in seen
            if f.get("method") == "session/update"
            and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        ]
        assert any("detached" in n for n in notes)  # said in text too, for plain clients
        # and comes back with session/load: replay, then live again
        await send(writer, 3, "session/load", {"sessionId": sid, "cwd": "/", "mcpServers": []})
        with anyio.fail_after(GUARD):
            while True:
                f = json.loads(await reader.readline())
                if f.get("method") == "_agent_channel/turn_state":
                    break
        assert (await c.ext("list"))["executions"][0]["clients"] == 2
        await c.prompt(sid, "say=after")
        with anyio.fail_after(GUARD):
            while True:
                f = json.loads(await reader.readline())
                update = (f.get("params") or {}).get("update") or {}
                if (update.get("content") or {}).get("text") == "after":
                    break
        writer.close()


async def test_attach_an_answer_never_overtakes_the_updates_before_it() -> None:
    """A client that reads slowly asks ``list`` after a turn ended: the answer comes after
    every update of that turn, not ahead of the ones still queued for it (a script that
    saw "waiting for operator" read a transcript without the turn that led there)."""
    async with serving("--backlog-limit", str(64 << 20), "--input", "say=ready") as server:
        reader, writer = await server.raw()
        await send(writer, 1, "initialize", {"protocolVersion": 1})
        await send(writer, 2, "session/new", {"cwd": "/", "mcpServers": []})
        c, sid = await bound(server)
        with anyio.fail_after(GUARD):
            while (await c.ext("list"))["executions"][0]["clients"] < 2:
                await anyio.lowlevel.checkpoint()  # only the server sees it: poll
        writer.transport.pause_reading()  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
        await c.prompt(sid, "big=4000000")  # fills its socket and the server's buffer
        await parked(c)
        await c.prompt(sid, "quick")  # queued for it behind that
        await c.until(lambda: "the tool is done" in c.rec.texts(sid))
        await parked(c)  # the turn is over; the slow client has all of it still to read
        await send(writer, 9, "_agent_channel/list", {})
        await send(
            writer,
            10,
            "session/prompt",
            {"sessionId": sid, "prompt": [{"type": "text", "text": "say=marker"}]},
        )
        await c.until(lambda: "marker" in c.rec.texts(sid))  # both were answered by now
        writer.transport.resume_reading()  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
        before: list[dict[str, Any]] = []
        with anyio.fail_after(GUARD):
            while (f := json.loads(await reader.readline())).get("id") != 9:
                before.append(f)
        assert f["result"]["executions"][0]["status"] == "waiting for operator"
        updates = [x["params"]["update"] for x in before if x.get("method") == "session/update"]
        texts = "".join(
            u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
        )
        assert "the tool is done" in texts  # the turn came first
        writer.close()
