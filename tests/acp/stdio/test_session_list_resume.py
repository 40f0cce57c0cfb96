"""D5 in stdio mode: ``session/list`` and ``session/resume`` against a real subprocess agent,
driven by the SDK's own client over real pipes.

asyncio only: the ACP SDK is asyncio-bound (see conftest).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import acp
import anyio
import anyio.lowlevel
import pytest
from acp import RequestError
from agent_channel import ChatMessageUser
from agent_channel_react import call, scripted_agent_factory
from agent_channel_react import tool_call as make_call
from agents import TOOLS
from conftest import GUARD, HERE, Agent, in_process, spawn

pytestmark = pytest.mark.anyio

PAGE = 50  # the stated page size (agent/_listing.PAGE_SIZE)


async def new(agent: Agent, cwd: str = str(HERE)) -> str:
    return (await agent.conn.new_session(cwd=cwd, mcp_servers=[])).session_id


async def prompt(agent: Agent, sid: str, text: str) -> str:
    with anyio.fail_after(GUARD):
        r = await agent.conn.prompt(session_id=sid, prompt=[acp.text_block(text)])
    return r.stop_reason


async def listing(agent: Agent, **params: Any) -> dict[str, Any]:
    with anyio.fail_after(GUARD):
        return await agent.request("session/list", params)


async def every(agent: Agent, **params: Any) -> list[dict[str, Any]]:
    """All pages, in order."""
    rows: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page = await listing(agent, **params, **({"cursor": cursor} if cursor else {}))
        rows.extend(page["sessions"])
        cursor = page.get("nextCursor")
        if cursor is None:
            return rows


async def error_of(agent: Agent, method: str, params: dict[str, Any]) -> RequestError:
    with anyio.fail_after(GUARD), pytest.raises(RequestError) as e:
        await agent.request(method, params)
    return e.value


def resume_params(sid: str) -> dict[str, Any]:
    return {"sessionId": sid, "cwd": str(HERE), "mcpServers": []}


async def test_d5_initialize_advertises_list_and_resume() -> None:
    async with spawn("--agent", "agents:react_agent") as agent:
        r = await agent.conn.initialize(protocol_version=1)
        caps = r.agent_capabilities
        assert caps is not None and caps.session_capabilities is not None
        assert caps.session_capabilities.list is not None
        assert caps.session_capabilities.resume is not None
        assert caps.session_capabilities.fork is None  # not routed to anything: not advertised


async def test_d5_stdio_list_gives_live_and_finished_sessions_with_cwd_title_and_state() -> None:
    async with spawn("--agent", "agents:react_agent") as agent:
        assert await listing(agent) == {"sessions": []}
        a = await new(agent)
        b = await new(agent, "/tmp")
        assert await prompt(agent, a, "hello   there,\n the first operator message") == "end_turn"
        rows = {r["sessionId"]: r for r in (await listing(agent))["sessions"]}
        assert set(rows) == {a, b}
        assert rows[a]["cwd"] == str(HERE) and rows[b]["cwd"] == "/tmp"
        assert rows[a]["title"] == "hello there, the first operator message"
        assert "title" not in rows[b]  # nothing said yet: no title rather than a made-up one
        meta = rows[a]["_meta"]
        assert meta["agent_channel.status"] == "running"
        assert meta["agent_channel.execution"] == "waiting for operator"
        assert meta["agent_channel.turnState"] in ("ended", "idle")
        updated = datetime.fromisoformat(rows[a]["updatedAt"])
        assert updated >= datetime.fromisoformat(meta["agent_channel.started"])
        # closed: gone from the list; the rest stays
        assert await agent.request("session/close", {"sessionId": b}) == {}
        assert [r["sessionId"] for r in (await listing(agent))["sessions"]] == [a]


async def test_d5_stdio_a_finished_session_is_listed_as_ended() -> None:
    finishing = scripted_agent_factory(  # answers its task at once and ends
        [call(make_call("submit", answer="42"))],
        submit=True,
        tools=TOOLS,
        input=[ChatMessageUser(content="the task given", source="task")],
    )
    async with in_process(finishing) as local:
        sid = await local.session()

        async def row() -> dict[str, Any]:
            with anyio.fail_after(GUARD):
                (only,) = (await local.request("session/list", {}))["sessions"]
            return only

        with anyio.fail_after(GUARD):
            while (await row())["_meta"]["agent_channel.status"] != "ended":  # a round trip each
                await anyio.lowlevel.checkpoint()
        ended = await row()
        assert ended["sessionId"] == sid and ended["title"] == "the task given"
        assert ended["_meta"]["agent_channel.execution"] == "finished"


async def test_d5_stdio_list_pages_past_the_page_size_newest_first() -> None:
    async with spawn("--agent", "agents:react_agent") as agent:
        made = [await new(agent) for _ in range(PAGE + 5)]
        first = await listing(agent)
        assert len(first["sessions"]) == PAGE and first["nextCursor"]
        second = await listing(agent, cursor=first["nextCursor"])
        assert len(second["sessions"]) == 5 and "nextCursor" not in second
        ids = [r["sessionId"] for r in first["sessions"] + second["sessions"]]
        assert sorted(ids) == sorted(made)  # each once
        assert ids[0] == made[-1] and ids[-1] == made[0]  # newest first
        # a session that starts between two pages shows on the first page, not twice
        late = await new(agent)
        again = await listing(agent, cursor=first["nextCursor"])
        assert [r["sessionId"] for r in again["sessions"]] == ids[PAGE:]
        assert late == (await listing(agent))["sessions"][0]["sessionId"]


async def test_d5_stdio_list_honours_the_cwd_filter() -> None:
    async with spawn("--agent", "agents:react_agent") as agent:
        here = [await new(agent) for _ in range(3)]
        there = await new(agent, "/tmp/elsewhere")
        rows = await every(agent, cwd=str(HERE))
        assert sorted(r["sessionId"] for r in rows) == sorted(here)
        assert [r["sessionId"] for r in await every(agent, cwd="/tmp/elsewhere/")] == [there]
        assert await listing(agent, cwd="/nowhere") == {"sessions": []}
        e = await error_of(agent, "session/list", {"cwd": "relative/dir"})
        assert e.code == -32602 and "absolute" in e.data["reason"]


async def test_d5_stdio_a_bad_cursor_is_32602_with_a_clear_reason() -> None:
    async with spawn("--agent", "agents:react_agent") as agent:
        for _ in range(PAGE + 1):
            await new(agent)
        for bad in ("garbage", "", "eyJ2IjoyfQ", "W10", "\u00e9t\u00e9"):
            e = await error_of(agent, "session/list", {"cursor": bad})
            assert e.code == -32602, bad
            assert "cursor" in e.data["reason"] and "nextCursor" in e.data["reason"], bad
        cursor = (await listing(agent))["nextCursor"]
        e = await error_of(agent, "session/list", {"cursor": cursor, "cwd": "/tmp"})
        assert e.code == -32602 and "cwd" in e.data["reason"]
        e = await error_of(agent, "session/list", {"cursor": 7})
        assert e.code == -32602  # the SDK's own validation
        assert len((await listing(agent, cursor=cursor))["sessions"]) == 1  # still serves


async def test_d5_stdio_resume_replays_nothing_and_the_stream_goes_on_live() -> None:
    async with spawn("--agent", "agents:react_agent") as agent:
        sid = await new(agent)
        assert await prompt(agent, sid, "hello") == "end_turn"
        before = list(agent.rec.updates[sid])
        with anyio.fail_after(GUARD):
            assert await agent.request("session/resume", resume_params(sid)) == {}
        await listing(agent)  # a round trip: anything the resume sent is in by now
        assert agent.rec.updates[sid] == before  # no replay (session/load would send one)
        assert await prompt(agent, sid, "quick") == "end_turn"
        new_kinds = [u["sessionUpdate"] for u in agent.rec.updates[sid][len(before) :]]
        assert "tool_call" in new_kinds and "agent_message_chunk" in new_kinds
        assert "user_message_chunk" not in new_kinds  # nothing of the history came again


async def test_d5_stdio_resume_of_an_unknown_or_closed_session_is_what_load_answers() -> None:
    async with spawn("--agent", "agents:react_agent") as agent:
        e = await error_of(agent, "session/resume", resume_params("nope"))
        load = await error_of(agent, "session/load", resume_params("nope"))
        assert (e.code, e.data) == (load.code, load.data) and e.code == -32002
        assert "nope" in e.data["reason"]
        sid = await new(agent)
        await agent.request("session/close", {"sessionId": sid})
        e = await error_of(agent, "session/resume", resume_params(sid))
        assert e.code == -32002 and "no longer kept" in e.data["reason"]
