"""Newline-delimited JSON-RPC framing with a guard in front of the SDK.

The SDK's own reader stops serving after a frame that is valid JSON but not an
object (``[1,2,3]``, ``42``): the process stays up and never answers again. So
the producer hands the SDK's connection this message-level transport instead of
raw streams. It answers malformed frames itself (-32700 for non-JSON, -32600
for non-objects and request-shaped garbage) and keeps them from the SDK, and it
drops ``_meta`` keys that the SDK would otherwise splice over real handler
arguments (``_meta.session_id`` replacing the real session id). Everything
else (ids, dispatch, errors, responses) stays the SDK's.

Bounds and edges, all handled here so the SDK never logs a traceback for them:

- A frame the agent writes is at most :data:`MAX_OUT_FRAME` bytes (16 MiB, what our clients
  read): a longer answer goes out as -32603 under its id (``data.reason``, ``size``,
  ``limit``), a longer notification not at all (a warning line).
- A frame is at most :data:`MAX_FRAME` bytes (8 MiB). A longer line is not
  buffered: it is skipped to its newline and answered -32600, with
  ``data.reason`` naming the limit and the line's size (under the request's id
  when its first bytes name one), and the next line is served.
- Each request reaches the SDK under an id of ours, unique on the connection, and its
  response goes out under the client's id again: two requests in flight with the same
  id (two ``"id": null``, a client that reuses ids) are still answered once each.
- At most :data:`MAX_IN_FLIGHT` requests of one connection wait for their answer (a stdio
  prompt waits for its turn); the next one is answered -32603 at once, with
  ``data.reason`` naming the limit, and never reaches the SDK.
- A notification the agent has no handler for (or a ``session/cancel`` without
  a session id) is one warning line, not the SDK's traceback.
- End of input does not cut off requests already read: the end is reported to
  the SDK once every one of them except prompts (which the end of the
  executions answers) has its response, and closing waits briefly for the rest.
- A client that is gone is a debug line: a response that can no longer be
  written is dropped quietly; anything else the agent sends raises
  ``ConnectionError`` for the caller.
- Writes are coalesced: the frames written within one event-loop iteration (every hub's
  step to this connection, answers) go out as one write at the next iteration, in the
  order written, or at once past :data:`COALESCE` bytes, before a drain and at close. A
  frame counts as handed to the transport when it is written here (the mark's rule):
  nothing written later can reach the wire before it.

No ``acp`` import here: this module only moves dicts.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from ._errors import WireError

log = logging.getLogger("agent_channel_acp")

MAX_FRAME = 8 << 20
"""Longest incoming frame in bytes (8 MiB), newline excluded."""

MAX_OUT_FRAME = 1 << 24
"""Longest outgoing line in bytes (16 MiB, newline included): what our own clients read
(the console, the fuzzer). Past it an answer goes out as an error, a notification not at
all: one huge echo (a frame's text JSON-escaped grows up to threefold) must not end a
client's reader."""

MAX_IN_FLIGHT = 1024
"""Requests of one connection waiting for their answer before the next is refused."""

NOTIFICATIONS = frozenset({"session/cancel"})
"""Client notifications the agent handles (``_``-prefixed extensions pass too)."""

EOF_GRACE = 5.0
"""At end of input, how long requests already read (prompts aside) may take to be answered."""

CLOSE_GRACE = 0.5
"""At close, how long outstanding responses (prompts answered at shutdown) may take."""

_ID_SCAN = 64 << 10
"""How much of an oversized frame is searched for its request id."""

COALESCE = 64 << 10
"""Bytes written within one loop iteration that wait to go out as one write; past it
they are written at once (so what waits here stays small and backpressure shows)."""


T = TypeVar("T")

CANCEL_REQUEST = "$/cancel_request"
"""ACP's notification that withdraws a request the peer has not answered (optional: a peer
that does not take it ignores it)."""

_sent: ContextVar[list[Any] | None] = ContextVar("agent_channel_acp_sent", default=None)


async def noting_ids(request: Awaitable[T], ids: list[Any]) -> T:
    """Await ``request`` (an SDK call that sends requests from this task), appending to
    ``ids`` the JSON-RPC id of each request it writes: what :func:`cancel_request` names."""
    token = _sent.set(ids)
    try:
        return await request
    finally:
        _sent.reset(token)


def cancel_request(request_id: object) -> bytes:
    """The ``$/cancel_request`` frame (newline included) for a request we sent."""
    return (
        encode({"jsonrpc": "2.0", "method": CANCEL_REQUEST, "params": {"requestId": request_id}})
        + b"\n"
    )


@dataclass(slots=True)
class _Oversized:
    """A line longer than :data:`MAX_FRAME`: its first bytes and its length."""

    head: bytes
    size: int


class LineTransport:
    """An ``acp`` message transport over an asyncio reader/writer pair (stdio, sockets)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        shadowed: Mapping[str, frozenset[str]] | None = None,
        notifications: frozenset[str] = NOTIFICATIONS,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._shadowed = dict(shadowed or {})
        self._notifications = notifications
        self._unanswered: dict[int, tuple[object, str]] = {}  # our id -> the client's, method
        self._next_id = 0
        self._answered = asyncio.Event()
        self._closed = False
        self._gone = False
        self._transport = writer.transport
        self._pending: list[bytes] = []  # written this iteration, not yet to the transport
        self._pending_size = 0
        self._flushing: asyncio.Handle | None = None

    async def receive(self) -> dict[str, Any] | None:
        """The next well-formed JSON-RPC object, or None at end of stream."""
        while True:
            line = await self._read_line()
            if isinstance(line, _Oversized):
                await self._refuse_oversized(line)
                continue
            if not line:
                await self._settle(lambda method: method != "session/prompt", EOF_GRACE)
                return None
            line = line.strip()
            if not line:
                continue
            try:
                message: Any = json.loads(line)
            except (ValueError, RecursionError) as e:
                log.warning("dropping a frame that is not JSON: %s", e)
                await self._reject(None, WireError.parse_error(str(e)))
                continue
            if not isinstance(message, dict):
                log.warning("dropping a JSON frame that is not an object")
                await self._reject(None, WireError.not_an_object())
                continue
            checked = await self._check(message)  # pyright: ignore[reportUnknownArgumentType]
            if checked is not None:
                return checked

    async def send(self, message: dict[str, Any]) -> None:
        """Write one frame. Serialises anything (a validation error's context included).

        A response the client can no longer receive is dropped (the client is
        gone); any other frame raises ``ConnectionError`` then.
        """
        is_response = "method" not in message and ("result" in message or "error" in message)
        ours = message.get("id")
        if is_response and isinstance(ours, int) and ours in self._unanswered:
            message = {**message, "id": self._unanswered.pop(ours)[0]}
            self._answered.set()
        elif ours is not None and "method" in message and (sent := _sent.get()) is not None:
            sent.append(ours)  # a request of ours: its id, for a later $/cancel_request
        try:
            self.write_frame(message)
            self._flush_pending()
            await self._writer.drain()
        except ConnectionError:
            self._lost()
            if not is_response:
                raise

    @property
    def gone(self) -> bool:
        """True once the client can no longer be written to (closed, reset or closing)."""
        return self._gone or self._closed or self._writer.transport.is_closing()

    def ready(self) -> bool:
        """True when a frame written now goes straight out: open, and nothing left buffered
        by the transport (what waits here for this iteration's write is less than
        :data:`COALESCE` bytes, and goes out before anything written later)."""
        return not self._closed and self._transport.get_write_buffer_size() == 0

    async def drain(self) -> None:
        """Wait while the peer is not reading (the stream's high-water mark is passed)."""
        try:
            self._flush_pending()
            await self._writer.drain()
        except ConnectionError:
            self._lost()
            raise

    def write_frame(self, message: dict[str, Any]) -> None:
        """Write one frame now, without waiting for the peer to read (callers check :meth:`ready`).

        Frames written here and by :meth:`send` reach the wire in call order: both
        append to the same stream writer, synchronously.
        """
        data = encode(message) + b"\n"
        if len(data) > MAX_OUT_FRAME:
            data = _too_large(message, len(data))
        self.write_bytes(data)

    def write_bytes(self, data: bytes) -> None:
        """Write encoded frames (newline included) now: they go out with this iteration's
        other writes, in order (see the module docstring)."""
        if self._closed or self._writer.transport.is_closing():
            self._lost()
            raise ConnectionError("the client is gone")
        if len(data) > MAX_OUT_FRAME:  # rare: look at each frame
            data = b"".join(
                line + b"\n" if len(line) < MAX_OUT_FRAME else _too_large_line(line)
                for line in data.split(b"\n")[:-1]
            )
            if not data:
                return
        self._pending.append(data)
        self._pending_size += len(data)
        if self._pending_size >= COALESCE:
            self._flush_pending()
        elif self._flushing is None:
            self._flushing = asyncio.get_running_loop().call_soon(self._flush_pending)

    def _flush_pending(self) -> None:
        """Hand what waits to the transport, as one write."""
        if self._flushing is not None:
            self._flushing.cancel()
            self._flushing = None
        pending = self._pending
        if not pending:
            return
        data = pending[0] if len(pending) == 1 else b"".join(pending)
        pending.clear()
        self._pending_size = 0
        if self._writer.transport.is_closing():
            self._lost()
            return
        self._writer.write(data)

    async def close(self) -> None:
        if self._closed:
            return
        await self._settle(lambda method: True, CLOSE_GRACE)
        self._closed = True
        self._flush_pending()
        await self._flush(CLOSE_GRACE)
        try:
            self._writer.close()
        except Exception as e:  # the peer may be gone already
            log.debug("closing the writer failed: %r", e)

    # -- internals ---------------------------------------------------------------------

    async def _check(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """The message if it goes on to the SDK; None if it was answered or dropped here."""
        method = message.get("method")
        has_id = "id" in message
        msg_id = message.get("id")
        if has_id and (isinstance(msg_id, bool) or not isinstance(msg_id, str | int | None)):
            await self._invalid(None, "the id must be a string, a number or null")
            return None
        if method is None:
            if has_id and "result" not in message and "error" not in message:
                await self._invalid(msg_id, "a request needs a method")
                return None
            return message  # a response to one of our requests (or noise the SDK ignores)
        if not isinstance(method, str):
            if has_id:
                await self._invalid(msg_id, "the method must be a string")
            return None
        params = message.get("params")
        if not has_id and not self._notification_ok(method, params):
            return None
        names = self._shadowed.get(method)
        if names is not None and isinstance(params, dict):
            meta = params.get("_meta")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            if isinstance(meta, dict):
                clash = names.intersection(meta)  # pyright: ignore[reportUnknownArgumentType]
                if clash:
                    log.warning("ignoring _meta keys that shadow parameters: %s", sorted(clash))
                    params["_meta"] = {k: v for k, v in meta.items() if k not in clash}  # pyright: ignore[reportUnknownVariableType]
        if has_id and len(self._unanswered) >= MAX_IN_FLIGHT:
            log.warning("refusing a request: %d already wait for their answer", MAX_IN_FLIGHT)
            await self._reject(msg_id, WireError.too_many_requests(MAX_IN_FLIGHT))
            return None
        if has_id:  # the SDK sees an id of ours, unique; the response gets the client's back
            self._next_id += 1
            ours = self._next_id
            self._unanswered[ours] = (msg_id, method)
            message = {**message, "id": ours}
        return message

    def _notification_ok(self, method: str, params: object) -> bool:
        """Whether the SDK can handle this notification without logging a traceback."""
        if method.startswith("_"):
            return True  # an extension: the agent's ext_notification decides
        if method not in self._notifications:
            if method.startswith("$/"):  # protocol-level ($/cancel_request): nothing to do
                log.debug("ignoring notification %s", method)
            else:
                log.warning("ignoring notification %r: the agent has no such notification", method)
            return False
        fields = cast("dict[str, Any]", params) if isinstance(params, dict) else {}
        meta = fields.get("_meta")
        ok = isinstance(fields.get("sessionId"), str) and (meta is None or isinstance(meta, dict))
        if not ok:
            log.warning("ignoring notification %s: its params need a string sessionId", method)
        return ok

    async def _invalid(self, msg_id: int | str | None, reason: str) -> None:
        log.warning("rejecting an invalid request: %s", reason)
        await self._reject(msg_id, WireError.invalid_request(reason))

    async def _refuse_oversized(self, line: _Oversized) -> None:
        log.warning("dropping a frame of %d bytes (the limit is %d)", line.size, MAX_FRAME)
        await self._reject(_request_id(line.head), WireError.frame_too_large(line.size, MAX_FRAME))

    async def _reject(self, msg_id: int | str | None, error: WireError) -> None:
        """Answer a frame the SDK never sees; waits only on this client's own stream."""
        if self._closed or self._gone:
            return
        try:
            self.write_bytes(error.frame(msg_id))  # behind what was written before it
            await self.drain()
        except ConnectionError:
            self._lost()

    async def _settle(self, waits_for: Callable[[str], bool], grace: float) -> None:
        """Wait (at most ``grace`` s) until no request whose method ``waits_for`` is unanswered."""

        def owed() -> bool:
            return not self._gone and any(waits_for(m) for _, m in self._unanswered.values())

        try:
            async with asyncio.timeout(grace):
                while owed():
                    self._answered.clear()
                    await self._answered.wait()
        except TimeoutError:
            log.debug("%d request(s) still unanswered", len(self._unanswered))

    async def _flush(self, grace: float) -> None:
        """Wait (at most ``grace`` s) until what is buffered for a slow client is written.

        A high-water mark of 0 makes ``drain()`` wait for an empty buffer.
        """
        if self._gone:
            return
        try:
            self._writer.transport.set_write_buffer_limits(high=0)
            async with asyncio.timeout(grace):
                await self._writer.drain()
        except (NotImplementedError, ConnectionError, TimeoutError) as e:  # a file; gone; stuck
            log.debug("not all output could be flushed: %r", e)

    def _lost(self) -> None:
        if not self._gone:
            self._gone = True
            log.debug("the client is gone: nothing more is written to it")

    async def _read_line(self) -> bytes | _Oversized:
        """The next line (b"" at end of input), or what is known of one over the limit.

        Past the limit the line is consumed without keeping it, so memory stays
        bounded by the limit plus the reader's own buffer.
        """
        parts: list[bytes] = []
        size = 0
        over: _Oversized | None = None
        while True:
            end = True
            try:
                chunk = await self._reader.readuntil(b"\n")
            except asyncio.LimitOverrunError as e:
                chunk = await self._reader.readexactly(e.consumed)
                end = False
            except asyncio.IncompleteReadError as e:
                chunk = e.partial
            except OSError as e:  # a reset socket: the same as the end of input
                log.debug("reading from the client failed: %s", e)
                self._lost()
                chunk = b""
            size += len(chunk)
            if over is None:
                parts.append(chunk)
                if size - chunk.endswith(b"\n") > MAX_FRAME:
                    over = _Oversized(b"".join(parts)[:_ID_SCAN], 0)
                    parts.clear()
            if end:
                if over is None:
                    return b"".join(parts)
                over.size = size - chunk.endswith(b"\n")
                return over


def _too_large(message: dict[str, Any], size: int) -> bytes:
    """What goes out instead of a frame past :data:`MAX_OUT_FRAME`: an answer's error under
    its id, or nothing (a notification, a request of ours: logged)."""
    is_response = "method" not in message and "result" in message
    log.warning(
        "not writing a frame of %d bytes (clients read %d): %s",
        size,
        MAX_OUT_FRAME,
        "answered with an error" if is_response else "left out",
    )
    if not is_response:
        return b""
    reason = (
        f"the answer is {size} bytes, over the {MAX_OUT_FRAME >> 20} MiB frame limit "
        "clients read; ask for less"
    )
    return WireError.internal_error(reason, size=size, limit=MAX_OUT_FRAME).frame(message.get("id"))


def _too_large_line(line: bytes) -> bytes:
    try:
        message = json.loads(line)
    except ValueError:
        message = None
    if not isinstance(message, dict):
        log.warning("not writing a frame of %d bytes (clients read %d)", len(line), MAX_OUT_FRAME)
        return b""
    return _too_large(cast("dict[str, Any]", message), len(line) + 1)


def encode(value: object) -> bytes:
    """Compact JSON, as every frame is written (anything else serialised with ``str``)."""
    return json.dumps(value, separators=(",", ":"), default=str).encode()


_TOKEN = re.compile(rb'\s*("(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+)')


def _request_id(head: bytes) -> int | str | None:
    """The id of the request whose frame starts with ``head``, or None.

    Scans the top-level keys only, and answers an id only once ``method`` was
    seen too (a response or garbage gets None): enough for the usual
    ``{"jsonrpc":..,"id":..,"method":..,"params":<huge>}``.
    """
    depth = 0
    key: bytes | None = None
    expect_key = False
    found: dict[bytes, object] = {}
    pos = 0
    while pos < len(head) and not ({b'"id"', b'"method"'} <= found.keys()):
        match = _TOKEN.match(head, pos)
        if match is None:
            break
        token, pos = match.group(1), match.end()
        if token in (b"{", b"["):
            depth += 1
            expect_key = token == b"{" and depth == 1
        elif token in (b"}", b"]"):
            depth -= 1
        elif depth == 1 and token == b",":
            expect_key = True
        elif depth == 1 and expect_key and token.startswith(b'"'):
            key, expect_key = token, False
        elif depth == 1 and key is not None and token != b":":
            found[key] = token
            key = None
    if b'"method"' not in found or b'"id"' not in found:
        return None
    try:
        value = json.loads(found[b'"id"'])  # pyright: ignore[reportArgumentType]
    except ValueError:
        return None
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None
