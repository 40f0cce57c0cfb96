"""A client that vanishes, or sends notifications nobody handles, is a quiet log line.

A gone client is an everyday event (an editor closed, a client killed): the
agent logs it at debug level and exits 0, with no traceback on stderr. An
unknown notification gets one warning line naming it (notifications get no
response, so the log is the only place it shows). The end of input ends the
executions (S12 in docs/acp-behaviour.md) but never cuts off an answer owed.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import anyio
import pytest
from acp import spawn_agent_process
from conftest import GUARD, HERE, Recorder, agent_env, raw_agent

pytestmark = pytest.mark.anyio

CLIENT = """
import asyncio, os, sys
from acp import spawn_agent_process, text_block

class Client:
    def __init__(self):
        self.tool_started = asyncio.Event()
    async def session_update(self, session_id, update, **kwargs):
        if update.session_update == "tool_call":
            self.tool_started.set()
    async def request_permission(self, *args, **kwargs):
        raise RuntimeError("not used")

async def main():
    client = Client()
    command = [sys.executable, "-m", "agent_channel_acp", "stdio", "--agent", "agents:react_agent"]
    async with spawn_agent_process(
        client, *command, env=dict(os.environ), transport_kwargs={"stderr": None}
    ) as (conn, proc):
        await conn.initialize(protocol_version=1)
        session = (await conn.new_session(cwd=os.getcwd(), mcp_servers=[])).session_id
        turn = asyncio.create_task(
            conn.prompt(session_id=session, prompt=[text_block("block until killed")])
        )
        await client.tool_started.wait()
        print("mid-turn", proc.pid, flush=True)
        await turn

asyncio.run(main())
"""


async def test_a_client_killed_mid_turn_leaves_no_traceback_in_the_agents_log() -> None:
    # The client is a process of its own, so it can really be killed (SIGKILL): the agent
    # sees its stdin end and its stdout break at once, as when an editor crashes.
    client = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CLIENT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,  # the agent inherits it: its log ends up here
        env=agent_env(),
        cwd=str(HERE),
    )
    assert client.stdout is not None and client.stderr is not None
    log = asyncio.create_task(client.stderr.read())
    # Getting there is two cold interpreters importing the SDK (2-3 s here, past 10 s on a
    # loaded machine): startup gets the suite's startup guard; what is tested (the kill, the
    # agent's exit, ~15 ms) keeps the hang guard.
    with anyio.fail_after(GUARD * 3):
        line = (await client.stdout.readline()).decode()
    assert line.startswith("mid-turn"), (line, await log)
    with anyio.fail_after(GUARD):
        client.kill()
        await client.wait()
        # stderr reaches EOF once the agent, the last holder of the pipe, has exited
        text = (await log).decode()
    assert "Traceback" not in text, text
    assert "Error" not in text, text


async def test_unknown_notifications_are_one_line_each_without_traceback(tmp_path: Path) -> None:
    rec = Recorder()
    stderr = tmp_path / "agent.log"
    with stderr.open("wb") as log_file:
        async with spawn_agent_process(
            rec,
            sys.executable,
            "-m",
            "agent_channel_acp",
            "stdio",
            "--agent",
            "agents:react_agent",
            env=agent_env(),
            transport_kwargs={"stderr": log_file},
        ) as (conn, proc):
            with anyio.fail_after(GUARD):
                await conn.initialize(protocol_version=1)
                for method, params in [
                    ("no/such_method", {}),
                    ("session/prompt", {"sessionId": "x", "prompt": []}),  # a request sent as one
                    ("session/cancel", {}),  # no sessionId
                    ("session/cancel", {"sessionId": 7}),
                ]:
                    await conn._conn.send_notification(method, params)  # pyright: ignore[reportPrivateUsage]
                await conn.initialize(protocol_version=1)  # still served
        with anyio.fail_after(GUARD):
            assert await proc.wait() == 0
    text = stderr.read_text()
    assert "Traceback" not in text, text
    lines = text.splitlines()
    assert sum("no/such_method" in line for line in lines) == 1, text
    assert sum("session/prompt" in line for line in lines) == 1, text
    assert sum("session/cancel" in line for line in lines) == 2, text


async def test_every_request_read_before_the_input_ends_is_answered() -> None:
    # A client that sends its last requests and closes its side at once (a script, a pipe):
    # the end of input must not cut off the answers still being worked out.
    agent = await raw_agent()
    assert agent.stdin is not None and agent.stdout is not None

    def send(request_id: int, method: str, params: dict[str, object]) -> None:
        frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        agent.stdin.write(json.dumps(frame).encode() + b"\n")  # pyright: ignore[reportOptionalMemberAccess]

    with anyio.fail_after(GUARD):
        send(1, "initialize", {"protocolVersion": 1})
        send(2, "session/new", {"cwd": str(HERE), "mcpServers": []})
        frames = [json.loads(await agent.stdout.readline()) for _ in range(2)]
        session = next(f["result"]["sessionId"] for f in frames if f.get("id") == 2)
        prompt = [{"type": "text", "text": "block"}]
        send(3, "session/prompt", {"sessionId": session, "prompt": prompt})
        send(4, "session/prompt", {"sessionId": session, "prompt": prompt})
        send(5, "session/new", {"cwd": str(HERE), "mcpServers": []})
        send(6, "initialize", {"protocolVersion": 1})
        agent.stdin.close()
        rest = (await agent.stdout.read()).decode().splitlines()
        assert await agent.wait() == 0
    answered = [f["id"] for f in map(json.loads, rest) if "id" in f]
    assert sorted(answered) == [3, 4, 5, 6], rest
