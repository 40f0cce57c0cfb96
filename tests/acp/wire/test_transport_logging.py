"""Logging never stalls the agent: a stderr pipe nobody reads costs log lines, not answers.

The SDK's own spawn helper pipes the agent's stderr and never reads it. These
tests launch the agent exactly that way (real CLI subprocess, real pipes) and
flood it with things that log, then check it still answers (S14 in
docs/acp-behaviour.md: nothing the agent does waits on a pipe but the client's own stream).
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from acp import spawn_agent_process, text_block
from acp.client.connection import ClientSideConnection
from conftest import GUARD, HERE, Recorder, agent_env

pytestmark = pytest.mark.anyio

GARBAGE_LINES = 4_000
"""Each logged a WARNING (~110 bytes): far past the ~192 KiB a pipe and asyncio's buffer hold."""


@dataclass
class Spawned:
    conn: ClientSideConnection
    proc: asyncio.subprocess.Process
    rec: Recorder
    log: str = ""
    """The agent's whole stderr, read once the block is left."""


@asynccontextmanager
async def unread_stderr_agent(agent: str) -> AsyncIterator[Spawned]:
    """The agent as the SDK's spawn helper starts it: stderr piped, and nobody reading it."""
    rec = Recorder()
    async with spawn_agent_process(
        rec,
        sys.executable,
        "-m",
        "agent_channel_acp",
        "stdio",
        "--agent",
        agent,
        env=agent_env(),
        observers=[rec.observe],
    ) as (conn, proc):
        spawned = Spawned(conn, proc, rec)
        yield spawned
        # Only now is stderr read, so the agent can finish writing its log and exit.
        assert proc.stderr is not None
        drain = asyncio.create_task(proc.stderr.read())
    with anyio.fail_after(GUARD):
        spawned.log = (await drain).decode()
        assert await proc.wait() == 0, spawned.log


async def turn(conn: ClientSideConnection, text: str) -> Any:
    with anyio.fail_after(GUARD):
        await conn.initialize(protocol_version=1)
        session = (await conn.new_session(cwd=str(HERE), mcp_servers=[])).session_id
        return await conn.prompt(session_id=session, prompt=[text_block(text)])


async def test_thousands_of_garbage_lines_do_not_freeze_an_agent_whose_stderr_is_unread() -> None:
    async with unread_stderr_agent("agents:react_agent") as agent:
        assert agent.proc.stdin is not None
        agent.proc.stdin.write(b"this is not json\n" * GARBAGE_LINES)
        response = await turn(agent.conn, "hello")
        assert response.stop_reason == "end_turn"
        wire = agent.rec.wire
        # every garbage line was still answered (-32700): nothing lost
        await agent.rec.wait_until(
            lambda: (
                sum(1 for f in wire if f.get("error", {}).get("code") == -32700) == GARBAGE_LINES
            )
        )
    warnings = [line for line in agent.log.splitlines() if "not JSON" in line]
    # a repeated warning is rate-limited: 1st-10th, then the 20th, 40th, 80th... saying so
    assert 10 < len(warnings) <= 30, agent.log
    assert "[2560 times so far" in warnings[-1], agent.log
    assert "Traceback" not in agent.log


async def test_an_agent_that_logs_and_prints_megabytes_answers_with_stderr_unread() -> None:
    async with unread_stderr_agent("agents:chatty_agent") as agent:
        response = await turn(agent.conn, "hello")
        assert response.stop_reason == "end_turn"
    # the log queue is bounded: what did not fit was dropped, and the log says how much
    assert "log records dropped" in agent.log, agent.log[-2000:]
    assert "chatty line 0:" in agent.log
    # 40,000 lines (records and prints) against a ~1,000-record queue and a full pipe
    # (said once per stretch of drops, under load more than once: the total counts)
    dropped = sum(int(n) for n in re.findall(r"(\d+) log records dropped", agent.log))
    assert dropped > 20_000, agent.log[-2000:]
