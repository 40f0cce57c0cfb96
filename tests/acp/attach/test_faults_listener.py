"""Listener faults (issue 10): on TCP, and over WebSocket, any local user can connect, token
or not. Connections that never present the token must not be able to lock the owner out:
they wait in a bounded pool of their own (``AUTH_PENDING``), apart from the
``MAX_CONNECTIONS`` served ones, and when it is full the oldest waiting one is dropped for
the newcomer. Until it presents the token a peer may send at most ``AUTH_BYTES`` and take
at most ``AUTH_SECONDS``.

Each rule runs twice, ``[tcp]`` (the listener's own socket) and ``[ws]`` (a WebSocket
endpoint in front of it, each WebSocket adopted past its handshake), with an echo handler
in this process. The unix socket has no such rules: its peer is our own uid
(``SO_PEERCRED``) and is served at once (``test_attach_transport.py``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from agent_channel_acp.hosting import _listen
from agent_channel_acp.hosting._listen import AUTH_BYTES, AUTH_PENDING, Listener, listen_tcp
from agent_channel_acp.wire._ws import WsClient, connect
from conftest import GUARD

pytestmark = pytest.mark.anyio

TOKEN_KEY = "agent_channel.token"


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while line := await reader.readline():
        writer.write(line)
        await writer.drain()


class Peer:
    """One client connection: lines (frames) out, lines in, over TCP or a WebSocket."""

    def __init__(
        self, tcp: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None, ws: WsClient | None
    ) -> None:
        self._tcp = tcp
        self._ws = ws

    async def send(self, line: bytes) -> None:
        if self._ws is not None:
            await self._ws.send(line)
        else:
            assert self._tcp is not None
            self._tcp[1].write(line + b"\n")
            await self._tcp[1].drain()

    async def recv(self) -> bytes | None:
        """The next frame, or None once the server closed."""
        if self._ws is not None:
            return await self._ws.recv()
        assert self._tcp is not None
        line = await self._tcp[0].readline()
        return line.rstrip(b"\n") if line else None

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        elif self._tcp is not None:
            self._tcp[1].close()


@dataclass
class Door:
    """A listener and the way in under test."""

    kind: str
    listener: Listener
    token: str
    where: Any

    async def peer(self) -> Peer:
        """Connected (over WebSocket: past the handshake, so adopted), nothing sent yet."""
        if self.kind == "ws":
            return Peer(None, await connect(self.where))
        host, port = self.where
        return Peer(await asyncio.open_connection(host, port), None)

    def hello(self, token: str | None = None) -> bytes:
        params = {"protocolVersion": 1, "_meta": {TOKEN_KEY: token or self.token}}
        return json.dumps(
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
        ).encode()

    async def owner(self) -> bytes | None:
        """The token holder: initialize with the token, then one echoed line."""
        p = await self.peer()
        try:
            await p.send(self.hello())
            await p.send(b"ping")
            with anyio.fail_after(GUARD):
                echoed = await p.recv()  # the rewritten initialize, echoed
                assert echoed is not None and TOKEN_KEY.encode() not in echoed
                return await p.recv()
        finally:
            await p.close()


@asynccontextmanager
async def door(kind: str, max_connections: int = _listen.MAX_CONNECTIONS) -> AsyncIterator[Door]:
    if kind == "tcp":
        listener = await listen_tcp(_echo, 0, max_connections=max_connections)
        t = listener.transport
        assert t["kind"] == "tcp"
        try:
            yield Door(kind, listener, t.get("token") or "", (t["host"], t["port"]))
        finally:
            await listener.close()
        return
    from agent_channel_acp.hosting._asgi import WsEndpoint, WsOptions

    endpoint = WsEndpoint(_echo, WsOptions(0))
    endpoint.listener._max = max_connections  # pyright: ignore[reportPrivateUsage]
    await endpoint.start()
    try:
        t = endpoint.transport
        yield Door(kind, endpoint.listener, t.get("token") or "", t["url"])
    finally:
        await endpoint.close()


@pytest.fixture(params=["tcp", "ws"])
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


async def _until(check: Any) -> None:
    """Poll the listener's own counts (an observable state) under the hang guard."""
    with anyio.fail_after(GUARD):
        while not check():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


async def test_connections_without_the_token_cannot_lock_the_owner_out(kind: str) -> None:
    async with door(kind, max_connections=4) as d:
        flood: list[Peer] = []
        try:
            served = [await d.owner()]
            await _until(lambda: d.listener.connections == 0)  # its connection has ended
            flood = [await d.peer() for _ in range(40)]  # more than every bound
            # accepted in order: the whole flood is in before the owner's second connection
            await _until(lambda: len(d.listener._conns) >= AUTH_PENDING)  # pyright: ignore[reportPrivateUsage]
            served.append(await d.owner())  # still let in
            assert served == [b"ping", b"ping"]
        finally:
            for p in flood:
                await p.close()


