"""Attach-mode transport: discovery (A1) and authentication (A2).

Black-box: the server is a subprocess hosting a stand-in attach server
(``transport_stub``: the real listener, record and shutdown of ``serve``, with a
stdio-mode server per connection), clients are the SDK's client side over real
unix and TCP sockets. The other-uid client is a forked child that drops to uid
65534 (``nobody``) before it connects: the suite runs as root, and the socket's
directory and mode are opened up for that test so only the uid check stands in
its way.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError
from acp.client.connection import ClientSideConnection
from conftest import GUARD, HERE, NOBODY, Recorder, agent_env, as_other_uid
from serving import first_line

pytestmark = pytest.mark.anyio

TOKEN_KEY = "agent_channel.token"


def present(path: Path) -> bool:
    return os.path.lexists(path)


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def rt(tmp_path: Path) -> Path:
    """The runtime directory the server is told to use (it makes it)."""
    return tmp_path / "rt"


@contextmanager
def stub(rt: Path, *args: str) -> Iterator[tuple[subprocess.Popen[str], dict[str, Any]]]:
    """Start the stand-in server; yield it with its announced record; stop it at the end."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "transport_stub", *args],
        env=agent_env(AGENT_CHANNEL_RUNTIME_DIR=str(rt)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=HERE,
    )
    try:
        assert proc.stdout is not None
        line = first_line(proc)
        assert line, f"the server did not start: {proc.stderr.read() if proc.stderr else ''}"
        yield proc, json.loads(line)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(GUARD)
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                f.close()


