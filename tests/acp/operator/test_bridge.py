"""The stdio bridge (A21): a stdio-only client launches ``agent-channel-acp bridge [TARGET]``
as its agent (here the SDK's ``spawn_agent_process``, as Zed would) and talks through it to
an agent that ``serve`` runs on its own (a subprocess too), over the discovery record's
unix socket or TCP with its token.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import anyio
import pytest
from acp import text_block
from conftest import GUARD, HERE, Recorder
from serving import bridged, env, serving

pytestmark = pytest.mark.anyio

AGENT = ("--agent", "agents:react_agent")


@pytest.fixture
def rt(tmp_path: Path) -> Path:
    return tmp_path / "rt"


def text_of(rec: Recorder, session_id: str, kind: str) -> str:
    return "".join(
        u.get("content", {}).get("text", "")
        for u in rec.updates[session_id]
        if u["sessionUpdate"] == kind
    )


def said(rec: Recorder, session_id: str) -> str:
    return text_of(rec, session_id, "agent_message_chunk")


async def test_a21_bridge_turns_the_first_session_new_into_a_bind_to_the_target(rt: Path) -> None:
    with serving(rt, *AGENT, "--count", "2") as served:
        first, second = await asyncio.to_thread(served.ids, 2)
        async with bridged(rt, second[:7]) as (conn, rec):
            with anyio.fail_after(GUARD):
                session = await conn.new_session(cwd=str(HERE), mcp_servers=[])
            assert session.session_id == second  # the running execution's id, not a new one
            await rec.wait_until(lambda: "Bound to" in text_of(rec, second, "agent_message_chunk"))
            with anyio.fail_after(GUARD):
                answer = await conn.prompt(session_id=second, prompt=[text_block("hi there")])
            assert answer.stop_reason == "end_turn"  # A7: the agent reads it at its boundary
            await rec.wait_until(
                lambda: "echo: hi there" in text_of(rec, second, "agent_message_chunk")
            )
            assert set(rec.updates) == {second}  # nothing of the other execution
            # The first frames went through unchanged: the bridge rewrote only the session/new.
            assert [f.get("method") for f in rec.sent][:2] == ["initialize", "session/new"]
        assert first != second


async def test_a21_bridge_without_a_target_lets_the_server_pick(rt: Path) -> None:
    with serving(rt, *AGENT, "--count", "2") as served:
        ids = await asyncio.to_thread(served.ids, 2)
        async with bridged(rt) as (conn, rec):
            with anyio.fail_after(GUARD):
                session = (await conn.new_session(cwd=str(HERE), mcp_servers=[])).session_id
            assert session not in ids  # several executions: the picker (A3)
            await rec.wait_until(lambda: "1." in text_of(rec, session, "agent_message_chunk"))
            with anyio.fail_after(GUARD):
                await conn.prompt(session_id=session, prompt=[text_block(ids[0])])
            await rec.wait_until(lambda: "Bound to" in text_of(rec, session, "agent_message_chunk"))


async def test_a21_bridge_over_tcp_presents_the_token(rt: Path) -> None:
    with serving(rt, *AGENT, "--port", "0") as served:
        assert served.record["transport"]["kind"] == "tcp"
        (target,) = await asyncio.to_thread(served.ids)
        async with bridged(rt, target) as (conn, rec):
            with anyio.fail_after(GUARD):
                session = await conn.new_session(cwd=str(HERE), mcp_servers=[])
                assert session.session_id == target
                await conn.prompt(session_id=target, prompt=[text_block("over tcp")])
            await rec.wait_until(
                lambda: "echo: over tcp" in text_of(rec, target, "agent_message_chunk")
            )


async def test_a21_bridge_with_an_unknown_target_fails_in_one_line(rt: Path) -> None:
    with serving(rt, *AGENT):
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "agent_channel_acp",
            "bridge",
            "no-such-execution",
            env=env(rt),
            cwd=str(HERE),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        with anyio.fail_after(GUARD):
            out, err = await proc.communicate()
        assert proc.returncode == 1 and out == b""
        assert err.decode().strip().splitlines() == [
            "agent-channel-acp: no execution matches 'no-such-execution' (see agent-channel-acp ls)"
        ]