async def test_the_oldest_waiting_connection_is_dropped_for_a_newcomer_and_closed(
    kind: str,
) -> None:
    async with door(kind) as d:
        first = await d.peer()
        rest: list[Peer] = []
        try:
            rest = [await d.peer() for _ in range(AUTH_PENDING)]
            with anyio.fail_after(GUARD):
                told = await first.recv()  # one frame, then closed
                assert told is not None
                assert await first.recv() is None
            frame = json.loads(told)
            assert frame["error"]["code"] == -32000
            assert "waiting" in frame["error"]["data"]["reason"]
            assert d.listener.connections == 0  # none of them is served
        finally:
            for p in (first, *rest):
                await p.close()


async def _refusal(p: Peer) -> dict[str, Any]:
    """The frames up to the close: answers to what was sent, then the refusal; the last."""
    last: bytes | None = None
    with anyio.fail_after(GUARD * 3):
        while (got := await p.recv()) is not None:
            last = got
    assert last is not None
    return json.loads(last)


async def test_one_frame_over_the_byte_limit_before_the_token_closes_the_connection(
    kind: str,
) -> None:
    async with door(kind) as d:
        p = await d.peer()
        try:
            await p.send(b"x" * (AUTH_BYTES + (64 << 10)))  # no newline before the limit
            frame = await _refusal(p)
            assert "too much input before the token" in frame["error"]["data"]["reason"]
            assert await d.owner() == b"ping"
        finally:
            await p.close()


async def test_many_small_frames_over_the_byte_limit_before_the_token_close_it(
    kind: str,
) -> None:
    """The limit counts every byte before the token, not only an unfinished line: a peer
    that keeps sending requests without it is cut off too (each one is answered -32000
    until then)."""
    async with door(kind) as d:
        p = await d.peer()
        pad = "p" * 1000
        line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"pad": pad}})
        sending: asyncio.Task[None] | None = None
        try:

            async def flood() -> None:  # just past the limit: all of it is read (no RST)
                for _ in range(AUTH_BYTES // len(line) + 1):
                    await p.send(line.encode())

            sending = asyncio.ensure_future(flood())
            frame = await _refusal(p)
            assert "too much input before the token" in frame["error"]["data"]["reason"]
            assert d.listener.connections == 0
        finally:
            if sending is not None:
                sending.cancel()
                await asyncio.gather(sending, return_exceptions=True)
            await p.close()


async def test_no_token_in_time_closes_the_connection(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_listen, "AUTH_SECONDS", 0.2)  # the limit, shortened for the test
    async with door(kind) as d:
        p = await d.peer()
        try:
            frame = await _refusal(p)
            assert "no token presented in time" in frame["error"]["data"]["reason"]
        finally:
            await p.close()


async def test_connections_that_never_make_a_request_cannot_lock_the_owner_out(
    kind: str,
) -> None:
    """Before its first HTTP request (the WebSocket handshake) a connection is not adopted
    by the listener, so the token pool does not hold it: bare TCP connections that never
    send a byte wait in a pool of the same bound of their own, the oldest closed for a
    newcomer, and the token holder still gets in."""
    if kind == "tcp":
        pytest.skip("a TCP peer has no request before the token: the token pool holds it")
    async with door(kind) as d:
        host, port = d.where.split("//")[1].split("/")[0].split(":")
        first = await asyncio.open_connection(host, int(port))
        flood: list[asyncio.StreamWriter] = []
        try:
            for _ in range(AUTH_PENDING + 8):  # never a byte: no request, no handshake
                flood.append((await asyncio.open_connection(host, int(port)))[1])
            with anyio.fail_after(GUARD):
                assert await first[0].read() == b""  # closed by the server for a newcomer
            assert await d.owner() == b"ping"
        finally:
            first[1].close()
            for w in flood:
                w.close()


async def test_a_connection_without_a_request_in_time_is_closed(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if kind == "tcp":
        pytest.skip("a TCP peer has no request before the token: the token's time limit")
    monkeypatch.setattr(_listen, "AUTH_SECONDS", 0.2)  # the limit, shortened for the test
    async with door(kind) as d:
        host, port = d.where.split("//")[1].split("/")[0].split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            with anyio.fail_after(GUARD):
                assert await reader.read() == b""
        finally:
            writer.close()
