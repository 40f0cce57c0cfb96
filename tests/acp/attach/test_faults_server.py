"""Server faults (issue 10): the serving process killed (SIGKILL, SIGTERM) while clients
wait. Every client gets a clear end (an error or a closed connection, never a hang), the
stale discovery record is swept by the next server, and the console's link reconnects to
that successor. A second server refusing a live one's socket is
``test_attach_transport.py::test_a1_refuses_to_bind_over_a_live_server_and_replaces_a_stale_socket``.

Each test runs with its clients over the unix socket and over WebSocket (``[unix]``,
``[ws]``); over WebSocket the console's link is given the url and a token file, as
``attach --server URL --token-file F`` does, and the successor listens on the same port
with the same token file.

A request is made to be in flight for sure by stopping the server (SIGSTOP) before it is
sent; the signal under test is delivered while it waits.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import socket
import tempfile
from pathlib import Path

import anyio
import attach_harness
import pytest
from agent_channel_acp.operator._connect import remote_record
from agent_channel_acp.operator.console._link import Link
from agent_channel_acp.operator.console._state import State
from agent_channel_acp.wire import _discovery
from agent_channel_acp.wire._discovery import live_records, use_remote
from attach_harness import Client, Server, tool_ids
from conftest import GUARD
from faults import frame, half_open, real_serve

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("transport")]


def _rt() -> Path:
    rt = Path(tempfile.mkdtemp(prefix="acp-rt-"))
    rt.chmod(0o700)
    return rt


async def _in_flight(server: Server, c: Client, sid: str) -> asyncio.Task[object]:
    """A ``list`` request sent while the server is stopped: it cannot have been answered."""
    os.kill(server.proc.pid, signal.SIGSTOP)
    sent = len(c.rec.sent)
    task: asyncio.Task[object] = asyncio.ensure_future(c.ext("list"))
    await c.until(lambda: len(c.rec.sent) > sent)  # it is on the wire
    return task


async def _clear_end(task: asyncio.Task[object]) -> BaseException | object:
    """The request ends within the guard: an error or (SIGTERM) a last answer, never a hang."""
    with anyio.fail_after(GUARD):
        try:
            return await task
        except Exception as e:  # the connection closed under it
            return e


async def _closed(c: Client) -> None:
    """A later request on the dead connection fails promptly instead of hanging."""
    with anyio.fail_after(GUARD):
        with pytest.raises(Exception) as raised:
            await c.ext("list")
    assert not isinstance(raised.value, TimeoutError)


async def test_sigkill_while_clients_wait_ends_each_clearly_and_the_successor_sweeps() -> None:
    rt = _rt()
    async with real_serve("--input", "gate=never start", rt=rt) as server:
        sid = server.ids[0]
        waiting = await server.connect()
        await waiting.load(sid)
        await waiting.until(lambda: tool_ids(waiting, sid))  # waits on the stream, mid-tool
        asking = await server.connect()
        await asking.load(sid)
        await asking.until(lambda: asking.rec.states(sid))
        pending = await _in_flight(server, asking, sid)
        dead = server.proc.pid
        record, sock = rt / f"{dead}.json", rt / f"{dead}.sock"
        assert record.exists() and sock.exists()
        server.proc.kill()  # SIGKILL (also ends the stop)
        assert await server.proc.wait() == -signal.SIGKILL
        outcome = await _clear_end(pending)
        assert isinstance(outcome, Exception), outcome
        for c in (waiting, asking):
            await _closed(c)
        assert record.exists() and sock.exists()  # SIGKILL leaves them behind
        assert live_records(rt) == []  # a listing already sees the record is dead
    async with real_serve(rt=rt) as successor:
        assert not record.exists() and not sock.exists()  # swept at its start
        assert [r.pid for r in live_records(rt)] == [successor.proc.pid]


async def test_sigterm_while_clients_wait_ends_executions_tells_clients_and_closes() -> None:
    rt = _rt()
    async with real_serve("--input", "gate=never start", rt=rt) as server:
        sid = server.ids[0]
        c = await server.connect()
        await c.load(sid)
        await c.until(lambda: tool_ids(c, sid))
        await c.prompt(sid, "never read")
        pending = await _in_flight(server, c, sid)
        server.proc.send_signal(signal.SIGTERM)
        os.kill(server.proc.pid, signal.SIGCONT)
        await _clear_end(pending)  # answered before the end, or failed by it: no hang
        await c.until(lambda: c.rec.has(sid, "_agent_channel/session_ended"))
        methods = [f["method"] for f in c.rec.frames(sid)]
        assert methods[-2:] == ["_agent_channel/turn_state", "_agent_channel/session_ended"]
        ended = c.rec.frames(sid)[-1]["params"]
        assert [u["text"] for u in ended["undelivered"]] == ["never read"]  # A17
        with anyio.fail_after(GUARD):
            assert await server.proc.wait() == 0
        await _closed(c)
        assert list(rt.iterdir()) == []  # record and socket removed


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
async def test_the_console_link_reconnects_to_a_successor(
    sig: signal.Signals, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = _rt()
    monkeypatch.setenv("AGENT_CHANNEL_RUNTIME_DIR", str(rt))
    monkeypatch.setattr(_discovery, "_remote", [])  # what use_remote sets, restored after
    args = ("--input", "gate=never start", *_fixed_ws(rt))
    link = Link(State())
    async with real_serve(*args, rt=rt) as first:
        running = asyncio.ensure_future(link.run())
        try:
            with anyio.fail_after(GUARD * 3):
                await link.bound.wait()
            before = link.session_id
            first.proc.send_signal(sig)
            with anyio.fail_after(GUARD):
                await first.proc.wait()
            with anyio.fail_after(GUARD):
                while link.bound.is_set():  # noqa: ASYNC110 (the link's own observable state)
                    await asyncio.sleep(0.01)
            assert "disconnected" in link.state.connection
            async with real_serve(*args, rt=rt):
                with anyio.fail_after(GUARD * 3):
                    while not (link.bound.is_set() and link.attempts == 2):  # noqa: ASYNC110
                        await asyncio.sleep(0.01)
                assert link.session_id not in (None, before)  # the successor's execution
                assert link.state.connection == "connected"
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)


def _fixed_ws(rt: Path) -> tuple[str, ...]:
    """Over WebSocket: ``serve`` arguments for a port and a token both servers share, and
    the link pointed at them (``attach --server URL --token-file F``)."""
    if attach_harness.TRANSPORT != "ws":
        return ()
    with socket.socket() as s:  # a free port (released at once; the first server takes it)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = rt.parent / f"{rt.name}.token"
    token.write_text(secrets.token_urlsafe(32))
    token.chmod(0o600)
    use_remote(remote_record(f"ws://127.0.0.1:{port}/acp", str(token), None))
    return ("--ws", str(port), "--token-file", str(token))


async def test_sigterm_with_half_open_and_stalled_clients_still_exits() -> None:
    """Shutdown tells every client; one that reads nothing or sends nothing cannot hold the
    process up, and is closed rather than left waiting."""
    rt = _rt()
    async with real_serve(rt=rt) as server:
        sid = server.ids[0]
        c = await server.connect()
        await c.load(sid)
        silent = half_open(server)  # connected, never sends
        silent.settimeout(GUARD)
        deaf = half_open(server, small_buffer=True)
        deaf.sendall(frame(1, "initialize", {"protocolVersion": 1}))
        deaf.sendall(frame(2, "session/load", {"sessionId": sid, "cwd": "/", "mcpServers": []}))
        await c.prompt(sid, "big=400000")  # far more than the deaf socket's buffers hold
        await c.until(lambda: "results" in c.rec.texts(sid))
        server.proc.send_signal(signal.SIGTERM)
        with anyio.fail_after(GUARD):
            assert await server.proc.wait() == 0
        await c.until(lambda: c.rec.has(sid, "_agent_channel/session_ended"))
        assert silent.recv(1) == b""  # closed by the server, not left hanging
        deaf.close()
        silent.close()
        assert list(rt.iterdir()) == []
