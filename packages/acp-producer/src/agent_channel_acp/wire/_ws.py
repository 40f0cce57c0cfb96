"""A small WebSocket client (RFC 6455) on asyncio streams, for the verbs, the bridge, the console.

Light on purpose (the contract ``wire-and-verbs-light``: no SDK, no pydantic here, and
``websockets`` alone costs 0.2 s to import): the opening handshake (its accept key
checked), masked client frames, text and binary messages, fragmentation, ping/pong, the
closing handshake, and a message size limit. ``wss://`` through :mod:`ssl` (``cafile`` for
a self-signed certificate). :func:`ws_streams` gives a client the pair of asyncio streams
every client here already speaks newline-delimited JSON-RPC on: one line per message
(text, or binary for a line that is not UTF-8).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import socket
import ssl
import struct
from urllib.parse import urlsplit

MAX_MESSAGE = 32 << 20
"""Longest message accepted from the server (its frames are at most 16 MiB)."""

HANDSHAKE_LIMIT = 16 << 10
"""Longest handshake answer read; also the socket reader's limit, so it stops reading
past twice this (frames are read with ``readexactly``, which any limit allows)."""

PAIR_BUFFER = 64 << 10
"""Kernel buffers of the socket pair to the app (doubled by Linux): an app that stops
reading stops the WebSocket soon, and the server sees a slow client."""

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_CONT, _TEXT, _BINARY, _CLOSE, _PING, _PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


class WsError(ConnectionError):
    """The WebSocket could not be opened, or broke the protocol."""


def _mask(data: bytes, key: bytes) -> bytes:
    n = len(data)
    if not n:
        return data
    k = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "little") ^ int.from_bytes(k, "little")).to_bytes(n, "little")


def _frame(opcode: int, payload: bytes) -> bytes:
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    key = os.urandom(4)
    return head + key + _mask(payload, key)


class WsClient:
    """One open WebSocket: :meth:`send` and :meth:`recv` messages, :meth:`close` it."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, max_size: int
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._max = max_size
        self._closing = False

    async def send(self, data: bytes, *, text: bool = True) -> None:
        if self._closing:
            raise ConnectionError("the WebSocket is closed")
        self._writer.write(_frame(_TEXT if text else _BINARY, data))
        await self._writer.drain()

    async def recv(self) -> bytes | None:
        """The next whole message's payload, or None once the server closed."""
        parts: list[bytes] = []
        size = 0
        while True:
            try:
                head = await self._reader.readexactly(2)
            except (asyncio.IncompleteReadError, OSError):
                return None
            fin, opcode = head[0] & 0x80, head[0] & 0x0F
            n = head[1] & 0x7F
            if n == 126:
                (n,) = struct.unpack("!H", await self._reader.readexactly(2))
            elif n == 127:
                (n,) = struct.unpack("!Q", await self._reader.readexactly(8))
            key = await self._reader.readexactly(4) if head[1] & 0x80 else b""
            if opcode >= _CLOSE:  # a control frame: small, never fragmented
                if n > 125:
                    raise WsError("a control frame over 125 bytes")
                payload = await self._reader.readexactly(n)
                payload = _mask(payload, key) if key else payload
                if opcode == _PING:
                    self._writer.write(_frame(_PONG, payload))
                elif opcode == _CLOSE:
                    await self._close_back(payload[:2])
                    return None
                continue
            size += n
            if size > self._max:
                await self.close(1009)
                raise WsError(f"a message over {self._max} bytes")
            payload = await self._reader.readexactly(n)
            parts.append(_mask(payload, key) if key else payload)
            if opcode not in (_CONT, _TEXT, _BINARY):
                raise WsError(f"an unknown opcode {opcode}")
            if fin:
                return b"".join(parts)

    async def _close_back(self, code: bytes) -> None:
        if not self._closing:
            self._closing = True
            with contextlib.suppress(OSError):
                self._writer.write(_frame(_CLOSE, code))
                await self._writer.drain()
        self._writer.close()

    async def close(self, code: int = 1000) -> None:
        """Send a close frame (once) and close the connection."""
        if not self._closing:
            self._closing = True
            with contextlib.suppress(OSError):
                self._writer.write(_frame(_CLOSE, struct.pack("!H", code)))
                async with asyncio.timeout(1.0):
                    await self._writer.drain()
        self._writer.close()


