"""Both modes refuse alike: the same refusal gets the same code, message and ``data.reason``
from stdio and from attach (issue 17, item 5: one wire error type, one wording per refusal).

Real parts: the stdio CLI as a subprocess and an attach server subprocess on a unix socket,
each with the SDK's client side; the same agent and the same trigger in both modes.
asyncio only: the ACP SDK is asyncio-bound (see conftest).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import acp
import anyio
import pytest
from acp import RequestError
from attach_harness import Client, bound, serving
from conftest import GUARD, Agent, spawn
from serving import env

pytestmark = pytest.mark.anyio

HELLO = [{"type": "text", "text": "hello"}]


def refusal(e: RequestError, session_id: str) -> dict[str, Any]:
    """What a client reads of a refusal, its session id checked and set aside."""
    data = dict(e.data) if isinstance(e.data, dict) else {"data": e.data}
    assert data.pop("sessionId", session_id) == session_id
    return {"code": e.code, "message": str(e), **data}


async def stdio_refusal(agent: Agent, session_id: str) -> dict[str, Any]:
    with anyio.fail_after(GUARD), pytest.raises(RequestError) as e:
        await agent.request("session/prompt", {"sessionId": session_id, "prompt": HELLO})
    return refusal(e.value, session_id)


async def attach_refusal(client: Client, session_id: str) -> dict[str, Any]:
    with anyio.fail_after(GUARD), pytest.raises(RequestError) as e:
        await client.request("session/prompt", {"sessionId": session_id, "prompt": HELLO})
    return refusal(e.value, session_id)


async def test_a_prompt_for_an_unknown_session_is_refused_alike() -> None:
    async with spawn("--agent", "agents:react_agent") as agent:
        stdio = await stdio_refusal(agent, "nope")
    async with serving("--input", "gate=g1 start") as server:
        client = await server.connect()
        attach = await attach_refusal(client, "nope")
        server.open("g1")
    assert stdio["code"] == -32002
    assert "unknown session" in stdio["reason"] and "nope" in stdio["reason"]
    assert attach == stdio


async def test_a_prompt_after_the_execution_ended_is_refused_alike() -> None:
    """The model crashes in both modes: the execution ends with an error; a prompt then is
    refused with one wording (A16's "not currently attachable")."""
    async with spawn("--agent", "agents:react_agent") as agent:
        sid = await agent.session()
        with anyio.fail_after(GUARD), pytest.raises(RequestError) as crashed:
            await agent.conn.prompt(session_id=sid, prompt=[acp.text_block("crash")])
        assert crashed.value.code == -32603  # the prompt the agent read gets the failure
        stdio = await stdio_refusal(agent, sid)
    async with serving("--agent", "agents:react_agent", "--input", "crash") as server:
        client = await server.connect()
        sid = server.ids[0]
        await client.load(sid)
        await client.until(lambda: client.rec.states(sid)[-1:] == ["ended"])  # A8: final
        attach = await attach_refusal(client, sid)
    assert stdio["code"] == -32600
    assert "not currently attachable" in stdio["reason"]
    assert attach == stdio


async def test_a_prompt_into_a_full_channel_is_refused_alike() -> None:
    """Another producer filled the execution's channel to its limit (``crowded_agent``)."""
    async with spawn("--agent", "agents:crowded_agent") as agent:
        sid = await agent.session()
        await agent.rec.wait_until(lambda: agent.rec.kinds(sid))  # "filled": it is full
        stdio = await stdio_refusal(agent, sid)
    async with serving("--agent", "agents:crowded_agent") as server:
        client, sid = await bound(server)
        await client.until(lambda: "filled" in client.rec.texts(sid))
        attach = await attach_refusal(client, sid)
    assert stdio["code"] == -32600
    assert stdio["reason"].startswith("the agent has not read the messages already queued")
    assert unnamed(attach) == unnamed(stdio)


def unnamed(refused: dict[str, Any]) -> dict[str, Any]:
    """The refusal with the refused message's own id masked (the core names the item)."""
    return {
        **refused,
        "reason": re.sub(r"user_message \w+ not", "user_message - not", refused["reason"]),
    }


async def test_a_body_whose_call_raises_cannot_run_in_either_mode(tmp_path: Path) -> None:
    """One start of an execution for both modes: stdio's ``session/new`` fails -32603 and
    ``serve`` ends in one line, both saying the same of the body."""
    factory = "agents:raising_body"
    async with spawn("--agent", factory) as agent:
        with anyio.fail_after(GUARD), pytest.raises(RequestError) as e:
            await agent.session()
    assert e.value.code == -32603 and isinstance(e.value.data, dict)
    says = "calling the body raised RuntimeError('no body today')"
    assert e.value.data["details"] == says

    def serve() -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "agent_channel_acp", "serve", "--agent", factory]
        try:
            return subprocess.run(
                command, env=env(tmp_path / "rt"), capture_output=True, text=True, timeout=GUARD
            )
        except subprocess.TimeoutExpired:
            raise AssertionError("serve kept serving an execution that cannot run") from None

    run = await anyio.to_thread.run_sync(serve)
    assert run.returncode == 1
    (line,) = run.stderr.strip().splitlines()
    assert line == f"agent-channel-acp: serve: the agent factory's body cannot run: {says}"
