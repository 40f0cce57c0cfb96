"""Incoming frames are bounded (8 MiB): a longer line gets a clear error and costs no memory.

S14 in docs/acp-behaviour.md; the error rules there (the connection goes on).

Real CLI subprocess, real pipes (and a regular file for stdin), the SDK's client side.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError, spawn_agent_process, text_block
from conftest import GUARD, HERE, Recorder, agent_env

pytestmark = pytest.mark.anyio

LIMIT = 8 << 20
FLOOD = 96 << 20
"""Bytes of one line with no newline: far past the limit, so buffering it would show in memory."""
HEADROOM = 32 << 20
"""What reading the flood may add to the agent's peak memory (it would add >= FLOOD if buffered)."""

CLI = ["-m", "agent_channel_acp", "stdio", "--agent", "agents:react_agent"]


def peak_rss(pid: int) -> int:
    """The process's peak resident memory in bytes (Linux)."""
    status = Path(f"/proc/{pid}/status").read_text()
    kib = next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(kib) * 1024


async def test_a_prompt_over_the_frame_limit_is_refused_by_id_and_the_session_goes_on() -> None:
    rec = Recorder()
    async with spawn_agent_process(
        rec, sys.executable, *CLI, env=agent_env(), transport_kwargs={"stderr": None}
    ) as (conn, _proc):
        with anyio.fail_after(GUARD):
            await conn.initialize(protocol_version=1)
            session = (await conn.new_session(cwd=str(HERE), mcp_servers=[])).session_id
            with pytest.raises(RequestError) as refused:
                await conn.prompt(session_id=session, prompt=[text_block("x" * (LIMIT + 1))])
            after = await conn.prompt(session_id=session, prompt=[text_block("still there?")])
    assert refused.value.code == -32600
    data = refused.value.data
    assert isinstance(data, dict)
    assert data["limit"] == LIMIT
    assert data["size"] > LIMIT
    assert "8 MiB" in data["reason"] and str(data["size"]) in data["reason"]
    assert after.stop_reason == "end_turn"


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
async def test_a_line_without_newline_is_not_buffered_and_gets_one_error_when_it_ends() -> None:
    rec = Recorder()
    async with spawn_agent_process(
        rec,
        sys.executable,
        *CLI,
        env=agent_env(),
        transport_kwargs={"stderr": None},
        observers=[rec.observe],
    ) as (conn, proc):
        assert proc.stdin is not None
        with anyio.fail_after(GUARD * 3):
            await conn.initialize(protocol_version=1)
            before = peak_rss(proc.pid)
            chunk = b"y" * (1 << 20)
            for _ in range(FLOOD // len(chunk)):
                proc.stdin.write(chunk)
                await proc.stdin.drain()
            proc.stdin.write(b"\n")
            await conn.initialize(protocol_version=1)  # the next line is served
            grown = peak_rss(proc.pid) - before
    assert grown < HEADROOM, f"peak memory grew by {grown >> 20} MiB"
    errors = [f["error"] for f in rec.wire if "error" in f]
    assert [e["code"] for e in errors] == [-32600]
    assert errors[0]["data"]["size"] == FLOOD


MEASURE = """
import resource, subprocess, sys
with open(sys.argv[1], "rb") as stdin, open(sys.argv[2], "wb") as stdout:
    rc = subprocess.run(sys.argv[3:], stdin=stdin, stdout=stdout).returncode
print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""
"""Runs the agent on files in a fresh interpreter, whose one child is the agent: its peak memory."""


def serve_file(tmp_path: Path, payload: bytes) -> tuple[list[dict[str, object]], int]:
    """The agent's replies to ``payload`` on stdin (a regular file), and its peak memory."""
    requests, replies = tmp_path / "requests.jsonl", tmp_path / "replies.jsonl"
    requests.write_bytes(payload)
    run = subprocess.run(
        [sys.executable, "-c", MEASURE, str(requests), str(replies), sys.executable, *CLI],
        capture_output=True,
        text=True,
        env=agent_env(),
        timeout=GUARD * 6,  # a hang guard, not a timing assertion
    )
    rc, peak = map(int, run.stdout.split())
    assert rc == 0, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    return [json.loads(line) for line in replies.read_text().splitlines()], peak


def test_a_file_on_stdin_is_read_in_bounded_steps(tmp_path: Path) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
    line = json.dumps(init).encode() + b"\n"
    _, baseline = serve_file(tmp_path, line)
    frames, peak = serve_file(tmp_path, b"z" * FLOOD + b"\n" + line)
    assert frames[0]["error"]["data"]["size"] == FLOOD  # type: ignore[index]
    assert frames[1]["result"]["agentInfo"]["name"] == "agent-channel-acp"  # type: ignore[index]
    assert peak - baseline < HEADROOM, f"peak memory grew by {(peak - baseline) >> 20} MiB"


async def test_a_line_that_is_not_json_gets_the_same_error_before_and_after_the_token(
    tmp_path: Path,
) -> None:
    """Over TCP the listener answers what comes before the token and the transport what comes
    after: the same bad line gets the same error frame from both (one wire error type)."""
    from serving import serving

    with serving(tmp_path / "rt", "--agent", "agents:react_agent", "--port", "0") as served:
        where = served.record["transport"]
        reader, writer = await asyncio.open_connection(where["host"], where["port"])

        async def answer(line: bytes) -> dict[str, Any]:
            writer.write(line + b"\n")
            while "method" in (frame := json.loads(await reader.readline())):
                pass  # a notification
            return frame

        with anyio.fail_after(GUARD):
            before = await answer(b"not json")
            meta = {"agent_channel.token": where["token"]}
            init = {"protocolVersion": 1, "_meta": meta}
            hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}
            assert "result" in await answer(json.dumps(hello).encode())
            after = await answer(b"not json")
        writer.close()
    assert before["id"] is None and before["error"]["code"] == -32700
    assert after == before


async def test_the_verbs_client_answers_an_unknown_server_request_as_the_sdk_does() -> None:
    """The verbs' small client (no SDK) refuses a request it has no handler for with the
    SDK's -32601 error object, built by the same wire error type as the servers'."""
    import socket

    from agent_channel_acp.wire._rpc import RpcClient

    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)
    server_reader, server_writer = await asyncio.open_connection(sock=theirs)
    client = RpcClient(reader, writer)
    try:
        request = {"jsonrpc": "2.0", "id": 5, "method": "fs/read_text_file", "params": {}}
        server_writer.write(json.dumps(request).encode() + b"\n")
        with anyio.fail_after(GUARD):
            answer = json.loads(await server_reader.readline())
    finally:
        await client.close()
        server_writer.close()
    expected = RequestError.method_not_found("fs/read_text_file").to_error_obj()
    assert answer == {"jsonrpc": "2.0", "id": 5, "error": expected}