def fails(rt: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the server expecting it to refuse to start."""
    return subprocess.run(
        [sys.executable, "-m", "transport_stub", *args],
        env=agent_env(AGENT_CHANNEL_RUNTIME_DIR=str(rt)),
        capture_output=True,
        text=True,
        cwd=HERE,
        timeout=GUARD,
    )


@asynccontextmanager
async def client(transport: dict[str, Any]) -> AsyncIterator[ClientSideConnection]:
    if transport["kind"] == "unix":
        reader, writer = await asyncio.open_unix_connection(transport["path"])
    else:
        reader, writer = await asyncio.open_connection(transport["host"], transport["port"])
    conn = ClientSideConnection(Recorder(), writer, reader)
    try:
        yield conn
    finally:
        await conn.close()
        writer.close()


async def initialized(transport: dict[str, Any], **meta: Any) -> None:
    """A client that initializes and starts a session (proves the server serves)."""
    async with client(transport) as conn:
        with anyio.fail_after(GUARD):
            await conn.initialize(protocol_version=1, **meta)
            session = await conn.new_session(cwd=str(HERE), mcp_servers=[])
        assert session.session_id


# -- A1: discovery -------------------------------------------------------------------------


async def test_a1_record_0600_in_a_0700_dir_socket_0600_removed_at_sigterm(rt: Path) -> None:
    with stub(rt) as (proc, announced):
        record_path = rt / f"{proc.pid}.json"
        assert mode(rt) == 0o700
        assert mode(record_path) == 0o600
        record = json.loads(record_path.read_text())
        assert record["pid"] == proc.pid
        assert record["transport"]["kind"] == "unix"
        sock = Path(record["transport"]["path"])
        assert sock.parent == rt
        assert stat.S_ISSOCK(os.lstat(sock).st_mode) and mode(sock) == 0o600
        assert record["executions"] == [{"id": "stub", "title": "stub", "status": "running"}]
        assert announced["transport"] == record["transport"]
        assert [n for n in names(rt) if n.startswith(".")] == []  # no temp left
        await initialized(record["transport"])
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(GUARD) == 0
        assert not present(record_path) and not present(sock)


async def test_a1_records_of_dead_pids_are_swept_with_their_sockets(rt: Path) -> None:
    from agent_channel_acp.wire._discovery import live_records

    with stub(rt) as (dead, _):
        dead.kill()
        dead.wait(GUARD)
    dead_record = rt / f"{dead.pid}.json"
    dead_socket = rt / f"{dead.pid}.sock"
    assert present(dead_record) and present(dead_socket)  # SIGKILL leaves them
    with stub(rt) as (live, _):  # a server that starts sweeps them
        assert not present(dead_record) and not present(dead_socket)
        with stub(rt) as (other, _):
            other.kill()
            other.wait(GUARD)
        assert present(rt / f"{other.pid}.json")
        assert [r.pid for r in live_records(rt)] == [live.pid]  # listing sweeps too
        assert not present(rt / f"{other.pid}.json")


def test_a1_a_runtime_dir_open_to_others_or_not_ours_is_refused(rt: Path) -> None:
    rt.mkdir(mode=0o700)
    rt.chmod(0o755)
    run = fails(rt)
    assert run.returncode != 0
    assert "mode 0755" in run.stderr and "0700" in run.stderr, run.stderr
    rt.chmod(0o700)
    os.chown(rt, NOBODY, NOBODY)
    run = fails(rt)
    assert run.returncode != 0
    assert f"belongs to uid {NOBODY}" in run.stderr, run.stderr
    assert list(rt.iterdir()) == []


def test_a1_refuses_to_bind_over_a_path_that_is_not_a_socket(rt: Path, tmp_path: Path) -> None:
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    run = fails(rt, "--socket", str(target))
    assert run.returncode != 0
    assert "is not a socket" in run.stderr, run.stderr
    assert target.read_text() == "keep me"


async def test_a1_refuses_to_bind_over_a_live_server_and_replaces_a_stale_socket(
    rt: Path, tmp_path: Path
) -> None:
    path = tmp_path / "agent.sock"
    with stub(rt, "--socket", str(path)) as (first, record):
        run = fails(rt, "--socket", str(path))
        assert run.returncode != 0
        assert "already listening" in run.stderr, run.stderr
        await initialized(record["transport"])  # the first server still serves
        first.kill()
        first.wait(GUARD)
    assert stat.S_ISSOCK(os.lstat(path).st_mode)  # stale: nobody answers on it
    with stub(rt, "--socket", str(path)) as (_, record):
        await initialized(record["transport"])


# -- A2: authentication --------------------------------------------------------------------


async def test_a2_a_peer_of_another_uid_gets_an_error_frame_and_is_closed(
    rt: Path, open_dir: Path
) -> None:
    path = open_dir / "agent.sock"
    with stub(rt, "--socket", str(path)) as (proc, record):
        path.chmod(0o666)  # let the other uid reach the socket: the uid check alone must refuse
        got = await asyncio.to_thread(as_other_uid, str(path))
        assert got.startswith("ok "), got
        frames = [json.loads(line) for line in got[3:].splitlines()]  # EOF ended the read: closed
        assert len(frames) == 1
        error = frames[0]["error"]
        assert error["code"] == -32000
        assert f"peer uid {NOBODY}" in error["data"]["reason"]
        await initialized(record["transport"])  # our own uid is served
        assert proc.poll() is None


async def test_a2_tcp_listens_on_loopback_and_wants_the_token_in_initialize(rt: Path) -> None:
    with stub(rt, "--port", "0") as (proc, _):
        record = json.loads((rt / f"{proc.pid}.json").read_text())
        transport = record["transport"]
        assert transport["kind"] == "tcp" and transport["host"] == "127.0.0.1"
        token = transport["token"]
        assert isinstance(token, str) and len(token) >= 32

        async with client(transport) as conn:  # no token: -32000 for every request, still open
            with anyio.fail_after(GUARD):
                with pytest.raises(RequestError) as e:
                    await conn.initialize(protocol_version=1)
                assert e.value.code == -32000
                with pytest.raises(RequestError) as e:
                    await conn.new_session(cwd=str(HERE), mcp_servers=[])
                assert e.value.code == -32000
                await conn.initialize(protocol_version=1, **{TOKEN_KEY: token})  # then in
                assert (await conn.new_session(cwd=str(HERE), mcp_servers=[])).session_id

        reader, writer = await asyncio.open_connection(transport["host"], transport["port"])
        wrong = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": 1, "_meta": {TOKEN_KEY: "x" * len(token)}},
        }
        writer.write(json.dumps(wrong).encode() + b"\n")
        with anyio.fail_after(GUARD):
            frame = json.loads(await reader.readline())
            assert frame["id"] == 1 and frame["error"]["code"] == -32000
            assert "does not match" in frame["error"]["data"]["reason"]
            assert await reader.read() == b""  # closed
        writer.close()

        await initialized(transport, **{TOKEN_KEY: token})
        assert proc.poll() is None


async def test_a1_a_listener_serves_at_most_its_stated_number_of_connections(
    tmp_path: Path,
) -> None:
    """In-process, with an echo handler: the bound is the listener's, whatever it serves."""
    from agent_channel_acp.hosting._listen import MAX_CONNECTIONS, listen_unix

    assert MAX_CONNECTIONS == 256  # the number the README states

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            writer.write(line)
            await writer.drain()

    listener = await listen_unix(echo, tmp_path / "s.sock", max_connections=2)
    path = str(tmp_path / "s.sock")
    try:
        with anyio.fail_after(GUARD):
            served = [await asyncio.open_unix_connection(path) for _ in range(2)]
            for reader, writer in served:
                writer.write(b"ping\n")
                assert await reader.readline() == b"ping\n"
            reader, writer = await asyncio.open_unix_connection(path)  # one too many
            frame = json.loads(await reader.readline())
            assert frame["error"]["code"] == -32603
            assert "at once" in frame["error"]["data"]["reason"]
            assert await reader.read() == b""
            writer.close()
            served[0][1].close()  # a slot frees up
            while listener.connections > 1:  # noqa: ASYNC110 (polling the observable count)
                await asyncio.sleep(0.01)
            reader, writer = await asyncio.open_unix_connection(path)
            writer.write(b"again\n")
            assert await reader.readline() == b"again\n"
            writer.close()
            served[1][1].close()
    finally:
        await listener.close()


def test_a1_the_default_runtime_dir_is_per_user_under_xdg_or_the_temp_dir(tmp_path: Path) -> None:
    code = "from agent_channel_acp.wire._discovery import runtime_dir; print(runtime_dir())"

    def where(**extra: str) -> Path:
        env = {k: v for k, v in agent_env(**extra).items() if k != "AGENT_CHANNEL_RUNTIME_DIR"}
        run = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=GUARD
        )
        assert run.returncode == 0, run.stderr
        return Path(run.stdout.strip())

    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    assert where(XDG_RUNTIME_DIR=str(xdg)) == xdg / "agent-channel"
    assert mode(xdg / "agent-channel") == 0o700
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    assert where(TMPDIR=str(tmp)) == tmp / f"agent-channel-{os.getuid()}"
    assert mode(tmp / f"agent-channel-{os.getuid()}") == 0o700
