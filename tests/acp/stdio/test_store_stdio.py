"""Durable executions in stdio mode (issue 19): the path a client such as Zed takes when
its agent process dies. A real ``stdio --store S`` subprocess, the SDK's own client, the
process killed with SIGKILL, a new one on the same store.

asyncio only: the ACP SDK is asyncio-bound (see conftest).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import acp
import anyio
import anyio.to_thread
import pytest
from acp import RequestError
from conftest import GUARD, HERE, Agent, agent_env, spawn

pytestmark = pytest.mark.anyio


async def prompt(agent: Agent, sid: str, text: str) -> str:
    with anyio.fail_after(GUARD):
        r = await agent.conn.prompt(session_id=sid, prompt=[acp.text_block(text)])
    return r.stop_reason


def said(agent: Agent, sid: str) -> list[str]:
    """The text of every message the client was sent for ``sid`` (its chunks joined), in order."""
    texts: dict[str, str] = {}
    for i, u in enumerate(agent.rec.updates[sid]):
        if u["sessionUpdate"] in ("user_message_chunk", "agent_message_chunk"):
            key = u.get("messageId") or f"#{i}"
            texts[key] = texts.get(key, "") + u["content"].get("text", "")
    return list(texts.values())


def load_params(sid: str) -> dict[str, Any]:
    return {"sessionId": sid, "cwd": str(HERE), "mcpServers": []}


async def killed(agent: Agent) -> None:
    """SIGKILL the agent process, as a crash would (nothing runs on its way out)."""
    agent.proc.kill()
    with anyio.fail_after(GUARD):
        await agent.proc.wait()


async def test_d5_a_restarted_stdio_agent_gives_the_client_its_thread_back(
    store_spec: str,
) -> None:
    store = store_spec
    async with spawn("--agent", "agents:react_agent", "--store", store) as agent:
        sid = (await agent.conn.new_session(cwd=str(HERE), mcp_servers=[])).session_id
        assert await prompt(agent, sid, "remember the blue door") == "end_turn"
        assert await prompt(agent, sid, "quick check") == "end_turn"  # a tool call and result
        await killed(agent)

    async with spawn("--agent", "agents:react_agent", "--store", store) as agent:
        with anyio.fail_after(GUARD):
            listed = await agent.request("session/list", {})
        (row,) = [r for r in listed["sessions"] if r["sessionId"] == sid]
        assert row["title"] == "remember the blue door"
        assert row["cwd"] == str(HERE)
        with anyio.fail_after(GUARD):
            await agent.request("session/load", load_params(sid))
        thread = said(agent, sid)
        assert "remember the blue door" in thread
        assert "echo: remember the blue door" in thread
        assert "quick check" in thread
        # It takes a prompt, and the model sees the whole thread, well-formed.
        assert await prompt(agent, sid, "inspect") == "end_turn"
        seen = json.loads(said(agent, sid)[-1])
        users = [m["text"] for m in seen if m["role"] == "user"]
        assert users == ["remember the blue door", "quick check", "inspect"]
        calls = sum(len(m.get("tool_calls", [])) for m in seen)
        assert calls == sum(m["role"] == "tool" for m in seen) == 1  # one result per call


async def test_d5_resume_restores_without_replay_and_close_marks_it_closed(
    store_spec: str,
) -> None:
    store = store_spec
    async with spawn("--agent", "agents:react_agent", "--store", store) as agent:
        sid = (await agent.conn.new_session(cwd=str(HERE), mcp_servers=[])).session_id
        assert await prompt(agent, sid, "first words") == "end_turn"
        await killed(agent)

    async with spawn("--agent", "agents:react_agent", "--store", store) as agent:
        with anyio.fail_after(GUARD):
            await agent.request("session/resume", load_params(sid))
        assert said(agent, sid) == []  # resume replays nothing
        assert await prompt(agent, sid, "more words") == "end_turn"
        assert said(agent, sid)[-1] == "echo: more words"
        with anyio.fail_after(GUARD):
            await agent.request("session/close", {"sessionId": sid})
        await killed(agent)

    async with spawn("--agent", "agents:react_agent", "--store", store) as agent:
        with anyio.fail_after(GUARD):
            listed = await agent.request("session/list", {})
        assert [r for r in listed["sessions"] if r["sessionId"] == sid] == []
        with anyio.fail_after(GUARD), pytest.raises(RequestError) as e:
            await agent.request("session/load", load_params(sid))
        assert e.value.code == -32002


async def test_d8_a_second_stdio_agent_on_a_held_store_exits_with_one_line(
    tmp_path: Path,
) -> None:
    store = str(tmp_path / "store.db")
    async with spawn("--agent", "agents:react_agent", "--store", store):
        second = await anyio.to_thread.run_sync(
            lambda: subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "agent_channel_acp",
                    "stdio",
                    "--agent",
                    "agents:react_agent",
                    "--store",
                    store,
                ],
                env=agent_env(),
                cwd=HERE,
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=GUARD,
            )
        )
    assert second.returncode != 0
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1, second.stderr
    assert "in use by another running server" in lines[0] and store in lines[0]
    assert second.stdout == ""


async def test_d8_stdio_on_an_unreachable_database_exits_with_one_line() -> None:
    """N6: ``--store postgresql://…`` that no server answers: one line naming the store
    (never its password), exit non-zero, nothing on stdout."""
    with socket.socket() as closed:  # bound, never listening: nothing answers on it
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        url = f"postgresql://agent:s3cret@127.0.0.1:{port}/runs"
        run = await anyio.to_thread.run_sync(
            lambda: subprocess.run(
                [sys.executable, "-m", "agent_channel_acp", "stdio", "--demo", "--store", url],
                env=agent_env(),
                cwd=HERE,
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=GUARD,
            )
        )
    assert run.returncode != 0
    (line,) = run.stderr.strip().splitlines()
    assert f"postgresql://agent@127.0.0.1:{port}/runs cannot be opened" in line, line
    assert "s3cret" not in run.stderr and run.stdout == ""


async def test_n6_two_stdio_agents_share_a_database_and_a_held_session_is_refused(
    postgres_url: str,
) -> None:
    """N6: stdio agents on one PostgreSQL database: each lists the other's sessions, a load
    of one the other runs is refused with the reason (never a restore beside it), and once
    its agent died the load restores it."""
    async with spawn("--agent", "agents:react_agent", "--store", postgres_url) as first:
        sid = (await first.conn.new_session(cwd=str(HERE), mcp_servers=[])).session_id
        assert await prompt(first, sid, "held by the first") == "end_turn"
        async with spawn("--agent", "agents:react_agent", "--store", postgres_url) as second:
            with anyio.fail_after(GUARD):
                listed = await second.request("session/list", {})
            assert sid in [r["sessionId"] for r in listed["sessions"]]
            with anyio.fail_after(GUARD), pytest.raises(RequestError) as e:
                await second.request("session/load", load_params(sid))
            assert e.value.code == -32600, e.value  # a request at the wrong moment, not a fault
            assert "in use by another running server" in str(e.value.data), e.value.data
            await killed(first)
            with anyio.fail_after(GUARD):
                await second.request("session/load", load_params(sid))
            assert "held by the first" in said(second, sid)


async def unanswered(agent: Agent, sid: str, text: str) -> None:
    """A prompt whose agent dies before its turn ends (its connection closes)."""
    with pytest.raises(ConnectionError):
        await agent.conn.prompt(session_id=sid, prompt=[acp.text_block(text)])


async def test_d5_load_of_a_restored_session_replays_first_and_each_card_once(
    store_spec: str,
) -> None:
    """Issue 29, item 12: a tool call in flight at the crash runs again on the restore (the
    demo's search is idempotent); ``session/load`` sends the replay first, in the
    conversation's order, and the call's card once (``tool_call`` once; what its re-run
    says after is a ``tool_call_update``). The tool outlasts the test (600 s), so the
    re-run's start is the one live event that can race the replay."""
    store = store_spec
    slow = {"AGENT_CHANNEL_DEMO_TOOL_SECONDS": "600"}
    async with spawn("--demo", "--store", store, **slow) as agent, anyio.create_task_group() as tg:
        sid = await agent.session()
        tg.start_soon(unanswered, agent, sid, "brief me on otters")
        await agent.rec.wait_until(lambda: "tool_call" in agent.rec.kinds(sid))
        (first,) = [u for u in agent.rec.updates[sid] if u["sessionUpdate"] == "tool_call"]
        await killed(agent)
        tg.cancel_scope.cancel()

    async with spawn("--demo", "--store", store, **slow) as agent:
        with anyio.fail_after(GUARD):
            await agent.request("session/load", load_params(sid))
        updates = agent.rec.updates[sid]
        kinds = [u["sessionUpdate"] for u in updates]
        assert kinds[0] == "user_message_chunk", kinds  # the replay, from its start
        assert "brief me on otters" in said(agent, sid)[0]
        cards = [u["toolCallId"] for u in updates if u["sessionUpdate"] == "tool_call"]
        assert cards == [first["toolCallId"]], kinds  # the in-flight call's card, once
        replayed_at = kinds.index("tool_call")
        assert kinds.index("user_message_chunk") < replayed_at