async def connect(
    url: str,
    *,
    cafile: str | None = None,
    origin: str | None = None,
    max_size: int = MAX_MESSAGE,
) -> WsClient:
    """Open a WebSocket to ``url`` (``ws://`` or ``wss://``); :class:`WsError` if refused."""
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        raise WsError(f"not a ws:// or wss:// url: {url!r}")
    tls = parts.scheme == "wss"
    port = parts.port or (443 if tls else 80)
    context: ssl.SSLContext | None = None
    if tls:
        context = ssl.create_default_context(cafile=cafile)
    reader, writer = await asyncio.open_connection(
        parts.hostname, port, ssl=context, limit=HANDSHAKE_LIMIT
    )
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    key = base64.b64encode(os.urandom(16))
    netloc = parts.netloc.rpartition("@")[2]
    lines = [
        f"GET {parts.path or '/'}{'?' + parts.query if parts.query else ''} HTTP/1.1",
        f"Host: {netloc}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key.decode()}",
        "Sec-WebSocket-Version: 13",
    ]
    if origin is not None:
        lines.append(f"Origin: {origin}")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    try:
        answer = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError) as e:
        writer.close()
        raise WsError(f"no WebSocket handshake from {url}: {e}") from None
    status, *headers = answer.decode("latin-1").split("\r\n")
    fields = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in headers if h)}
    if status.split(" ")[1:2] != ["101"]:
        writer.close()
        raise WsError(f"the server refused the WebSocket: {status.strip()}")
    expected = base64.b64encode(hashlib.sha1(key + _GUID).digest()).decode()
    if fields.get("sec-websocket-accept") != expected:
        writer.close()
        raise WsError("the server's handshake does not answer our key")
    return WsClient(reader, writer, max_size=max_size)


_pumps: set[asyncio.Task[None]] = set()


async def ws_streams(
    url: str, *, cafile: str | None = None, reader: asyncio.StreamReader | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Newline-delimited streams over a WebSocket: each line written goes as one text
    message, each message read comes as one line; closing the writer closes the socket."""
    ws = await connect(url, cafile=cafile)
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    for s in (ours, theirs):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, PAIR_BUFFER)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, PAIR_BUFFER)
    reader = reader or asyncio.StreamReader(limit=MAX_MESSAGE, loop=loop)
    protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
    transport, _ = await loop.create_connection(lambda: protocol, sock=ours)
    pipe_reader, pipe_writer = await asyncio.open_connection(sock=theirs, limit=MAX_MESSAGE)
    task = loop.create_task(_pump(ws, pipe_reader, pipe_writer))
    _pumps.add(task)
    task.add_done_callback(_pumps.discard)
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)


def _utf8(line: bytes) -> bool:
    """Whether ``line`` may go as a text message (RFC 6455 8.1: UTF-8 only; a server closes
    the WebSocket on one that is not). Other lines go as binary messages, so the server's
    wire answers them as it answers the same bytes on a socket (-32700), and goes on."""
    try:
        line.decode()
    except UnicodeDecodeError:
        return False
    return True


async def _pump(ws: WsClient, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    async def up() -> None:
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
                return
            await ws.send(line[:-1], text=_utf8(line))

    async def down() -> None:
        while (message := await ws.recv()) is not None:
            writer.write(message.replace(b"\n", b" ") + b"\n")
            await writer.drain()

    tasks = {asyncio.ensure_future(up()), asyncio.ensure_future(down())}
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await ws.close()
        writer.close()
