"""Listeners for attach mode (A1, A2): who may connect, and how many.

Two transports, one accept loop. Each connection that passes its check is
handed to ``handler(reader, writer)`` (the attach server's
``serve_connection``) as a pair of asyncio streams; until then it never
reaches the protocol code.

- **Unix socket** (the default): a 0600 socket in the 0700 runtime directory.
  The peer's uid (``SO_PEERCRED``) must be ours; anyone else gets one JSON-RPC
  error frame (-32000) and is closed. Binding refuses a path that exists and
  is not a socket, and a socket a live server still answers on; a stale one
  (nobody answers) is replaced.
- **TCP** on 127.0.0.1 only, with a random token published in the discovery
  record (the record is 0600 in a 0700 directory, so only our user reads it).
  The client presents it in its first request, ``initialize``, as
  ``params._meta["agent_channel.token"]``; the key is removed before the
  server sees the request. Any other request first is answered -32000
  ("Authentication required", ACP's code) and the connection stays open; a
  wrong token is answered -32000 and closed. Until it authenticates a peer may
  send at most :data:`AUTH_BYTES` and take :data:`AUTH_SECONDS`. Peers still
  waiting to authenticate are a pool of their own, at most :data:`AUTH_PENDING`
  (a newcomer drops the oldest): any local user can reach a TCP port, and
  connections without the token must not crowd out the one that has it.

At most :data:`MAX_CONNECTIONS` connections are served at once; one more gets
a -32603 frame saying so and is closed. No ``acp`` import here.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import secrets
import socket
import stat
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ..wire._discovery import TOKEN_KEY
from ..wire._errors import WireError

if TYPE_CHECKING:
    from ..wire._frames import JsonObject, TcpTransport, Transport, UnixTransport

log = logging.getLogger("agent_channel_acp")

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
"""Serves one accepted, authenticated connection until it ends."""

MAX_CONNECTIONS = 256
"""Connections served at once, per listener (a batch of 50 executions with a few clients each)."""

AUTH_BYTES = 1 << 20
"""What an unauthenticated TCP peer may send before it is cut off."""

AUTH_SECONDS = 30.0
"""How long an unauthenticated TCP peer may take to present the token."""

AUTH_PENDING = 32
"""TCP peers waiting to present the token at once; not counted as served connections."""

STREAM_LIMIT = 1 << 20
"""The stream reader's line buffer (longer frames are the transport's business)."""

_SUN_PATH_MAX = 107  # sockaddr_un.sun_path holds 108 bytes, NUL included


class ListenError(RuntimeError):
    """The listener cannot start (the path is taken, not a socket, too long, ...)."""


_CROWDED = "too many connections are waiting to present the token; this one waited longest"


def _auth_required(msg_id: int | str | None, reason: str) -> bytes:
    return WireError.not_authenticated(reason).frame(msg_id)


class Listener:
    """A listening socket and the connections it serves; :meth:`close` stops both."""

    def __init__(
        self,
        sock: socket.socket | None,
        handler: Handler,
        *,
        transport: Transport,
        token: str | None = None,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self._sock = sock
        self._handler = handler
        self.transport = transport
        """What the discovery record says about it (the token included, for TCP)."""
        self._token = token
        self._max = max_connections
        self._conns: set[asyncio.Task[None]] = set()
        self._waiting: dict[asyncio.Task[None], socket.socket] = {}
        """TCP connections that have not presented the token yet, oldest first."""
        self._refusing: set[asyncio.Task[None]] = set()
        self._accepting: asyncio.Task[None] | None = None
        self._socket_id: tuple[int, int] | None = None
        self._socket_path = (
            Path(transport["path"]) if transport["kind"] == "unix" and sock is not None else None
        )
        if self._socket_path is not None:
            st = os.stat(self._socket_path)
            self._socket_id = (st.st_dev, st.st_ino)

    @property
    def connections(self) -> int:
        """Connections served (authenticated); those still waiting for a token are not."""
        return len(self._conns) - len(self._waiting)

    def start(self) -> None:
        if self._sock is None:
            return  # connections come through :meth:`adopt`
        self._accepting = asyncio.get_running_loop().create_task(self._accept_loop())

    async def close(self, *, connections: bool = True) -> None:
        """Stop accepting (and remove our socket file); with ``connections``, end those too."""
        if self._accepting is not None:
            self._accepting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._accepting
            self._accepting = None
        if self._sock is not None:
            self._sock.close()
        self._unlink()
        if connections:
            for task in list(self._conns):
                task.cancel()
            await asyncio.gather(*self._conns, return_exceptions=True)

    def _unlink(self) -> None:
        """Remove the socket file, if it is still the one we bound (not a successor's)."""
        path = self._socket_path
        if self._socket_id is None or path is None:
            return
        with contextlib.suppress(OSError):
            st = os.lstat(path)
            if stat.S_ISSOCK(st.st_mode) and (st.st_dev, st.st_ino) == self._socket_id:
                path.unlink()
        self._socket_id = None

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._sock is not None
        while True:
            conn, _ = await loop.sock_accept(self._sock)
            if conn.family in (socket.AF_INET, socket.AF_INET6):
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no 40 ms Nagle wait
            await self.adopt(conn)

    async def adopt(self, conn: socket.socket) -> None:
        """Serve ``conn`` as if it had been accepted here: the same limits and checks.

        The WebSocket path (:mod:`._asgi`) hands each WebSocket's end of a socket pair here,
        so a WebSocket peer meets exactly what a TCP peer meets.
        """
        loop = asyncio.get_running_loop()
        conn.setblocking(False)
        if self.connections >= self._max:
            log.warning("refusing a connection: %d are served already", self._max)
            await _refuse(conn, WireError.too_many_connections(self._max).frame(None))
            return
        if self._token is not None and len(self._waiting) >= AUTH_PENDING:
            oldest, sock = next(iter(self._waiting.items()))
            del self._waiting[oldest]
            self._conns.discard(oldest)  # never served: it frees no served slot
            oldest.cancel()
            log.warning("dropping the oldest of %d connections without a token", AUTH_PENDING)
            refusing = loop.create_task(_refuse(sock, _auth_required(None, _CROWDED)))
            self._refusing.add(refusing)  # held until done (the loop keeps weak refs)
            refusing.add_done_callback(self._refusing.discard)
        task = loop.create_task(self._serve(conn))
        self._conns.add(task)
        task.add_done_callback(self._conns.discard)
        if self._token is not None:
            self._waiting[task] = conn

    async def _serve(self, conn: socket.socket) -> None:
        try:
            if self._token is None:
                ready = await self._check_peer(conn)
                first = b""
            else:
                try:
                    async with asyncio.timeout(AUTH_SECONDS):
                        ready, first = await self._authenticate(conn)
                except TimeoutError:
                    await _refuse(conn, _auth_required(None, "no token presented in time"))
                    return
                finally:
                    task = asyncio.current_task()
                    if task is not None:
                        self._waiting.pop(task, None)
            if not ready:
                return
            reader, writer = await _streams(conn, first)
        except OSError as e:
            log.debug("a connection failed before it was served: %s", e)
            conn.close()
            return
        try:
            await self._handler(reader, writer)
        except Exception:
            log.exception("serving a connection failed")
        finally:
            writer.close()

    def _token_matches(self, token: str) -> bool:
        assert self._token is not None
        return hmac.compare_digest(token.encode(), self._token.encode())

    async def _check_peer(self, conn: socket.socket) -> bool:
        """A unix peer must run as our uid."""
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid, uid, _gid = struct.unpack("3i", creds)
        if uid == os.getuid():
            return True
        log.warning("refusing a connection from uid %d (pid %d)", uid, pid)
        reason = f"peer uid {uid} is not this server's uid {os.getuid()}"
        await _refuse(conn, _auth_required(None, reason))
        return False

    async def _authenticate(self, conn: socket.socket) -> tuple[bool, bytes]:
        """Read until ``initialize`` presents the token; (ok, bytes to serve first)."""
        loop = asyncio.get_running_loop()
        buffer = b""
        received = 0  # every byte before the token counts, answered lines too
        while True:
            end = buffer.find(b"\n")
            if end < 0:
                if received > AUTH_BYTES:
                    await _refuse(conn, _auth_required(None, "too much input before the token"))
                    return False, b""
                chunk = await loop.sock_recv(conn, 1 << 16)
                if not chunk:
                    conn.close()
                    return False, b""
                buffer += chunk
                received += len(chunk)
                continue
            line, buffer = buffer[:end], buffer[end + 1 :]
            verdict = self._judge(line)
            if isinstance(verdict, bytes):  # the rewritten initialize: serve from here on
                return True, verdict + buffer
            if verdict is not None:
                reply, close = verdict
                if close:
                    await _refuse(conn, reply)
                    return False, b""
                await loop.sock_sendall(conn, reply)

    def _judge(self, line: bytes) -> bytes | tuple[bytes, bool] | None:
        """One pre-auth line: the line to serve, an (error frame, close) reply, or None (skip)."""
        if not line.strip():
            return None
        try:
            message: object = json.loads(line)
        except (ValueError, RecursionError) as e:
            return WireError.parse_error(str(e)).frame(None), False
        if not isinstance(message, dict):
            return WireError.not_an_object().frame(None), False
        msg = cast("JsonObject", message)
        if "id" not in msg:
            return None  # a notification: nothing to answer, nothing served
        msg_id = cast("int | str | None", msg["id"])  # echoed as it came
        raw = msg.get("params")
        params = raw if isinstance(raw, dict) else {}
        raw = params.get("_meta")
        meta = raw if isinstance(raw, dict) else {}
        token = meta.get(TOKEN_KEY)
        if msg.get("method") != "initialize" or token is None:
            reason = f"present the discovery record's token in initialize as _meta[{TOKEN_KEY!r}]"
            return _auth_required(msg_id, reason), False
        if not (isinstance(token, str) and self._token_matches(token)):
            log.warning("refusing a connection: wrong token")
            return _auth_required(msg_id, "the token does not match this server's"), True
        rest = {k: v for k, v in meta.items() if k != TOKEN_KEY}
        params = {k: v for k, v in params.items() if k != "_meta"}
        if rest:
            params["_meta"] = rest
        msg["params"] = params
        return json.dumps(msg, separators=(",", ":")).encode() + b"\n"


async def _refuse(conn: socket.socket, frame: bytes) -> None:
    """Send one frame and close (a peer that does not read loses it)."""
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(1.0):
            await loop.sock_sendall(conn, frame)
    except (OSError, TimeoutError):
        pass
    finally:
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_RDWR)
        conn.close()


