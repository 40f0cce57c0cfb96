"""Attach over WebSocket from every client: the bridge, the console, the library's
``attachable(ws=...)``, and the sockets' options (TCP_NODELAY) on the server's side."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from agent_channel_acp.wire._ws import connect
from conftest import GUARD, HERE
from serving import env, wait_for
from ws_serving import (
    call,
    hello,
    only_id,
    private_dir,
    request,
    texts,
    ws_serve,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def rt(tmp_path: Path) -> Path:
    return private_dir(tmp_path)


async def test_bridge_takes_server_ws_and_binds_its_first_session_new(rt: Path) -> None:
    from acp import spawn_agent_process
    from acp.client.connection import ClientSideConnection
    from conftest import Recorder

    with ws_serve(rt, "--ws", "0") as served:
        sid = only_id(served)
        rec = Recorder()
        args = ("bridge", sid[:8], "--server", served.url)
        async with spawn_agent_process(
            rec,
            sys.executable,
            "-m",
            "agent_channel_acp",
            *args,
            env=env(rt),
            cwd=str(HERE),
            transport_kwargs={"stderr": None},
            observers=[rec.observe],
        ) as (conn, _proc):
            assert isinstance(conn, ClientSideConnection)
            with anyio.fail_after(GUARD):
                await conn.initialize(protocol_version=1)
                session = await conn.new_session(cwd=str(HERE), mcp_servers=[])
            assert session.session_id == sid
            await rec.wait_until(
                lambda: any(
                    "Bound to" in u.get("content", {}).get("text", "") for u in rec.updates[sid]
                )
            )


async def test_the_console_attaches_over_ws_and_drives(
    rt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_channel_acp.operator._connect import remote_record
    from agent_channel_acp.operator.console._app import Console
    from agent_channel_acp.operator.console._widgets import EntryView
    from agent_channel_acp.wire._discovery import use_remote

    monkeypatch.setenv("AGENT_CHANNEL_RUNTIME_DIR", str(rt))
    with ws_serve(rt, "--ws", "0") as served:
        sid = only_id(served)
        use_remote(remote_record(served.url, None, None))  # what `attach --server URL` does
        try:
            app = Console()
            async with app.run_test(size=(120, 40)) as pilot:

                async def until(check: Any) -> None:
                    with anyio.fail_after(GUARD * 3):
                        while not check():
                            await pilot.pause(0.02)

                def said(kind: str) -> str:
                    return "\n".join(
                        str(v.content) for v in app.query(EntryView) if v.entry.kind == kind
                    )

                await until(lambda: app.state.role == "driver")
                await until(lambda: "briefing" in said("user"))
                await pilot.click("#input")
                await pilot.press(*"over the socket")
                await pilot.press("enter")
                await until(lambda: "over the socket" in said("queued") + said("operator"))
                seen = lambda: "over the socket" in texts(served, sid)  # noqa: E731
                await asyncio.to_thread(wait_for, seen, "the agent read the message")
        finally:
            use_remote(None)


# -- in process: the library's way in, and the sockets' options -----------------------------


async def test_attachable_ws_serves_the_programs_executions_behind_the_token(
    rt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_channel_acp import attachable

    monkeypatch.setenv("AGENT_CHANNEL_RUNTIME_DIR", str(rt))
    release = asyncio.Event()

    async def body() -> None:
        await release.wait()

    async with attachable(ws=0) as served:
        url = served.ws_url
        assert url is not None and url.startswith("ws://127.0.0.1:")
        task = asyncio.ensure_future(served.run(body, title="library job"))
        token = json.loads(served.record.read_text())["ws"]["token"]
        ws = await connect(url)
        assert (await call(ws, 1, "initialize", hello(token)))["result"]
        listed: dict[str, Any] = {}
        with anyio.fail_after(GUARD):
            while not listed.get("executions"):
                listed = (await call(ws, 2, "_agent_channel/list", {}))["result"]
                await asyncio.sleep(0.01)
        assert listed["executions"][0]["title"] == "library job"
        await ws.close()
        release.set()
        await task


async def test_accepted_tcp_and_ws_sockets_have_nagle_off() -> None:
    """TCP_NODELAY on what the listeners accept (without it a second small answer waited
    for the first's delayed ACK, about 40 ms): seen on the server's own sockets."""
    from agent_channel_acp.hosting._asgi import WsEndpoint, WsOptions
    from agent_channel_acp.hosting._listen import listen_tcp

    seen: list[int] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        seen.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.write(b'{"jsonrpc":"2.0","id":1,"result":{}}\n')
        await writer.drain()

    listener = await listen_tcp(handler, 0)
    t = listener.transport
    assert t["kind"] == "tcp"
    try:
        reader, writer = await asyncio.open_connection(t["host"], t["port"])
        writer.write(request(1, "initialize", hello(t.get("token"))) + b"\n")
        with anyio.fail_after(GUARD):
            await reader.readline()
        writer.close()
    finally:
        await listener.close()
    assert seen == [1]
    endpoint = WsEndpoint(handler, WsOptions(0))
    await endpoint.start()
    try:
        ws = await connect(endpoint.transport["url"])
        server = endpoint._server  # pyright: ignore[reportPrivateUsage]
        (conn,) = server.server_state.connections
        sock = conn.transport.get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) <= 2 * (128 << 10)
        await ws.close()
    finally:
        await endpoint.close()
