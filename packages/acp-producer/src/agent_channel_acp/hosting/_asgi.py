"""Attach mode over WebSocket: an ASGI app on uvicorn, in the serving process's own loop.

Each WebSocket accepted at ``/acp`` becomes one end of a ``socket.socketpair()``; the
other end is handed to a :class:`~._listen.Listener` (:meth:`~._listen.Listener.adopt`),
so a WebSocket peer meets exactly what a TCP peer meets: the token in ``initialize``, the
pre-token byte and time limits, the connection limits and ``serve_connection``'s guards.
One JSON-RPC frame per text message each way. A disconnect ends the connection, never an
execution.

Browser protection: a request whose ``Host`` does not name this listener is refused
(DNS rebinding), and so is one carrying an ``Origin`` other than the listener's own
(a page elsewhere must not reach a local agent). Loopback only, unless TLS is given.
Needs the ``remote`` extra (uvicorn); imported only when ``--ws`` is.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import secrets
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..wire._discovery import TokenFileError, read_token_file
from ..wire._transport import MAX_FRAME
from . import _listen
from ._listen import Handler, Listener, ListenError, adopting
from ._page import serve_page

if TYPE_CHECKING:
    from ..wire._frames import WsTransport

log = logging.getLogger("agent_channel_acp")

PATH = "/acp"
"""Where the WebSocket is served (``/`` and the rest are the page's)."""

SEND_BUFFER = 128 << 10
"""Kernel send buffer of the listener's sockets and of each socket pair (doubled by Linux
from half this): loopback's auto-tuned megabytes would hide a client that never reads."""

READ_CHUNK = 64 << 10
"""What the pump reads off the socket pair at once (its reader pauses at twice this)."""

MAX_OUT = 2 * MAX_FRAME
"""Longest frame the server may send one client (beyond it the WebSocket is closed)."""

HTTP_CONNECTIONS = 512
"""HTTP and WebSocket connections uvicorn holds at once (beyond them: 503)."""


@dataclass(frozen=True, slots=True)
class WsOptions:
    """What ``serve --ws`` was given."""

    port: int
    host: str = "127.0.0.1"
    tls_cert: str | None = None
    tls_key: str | None = None
    token_file: str | None = None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _token(path: str) -> str:
    try:
        return read_token_file(path)
    except TokenFileError as e:
        raise ListenError(str(e)) from None


def _bind(options: WsOptions) -> socket.socket:
    if not is_loopback(options.host) and options.tls_cert is None:
        raise ListenError(
            f"refusing to listen on {options.host} without TLS: beyond loopback, give "
            "--tls-cert and --tls-key (or listen on 127.0.0.1)"
        )
    if (options.tls_cert is None) != (options.tls_key is None):
        raise ListenError("TLS needs both --tls-cert and --tls-key")
    try:
        infos = socket.getaddrinfo(options.host, options.port, type=socket.SOCK_STREAM)
    except OSError as e:
        raise ListenError(f"cannot resolve {options.host}: {e}") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER // 2)  # inherited
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited on Linux
        sock.bind(address)
    except OSError as e:
        sock.close()
        where = f"{options.host}:{options.port}"
        raise ListenError(f"cannot listen on {where}: {e.strerror or e}") from None
    sock.listen(128)
    sock.setblocking(False)
    return sock


class WsEndpoint:
    """The WebSocket listener: uvicorn on our socket, each WebSocket adopted by a listener."""

    def __init__(self, handler: Handler, options: WsOptions) -> None:
        token = _token(options.token_file) if options.token_file else None
        self._sock = _bind(options)
        port = int(self._sock.getsockname()[1])
        tls = options.tls_cert is not None
        shown = f"[{options.host}]" if ":" in options.host else options.host
        url = f"{'wss' if tls else 'ws'}://{shown}:{port}{PATH}"
        token = token or secrets.token_urlsafe(32)
        self.transport: WsTransport = {"kind": "ws", "url": url, "token": token}
        """What the discovery record says about it (the token included)."""
        self.listener: Listener = adopting(handler, self.transport, token)
        names = {"127.0.0.1", "localhost", "[::1]", shown}
        self._hosts = {f"{n}:{port}".encode() for n in names}
        scheme = "https" if tls else "http"
        self._origins = {f"{scheme}://{n}:{port}".encode() for n in names}
        self._options = options
        self._server: Any = None

    async def start(self) -> None:
        import uvicorn

        config = uvicorn.Config(
            self.app,
            http=_guarded_http(_Idle()),
            interface="asgi3",
            lifespan="off",
            log_config=None,
            access_log=False,
            server_header=False,
            proxy_headers=False,
            ws_max_size=2 * MAX_FRAME + 2,  # the transport answers an oversized frame itself
            limit_concurrency=HTTP_CONNECTIONS,
            timeout_graceful_shutdown=1,
            ssl_certfile=self._options.tls_cert,
            ssl_keyfile=self._options.tls_key,
        )
        config.load()
        server = uvicorn.Server(config)
        server.lifespan = config.lifespan_class(config)
        await server.startup(sockets=[self._sock])
        self._server = server

    def stop_accepting(self) -> None:
        if self._server is not None:
            for s in self._server.servers:
                s.close()

    async def close(self) -> None:
        """End every WebSocket and the listener (after the executions have ended)."""
        await self.listener.close()
        if self._server is not None:
            server, self._server = self._server, None
            server.should_exit = True
            await server.shutdown()
        self._sock.close()

    # -- the ASGI app ------------------------------------------------------------------

    def _allowed(self, scope: Any) -> str | None:
        """Why this request is refused, or None."""
        headers = dict(scope.get("headers") or [])
        host = headers.get(b"host")
        if host not in self._hosts:
            return f"Host {host!r} does not name this listener"
        origin = headers.get(b"origin")
        if origin is not None and origin not in self._origins:
            return f"Origin {origin!r} is not this listener's"
        return None

    async def app(self, scope: Any, receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            return
        why = self._allowed(scope)
        if kind == "http":
            if why is not None:
                log.warning("refusing an HTTP request: %s", why)
                await _forbidden(send)
                return
            await serve_page(scope, receive, send)
            return
        if (await receive())["type"] != "websocket.connect":
            return
        if why is None and scope.get("path") != PATH:
            why = f"no WebSocket at {scope.get('path')!r} (it is at {PATH})"
        if why is not None:
            log.warning("refusing a WebSocket: %s", why)
            await send({"type": "websocket.close", "code": 1008})  # an HTTP 403 before accept
            return
        await send({"type": "websocket.accept"})
        await self._pump(receive, send)

    async def _pump(self, receive: Any, send: Any) -> None:
        ours, theirs = socket.socketpair()
        for s in (ours, theirs):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER // 2)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SEND_BUFFER // 2)
        await self.listener.adopt(theirs)
        reader, writer = await asyncio.open_connection(sock=ours, limit=READ_CHUNK)
        inbound = asyncio.create_task(_inbound(receive, writer))
        outbound = asyncio.create_task(_outbound(reader, send))
        try:
            done, _ = await asyncio.wait({inbound, outbound}, return_when=asyncio.FIRST_COMPLETED)
            if outbound in done:  # the server ended the connection: say so and close
                with contextlib.suppress(Exception):
                    await send({"type": "websocket.close", "code": 1000})
        finally:
            for task in (inbound, outbound):
                task.cancel()
            await asyncio.gather(inbound, outbound, return_exceptions=True)
            writer.close()


async def _inbound(receive: Any, writer: asyncio.StreamWriter) -> None:
    """Client messages to the socket pair, one line each, until the client goes."""
    while True:
        message = await receive()
        if message["type"] != "websocket.receive":
            return  # websocket.disconnect
        data: bytes = message.get("bytes") or (message.get("text") or "").encode()
        writer.write(data.replace(b"\n", b" ") + b"\n")  # a raw newline is JSON whitespace
        await writer.drain()


async def _outbound(reader: asyncio.StreamReader, send: Any) -> None:
    """The server's lines to the client, one text message each, until the server closes.

    Read in chunks, not by ``readuntil``: a reader whose limit fits the longest frame
    would buffer twice that for a client that does not read before it stops reading the
    pair, and the server would never see a slow client (its outbox never fills).
    """
    buffer = bytearray()
    scanned = 0
    while True:
        chunk = await reader.read(READ_CHUNK)
        if not chunk:
            return
        buffer += chunk
        while (end := buffer.find(b"\n", scanned)) >= 0:
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            scanned = 0
            await send({"type": "websocket.send", "text": line.decode(errors="replace")})
        scanned = len(buffer)
        if scanned > MAX_OUT:
            log.warning("closing a WebSocket: a frame over %d bytes", MAX_OUT)
            return


class _Idle:
    """Connections that have not made their first HTTP request yet (no WebSocket, so no
    listener holds them): at most :data:`~._listen.AUTH_PENDING`, the oldest closed for a
    newcomer, each for at most :data:`~._listen.AUTH_SECONDS`. Without it a bare TCP
    connection that never sends a byte was held for good (uvicorn's ``limit_concurrency``
    does not count WebSockets, and starts no timer before a first request)."""

    def __init__(self) -> None:
        self._waiting: dict[asyncio.Transport, asyncio.TimerHandle] = {}

    def arrived(self, transport: asyncio.Transport) -> None:
        if len(self._waiting) >= _listen.AUTH_PENDING:
            oldest = next(iter(self._waiting))
            log.warning("closing the oldest of %d connections without a request", len(self))
            self._close(oldest)
        loop = asyncio.get_running_loop()
        self._waiting[transport] = loop.call_later(_listen.AUTH_SECONDS, self._close, transport)

    def spoke(self, transport: asyncio.Transport) -> None:
        timer = self._waiting.pop(transport, None)
        if timer is not None:
            timer.cancel()

    def _close(self, transport: asyncio.Transport) -> None:
        self.spoke(transport)
        transport.close()

    def __len__(self) -> int:
        return len(self._waiting)


def _guarded_http(idle: _Idle) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol, each connection in ``idle`` until its first request."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    class Guarded(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        _idle_transport: asyncio.Transport

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._idle_transport = transport
            idle.arrived(transport)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if getattr(self, "scope", None) is not None:  # a whole request was read
                idle.spoke(self._idle_transport)

        def connection_lost(self, exc: Exception | None) -> None:
            idle.spoke(self._idle_transport)
            super().connection_lost(exc)

    return Guarded


async def _forbidden(send: Any) -> None:
    headers = [(b"content-type", b"text/plain")]
    await send({"type": "http.response.start", "status": 403, "headers": headers})
    await send({"type": "http.response.body", "body": b"forbidden\n"})