async def _streams(
    conn: socket.socket, first: bytes
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Streams over an accepted socket, the reader holding ``first`` before anything else."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=STREAM_LIMIT, loop=loop)
    if first:
        reader.feed_data(first)
    protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
    transport, _ = await loop.connect_accepted_socket(lambda: protocol, conn)
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)


def _prepare_socket_path(path: Path) -> None:
    """Make ``path`` free for a new socket, or say why it is not ours to take."""
    if len(os.fsencode(path)) > _SUN_PATH_MAX:
        raise ListenError(
            f"the socket path is too long for a unix socket ({_SUN_PATH_MAX} bytes at most): {path}"
        )
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise ListenError(f"{path} exists and is not a socket: refusing to replace it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2.0)
    try:
        probe.connect(os.fspath(path))
    except (ConnectionRefusedError, FileNotFoundError):
        log.info("removing the stale socket %s", path)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    except OSError as e:
        raise ListenError(f"cannot check the socket {path}: {e.strerror or e}") from None
    finally:
        probe.close()
    raise ListenError(f"a server is already listening on {path}")


async def listen_unix(
    handler: Handler, path: Path, *, max_connections: int = MAX_CONNECTIONS
) -> Listener:
    """Listen on a 0600 unix socket at ``path`` (see the module docstring for the checks)."""
    _prepare_socket_path(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # the socket is 0600 from the moment it exists
    try:
        sock.bind(os.fspath(path))
    except OSError as e:
        sock.close()
        raise ListenError(f"cannot listen on {path}: {e.strerror or e}") from None
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(128)
    sock.setblocking(False)
    transport: UnixTransport = {"kind": "unix", "path": str(path)}
    listener = Listener(sock, handler, transport=transport, max_connections=max_connections)
    listener.start()
    return listener


async def listen_tcp(
    handler: Handler, port: int = 0, *, max_connections: int = MAX_CONNECTIONS
) -> Listener:
    """Listen on 127.0.0.1:``port`` (0: any free port) behind a fresh random token."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as e:
        sock.close()
        raise ListenError(f"cannot listen on 127.0.0.1:{port}: {e.strerror or e}") from None
    sock.listen(128)
    sock.setblocking(False)
    token = secrets.token_urlsafe(32)
    host, bound = cast("tuple[str, int]", sock.getsockname()[:2])
    transport: TcpTransport = {"kind": "tcp", "host": host, "port": bound, "token": token}
    listener = Listener(
        sock, handler, transport=transport, token=token, max_connections=max_connections
    )
    listener.start()
    return listener


def adopting(
    handler: Handler, transport: Transport, token: str, *, max_connections: int = MAX_CONNECTIONS
) -> Listener:
    """A listener with no socket of its own: connections arrive by :meth:`Listener.adopt`
    and present ``token`` as a TCP peer does (the WebSocket path's)."""
    return Listener(
        None, handler, transport=transport, token=token, max_connections=max_connections
    )
