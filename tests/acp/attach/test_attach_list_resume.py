"""D5 in attach mode: ``session/list`` (every execution the server hosts) and
``session/resume`` (a bind without the replay), against a real server subprocess over a
unix socket, with the SDK's own client.

asyncio only: the ACP SDK is asyncio-bound (see conftest).
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

import anyio
import pytest
from acp import RequestError
from attach_harness import Client, bound, parked, serving
from conftest import GUARD, HERE

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("transport")]

PAGE = 50  # the stated page size (agent/_listing.PAGE_SIZE)


async def listing(c: Client, **params: Any) -> dict[str, Any]:
    with anyio.fail_after(GUARD):
        return await c.request("session/list", params)


async def error_of(c: Client, method: str, params: dict[str, Any]) -> RequestError:
    with anyio.fail_after(GUARD), pytest.raises(RequestError) as e:
        await c.request(method, params)
    return e.value


async def resume(c: Client, sid: str, *, observe: bool = False) -> Any:
    params: dict[str, Any] = {"sessionId": sid, "cwd": str(HERE), "mcpServers": []}
    if observe:
        params["_meta"] = {"agent_channel.observe": True}
    with anyio.fail_after(GUARD):
        return await c.request("session/resume", params)


async def test_d5_attach_initialize_advertises_list_and_resume() -> None:
    async with serving() as server:
        c = await server.connect()
        r = await c.conn.initialize(protocol_version=1)
        caps = r.agent_capabilities
        assert caps is not None and caps.session_capabilities is not None
        assert caps.session_capabilities.list is not None
        assert caps.session_capabilities.resume is not None
        assert caps.session_capabilities.close is not None


async def test_d5_attach_list_gives_every_execution_with_cwd_title_and_state() -> None:
    async with serving("--count", "3", "--title", "job") as server:
        c = await server.connect()
        for sid in server.ids:
            await parked(c, sid)
        await c.ext("end", sessionId=server.ids[0])
        rows = {r["sessionId"]: r for r in (await listing(c))["sessions"]}
        assert set(rows) == set(server.ids)  # no session of this connection needed
        assert sorted(r["title"] for r in rows.values()) == ["job 1", "job 2", "job 3"]
        for sid, row in rows.items():
            assert row["cwd"] == os.getcwd()  # the server's (it inherited ours)
            meta = row["_meta"]
            started = datetime.fromisoformat(meta["agent_channel.started"])
            assert datetime.fromisoformat(row["updatedAt"]) >= started
            ended = sid == server.ids[0]
            assert meta["agent_channel.status"] == ("ended" if ended else "running")
            assert meta["agent_channel.execution"] == (
                "finished" if ended else "waiting for operator"
            )
            assert meta["agent_channel.turnState"]
        # the picker's own session is not a session the server gives: not listed
        await c.new()
        assert len((await listing(c))["sessions"]) == 3


async def test_d5_attach_list_pages_and_honours_the_cwd_filter() -> None:
    async with serving("--count", str(PAGE + 5)) as server:
        c = await server.connect()
        first = await listing(c)
        assert len(first["sessions"]) == PAGE and first["nextCursor"]
        second = await listing(c, cursor=first["nextCursor"])
        assert len(second["sessions"]) == 5 and "nextCursor" not in second
        ids = [r["sessionId"] for r in first["sessions"] + second["sessions"]]
        assert sorted(ids) == sorted(server.ids)  # every execution, once
        starts = [r["_meta"]["agent_channel.started"] for r in first["sessions"]]
        assert starts == sorted(starts, reverse=True)  # newest first
        here = await listing(c, cwd=os.getcwd())
        assert len(here["sessions"]) == PAGE and here["nextCursor"]
        rest = await listing(c, cwd=os.getcwd(), cursor=here["nextCursor"])
        assert len(rest["sessions"]) == 5
        assert await listing(c, cwd="/nowhere/at/all") == {"sessions": []}


async def test_d5_attach_a_bad_cursor_is_32602_and_the_connection_serves_on() -> None:
    async with serving("--count", str(PAGE + 1)) as server:
        c = await server.connect()
        for bad in ("garbage", "eyJ2IjoxfQ", "bnVsbA"):
            e = await error_of(c, "session/list", {"cursor": bad})
            assert e.code == -32602 and "nextCursor" in e.data["reason"], bad
        cursor = (await listing(c))["nextCursor"]
        e = await error_of(c, "session/list", {"cursor": cursor, "cwd": "/elsewhere"})
        assert e.code == -32602 and "cwd" in e.data["reason"]
        e = await error_of(c, "session/list", {"cwd": "not/absolute"})
        assert e.code == -32602 and "absolute" in e.data["reason"]
        assert len((await listing(c, cursor=cursor))["sessions"]) == 1


async def test_d5_attach_resume_binds_without_replay_and_streams_live() -> None:
    async with serving() as server:
        a, sid = await bound(server)
        assert (await a.prompt(sid, "say=earlier"))["stopReason"] == "end_turn"
        await a.until(lambda: "earlier" in a.rec.texts(sid))
        await parked(a, sid)
        b = await server.connect()
        assert await resume(b, sid) == {}
        await b.until(lambda: b.rec.states(sid))  # the preamble's last frame
        updates = b.rec.updates_of(sid)
        assert [u["sessionUpdate"] for u in updates] == ["session_info_update"]
        assert updates[0]["_meta"]["agent_channel.interactive"] is True
        assert "earlier" not in b.rec.texts(sid)  # no history, no "Bound to" text
        # live from here on: its own prompt, and another client's turn
        assert (await b.prompt(sid, "say=later"))["stopReason"] == "end_turn"
        await b.until(lambda: "later" in b.rec.texts(sid))
        metas = [u.get("_meta", {}) for u in b.rec.updates_of(sid)]
        assert not [meta for meta in metas if "agent_channel.replay" in meta]
        await a.prompt(sid, "say=fromA")
        await b.until(lambda: "fromA" in b.rec.texts(sid))
        # session/load on the same execution still replays (what tells the two apart)
        c = await server.connect()
        await c.load(sid)
        await c.until(lambda: c.rec.states(sid))
        assert "earlier" in c.rec.texts(sid)


async def test_d5_attach_resume_observe_only_and_of_an_ended_execution() -> None:
    async with serving() as server:
        a, sid = await bound(server)
        b = await server.connect()
        await resume(b, sid, observe=True)
        await b.until(lambda: b.rec.states(sid))
        (info,) = b.rec.updates_of(sid)
        assert info["_meta"]["agent_channel.interactive"] is False
        with pytest.raises(RequestError) as e:
            await b.prompt(sid, "hello")
        assert e.value.code == -32600  # an observer, as after a load (A14)
        await a.ext("end", sessionId=sid)
        await b.until(lambda: b.rec.has(sid, "_agent_channel/session_ended"))  # live
        late = await server.connect()
        await resume(late, sid)  # ended but kept: it binds (observe-only), like load
        await late.until(lambda: late.rec.states(sid))
        assert late.rec.updates_of(sid)[0]["_meta"]["agent_channel.interactive"] is False


async def test_d5_attach_resume_of_an_unknown_session_is_what_load_answers() -> None:
    async with serving() as server:
        c = await server.connect()
        params = {"sessionId": "nope", "cwd": str(HERE), "mcpServers": []}
        e = await error_of(c, "session/resume", params)
        load = await error_of(c, "session/load", params)
        assert (e.code, e.data) == (load.code, load.data) and e.code == -32002
        assert "nope" in e.data["reason"]
        # the connection serves on
        assert len((await listing(c))["sessions"]) == 1
