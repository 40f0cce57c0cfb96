"""What a local attacker can and cannot do to ``agent-channel-acp serve`` (SECURITY.md).

Black-box: the real ``serve --demo`` as a subprocess; the attacker is a forked child that
drops to uid 65534 (``nobody``) before it touches anything (the suite runs as root), or a
process of our own uid that does not hold the token. Each test names the claim it proves.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import GUARD, HERE, NOBODY, as_other_uid, raw_agent
from fuzz_frames import Pool
from fuzz_targets import Target, fuzz_env, start_serve

pytestmark = pytest.mark.anyio

TOKEN_KEY = "agent_channel.token"
SECRET = "SECRET-PROMPT-7f3a"


def frame(msg_id: Any, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}).encode()


async def ask(target: Target, method: str, params: dict[str, Any]) -> dict[str, Any]:
    wire = await target.connect(Pool())
    try:
        reply = await wire.call(method, params, "ask", guard=GUARD)
        return reply
    finally:
        wire.writer.close()
        await wire.stop()


async def texts(target: Target, execution_id: str) -> list[str]:
    params = {"sessionId": execution_id, "all": True}
    reply = await ask(target, "_agent_channel/messages", params)
    return [m["text"] for m in reply["result"]["messages"]]


async def execution_id(target: Target) -> str:
    reply = await ask(target, "_agent_channel/list", {})
    (execution,) = reply["result"]["executions"]
    return execution["id"]


def attack(execution: str) -> bytes:
    """What the attacker sends on connect: a prompt to the execution, then an end."""
    prompt = [{"type": "text", "text": f"{SECRET} from another uid"}]
    return b"\n".join(
        [
            frame(1, "initialize", {"protocolVersion": 1}),
            frame(2, "session/load", {"cwd": "/", "sessionId": execution, "mcpServers": []}),
            frame(3, "session/prompt", {"sessionId": execution, "prompt": prompt}),
            frame(4, "_agent_channel/end", {"sessionId": execution}),
            b"",
        ]
    )


# -- unix socket: three walls ------------------------------------------------------------------


async def test_another_uid_meets_the_0700_dir_then_the_0600_socket_then_the_uid_check(
    open_dir: Path,
) -> None:
    """SECURITY.md "Unix socket": the runtime directory (0700) stops another uid; were it
    open, the socket's own mode (0600) would; were both open, the peer uid check answers one
    error frame and closes, and nothing the other uid sent reached the execution."""
    target = start_serve(open_dir, tcp=False)
    try:
        sock = target.transport["path"]
        rt = os.path.dirname(sock)
        assert rt == str(open_dir / "rt")
        assert (os.stat(rt).st_mode & 0o777, os.stat(sock).st_mode & 0o777) == (0o700, 0o600)
        execution = await execution_id(target)

        got = await asyncio.to_thread(as_other_uid, sock, attack(execution))
        assert got == "error Permission denied", got  # the directory
        os.chmod(rt, 0o711)
        got = await asyncio.to_thread(as_other_uid, sock, attack(execution))
        assert got == "error Permission denied", got  # the socket
        os.chmod(sock, 0o666)
        got = await asyncio.to_thread(as_other_uid, sock, attack(execution))
        assert got.startswith("ok "), got
        frames = [json.loads(x) for x in got[3:].splitlines()]
        assert len(frames) == 1, frames  # one error, then closed (the read ended)
        assert frames[0]["error"]["code"] == -32000
        assert f"peer uid {NOBODY}" in frames[0]["error"]["data"]["reason"]

        assert not any(SECRET in t for t in await texts(target, execution))
        status = (await ask(target, "_agent_channel/list", {}))["result"]["executions"][0]
        assert status["status"] != "finished", status  # the end never arrived
        assert target.alive
    finally:
        assert target.stop() == 0


# -- TCP: the token --------------------------------------------------------------------------


async def test_tcp_without_the_token_nothing_is_served_and_the_token_is_never_printed_or_logged(
    tmp_path: Path,
) -> None:
    """SECURITY.md "TCP": 127.0.0.1 only; without the token every request is refused and
    none reaches the execution; a wrong token closes the connection; more than 1 MiB
    before the token closes it. The token is in the 0600 record only: not in the
    announcement, and not in the log, even at DEBUG; the operator's message text is not
    logged either."""
    target = start_serve(tmp_path, tcp=True, level="DEBUG")
    try:
        transport = target.transport
        token = transport["token"]
        assert transport["host"] == "127.0.0.1"
        assert token not in target.announced
        record = next((tmp_path / "rt").glob("*.json"))
        assert record.stat().st_mode & 0o777 == 0o600
        execution = await execution_id(target)  # with the token (Target.connect presents it)

        async def raw(data: bytes) -> bytes:
            reader, writer = await asyncio.open_connection(transport["host"], transport["port"])
            writer.write(data)
            writer.write_eof()
            async with asyncio.timeout(GUARD):
                out = await reader.read()
            writer.close()
            return out

        replies = [json.loads(x) for x in (await raw(attack(execution))).splitlines()]
        assert [r["error"]["code"] for r in replies] == [-32000] * 4, replies
        wrong = frame(1, "initialize", {"protocolVersion": 1, "_meta": {TOKEN_KEY: "x" * 43}})
        replies = [
            json.loads(x) for x in (await raw(wrong + b"\n" + attack(execution))).splitlines()
        ]
        assert len(replies) == 1 and "does not match" in replies[0]["error"]["data"]["reason"]
        flood = await raw(b"x" * ((1 << 20) + (64 << 10)))
        assert b"too much input before the token" in flood

        wire = await target.connect(Pool())  # the token holder: served
        try:
            load = {"cwd": str(HERE), "sessionId": execution, "mcpServers": []}
            assert "result" in await wire.call("session/load", load, "load", guard=GUARD)
            prompt = {"sessionId": execution, "prompt": [{"type": "text", "text": SECRET}]}
            assert "result" in await wire.call("session/prompt", prompt, "p", guard=GUARD)
        finally:
            wire.writer.close()
            await wire.stop()
        seen = await texts(target, execution)
        assert seen.count(SECRET) == 1  # the token holder's message, once
        assert not any("from another uid" in t for t in seen)  # nothing of the rest
    finally:
        assert target.stop() == 0
    log = target.log.read_text()
    assert "DEBUG" in log  # the level took
    assert token not in log
    assert SECRET not in log


# -- paths it refuses --------------------------------------------------------------------------


def serve_fails(rt: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_channel_acp", "serve", "--demo", *args],
        env=fuzz_env(rt),
        capture_output=True,
        text=True,
        cwd=HERE,
        timeout=GUARD * 3,
    )


def test_a_symlinked_runtime_dir_or_socket_path_is_refused_and_nothing_is_followed(
    tmp_path: Path,
) -> None:
    """SECURITY.md "Paths": a runtime directory that is a symlink (even to a good 0700
    directory of ours) is refused; a ``--socket`` path that is a symlink (to a file or to a
    socket) or any other non-socket is refused, and its target left alone."""
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    run = serve_fails(link)
    assert run.returncode != 0 and "is not a directory" in run.stderr, run.stderr
    assert list(real.iterdir()) == []

    rt = tmp_path / "rt"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    pointer = tmp_path / "agent.sock"
    pointer.symlink_to(victim)
    run = serve_fails(rt, "--socket", str(pointer))
    assert run.returncode != 0 and "is not a socket" in run.stderr, run.stderr
    assert victim.read_text() == "keep me" and pointer.is_symlink()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    run = serve_fails(rt, "--socket", str(fifo))
    assert run.returncode != 0 and "is not a socket" in run.stderr, run.stderr


def test_sweeping_a_dead_record_never_removes_what_is_not_a_socket(tmp_path: Path) -> None:
    """SECURITY.md "Paths": a record of a dead process is swept at the next start, but the
    path it names is removed only if it is a socket: a planted record naming another file
    costs that file nothing."""
    rt = tmp_path / "rt"
    rt.mkdir(mode=0o700)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    dead = {
        "version": 1,
        "pid": 2**22 + 1,  # above the kernel's pid limit: never alive
        "pid_start": None,
        "started_at": 0.0,
        "transport": {"kind": "unix", "path": str(victim)},
        "executions": [],
    }
    (rt / f"{dead['pid']}.json").write_text(json.dumps(dead))
    target = start_serve(tmp_path, tcp=False)
    try:
        assert not (rt / f"{dead['pid']}.json").exists()  # swept at start
        assert victim.read_text() == "keep me"
    finally:
        assert target.stop() == 0


# -- the diagnostics path ----------------------------------------------------------------------


async def test_the_debug_counts_are_unknown_unless_the_environment_asks_for_them(
    tmp_path: Path,
) -> None:
    """SECURITY.md "What is shown": ``_agent_channel/debug`` answers only with
    ``AGENT_CHANNEL_ACP_DEBUG=1``; otherwise it is an unknown method (-32601), on both
    servers."""
    from fuzz_checker import Wire

    for debug in (True, False):
        (tmp_path / str(debug)).mkdir()
        target = start_serve(tmp_path / str(debug), tcp=False, debug=debug)
        try:
            reply = await ask(target, "_agent_channel/debug", {})
            if debug:
                assert set(reply["result"]) >= {"tasks", "connections", "bindings"}, reply
            else:
                assert reply["error"]["code"] == -32601, reply
        finally:
            assert target.stop() == 0

    for debug in ("1", "0"):
        env = {**fuzz_env(tmp_path / "rt"), "AGENT_CHANNEL_ACP_DEBUG": debug}
        proc = await raw_agent(env, cwd=HERE)
        assert proc.stdin is not None and proc.stdout is not None
        wire = Wire(proc.stdout, proc.stdin, Pool())  # pyright: ignore[reportArgumentType]
        wire.start()
        reply = await wire.call("_agent_channel/debug", {}, "d", guard=GUARD)
        if debug == "1":
            assert set(reply["result"]) >= {"tasks", "threads", "sessions"}, reply
        else:
            assert reply["error"]["code"] == -32601, reply
        proc.stdin.close()
        async with asyncio.timeout(GUARD):
            assert await proc.wait() == 0
        await wire.stop()
