"""Listener faults (issue 10): on TCP any local user can connect, token or not. Connections
that never present the token must not be able to lock the owner out: they wait in a
bounded pool of their own (``AUTH_PENDING``), apart from the ``MAX_CONNECTIONS`` served
ones, and when it is full the oldest waiting one is dropped for the newcomer.
"""

from __future__ import annotations

import asyncio
import json
import socket

import anyio
import pytest
from agent_channel_acp.hosting._listen import listen_tcp
from conftest import GUARD

pytestmark = pytest.mark.anyio


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while line := await reader.readline():
        writer.write(line)
        await writer.drain()


def _silent(host: str, port: int) -> socket.socket:
    """Connects and never sends: no token, ever."""
    return socket.create_connection((host, port))


async def _owner(host: str, port: int, token: str) -> bytes:
    """The token holder: initialize with the token, then one echoed line."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        hello = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": 1, "_meta": {"agent_channel.token": token}},
        }
        writer.write(json.dumps(hello).encode() + b"\n")
        writer.write(b"ping\n")
        with anyio.fail_after(GUARD):
            await reader.readline()  # the rewritten initialize, echoed
            return await reader.readline()
    finally:
        writer.close()


async def test_connections_without_the_token_cannot_lock_the_owner_out() -> None:
    listener = await listen_tcp(_echo, 0, max_connections=4)
    host, port, token = (listener.transport[k] for k in ("host", "port", "token"))
    flood: list[socket.socket] = []
    try:
        served = [await _owner(host, port, token)]
        with anyio.fail_after(GUARD):
            while listener.connections:  # noqa: ASYNC110 (its connection has ended)
                await asyncio.sleep(0.01)
        flood = [_silent(host, port) for _ in range(40)]  # more than every bound
        # accepted in order: the whole flood is in before the owner's second connection
        served.append(await _owner(host, port, token))  # still let in
        assert served == [b"ping\n", b"ping\n"]
    finally:
        for s in flood:
            s.close()
        await listener.close()


async def test_the_oldest_waiting_connection_is_dropped_for_a_newcomer_and_closed() -> None:
    from agent_channel_acp.hosting._listen import AUTH_PENDING

    listener = await listen_tcp(_echo, 0)
    host, port = listener.transport["host"], listener.transport["port"]
    first = _silent(host, port)
    first.settimeout(GUARD)
    rest = [_silent(host, port) for _ in range(AUTH_PENDING)]
    try:
        told = await asyncio.to_thread(first.makefile("rb").read)  # one frame, then closed
        frame = json.loads(told)
        assert frame["error"]["code"] == -32000
        assert "waiting" in frame["error"]["data"]["reason"]
        assert listener.connections == 0  # none of them is served
    finally:
        for s in (first, *rest):
            s.close()
        await listener.close()
