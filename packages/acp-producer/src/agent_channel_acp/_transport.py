"""Newline-delimited JSON-RPC framing with a guard in front of the SDK.

The SDK's own reader stops serving after a frame that is valid JSON but not an
object (``[1,2,3]``, ``42``): the process stays up and never answers again. So
the producer hands the SDK's connection this message-level transport instead of
raw streams. It answers malformed frames itself (-32700 for non-JSON, -32600
for non-objects and request-shaped garbage) and keeps them from the SDK, and it
drops ``_meta`` keys that the SDK would otherwise splice over real handler
arguments (``_meta.session_id`` replacing the real session id). Everything
else (ids, dispatch, errors, responses) stays the SDK's.

No ``acp`` import here: this module only moves dicts.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger("agent_channel_acp")

ResponseHook = Callable[[str, dict[str, Any]], None]
"""Called with (method, response) after the response to a watched request was written."""

_READ_CHUNK = 1 << 20


class LineTransport:
    """An ``acp`` message transport over an asyncio reader/writer pair (stdio, sockets)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        shadowed: Mapping[str, frozenset[str]] | None = None,
        watch: frozenset[str] = frozenset(),
        on_response: ResponseHook | None = None,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._shadowed = dict(shadowed or {})
        self._watch_methods = watch
        self._watched: dict[object, str] = {}
        self._on_response = on_response
        self._closed = False

    async def receive(self) -> dict[str, Any] | None:
        """The next well-formed JSON-RPC object, or None at end of stream."""
        while True:
            line = await self._read_line()
            if not line:
                return None
            line = line.strip()
            if not line:
                continue
            try:
                message: Any = json.loads(line)
            except (ValueError, RecursionError) as e:
                log.warning("dropping a frame that is not JSON: %s", e)
                await self._reject(None, -32700, "Parse error", {"details": str(e)})
                continue
            if not isinstance(message, dict):
                log.warning("dropping a JSON frame that is not an object")
                await self._reject(
                    None, -32600, "Invalid request", {"reason": "a frame must be a JSON object"}
                )
                continue
            checked = self._check(message)  # pyright: ignore[reportUnknownArgumentType]
            if checked is not None:
                return checked

    async def send(self, message: dict[str, Any]) -> None:
        """Write one frame. Serialises anything (a validation error's context included)."""
        self.write_frame(message)
        await self._writer.drain()
        if self._watched and ("result" in message or "error" in message):
            method = self._watched.pop(message.get("id"), None)
            if method is not None and self._on_response is not None:
                self._on_response(method, message)

    def ready(self) -> bool:
        """True when a frame written now goes straight out: open, and nothing left buffered."""
        return not self._closed and self._writer.transport.get_write_buffer_size() == 0

    async def drain(self) -> None:
        """Wait while the peer is not reading (the stream's high-water mark is passed)."""
        await self._writer.drain()

    def write_frame(self, message: dict[str, Any]) -> None:
        """Write one frame now, without waiting for the peer to read (callers check :meth:`ready`).

        Frames written here and by :meth:`send` reach the wire in call order: both
        append to the same stream writer, synchronously.
        """
        if self._closed:
            raise ConnectionError("transport closed")
        data = json.dumps(message, separators=(",", ":"), default=str).encode() + b"\n"
        self._writer.write(data)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._writer.close()
        except Exception:  # the peer may be gone already
            log.debug("closing the writer failed", exc_info=True)

    # -- internals ---------------------------------------------------------------------

    def _check(self, message: dict[str, Any]) -> dict[str, Any] | None:
        method = message.get("method")
        has_id = "id" in message
        msg_id = message.get("id")
        if has_id and not (msg_id is None or isinstance(msg_id, str | int)):
            self._reject_soon(None, "the id must be a string, a number or null")
            return None
        if method is None:
            if has_id and "result" not in message and "error" not in message:
                self._reject_soon(msg_id, "a request needs a method")
                return None
            return message  # a response to one of our requests (or noise the SDK ignores)
        if not isinstance(method, str):
            if has_id:
                self._reject_soon(msg_id, "the method must be a string")
            return None
        names = self._shadowed.get(method)
        if names is not None:
            params = message.get("params")
            if isinstance(params, dict):
                meta = params.get("_meta")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
                if isinstance(meta, dict):
                    clash = names.intersection(meta)  # pyright: ignore[reportUnknownArgumentType]
                    if clash:
                        log.warning("ignoring _meta keys that shadow parameters: %s", sorted(clash))
                        params["_meta"] = {k: v for k, v in meta.items() if k not in clash}  # pyright: ignore[reportUnknownVariableType]
        if has_id and method in self._watch_methods:
            self._watched[msg_id] = method
        return message

    def _reject_soon(self, msg_id: object, reason: str) -> None:
        log.warning("rejecting an invalid request: %s", reason)
        self._writer.write(_error_frame(msg_id, -32600, "Invalid request", {"reason": reason}))

    async def _reject(self, msg_id: object, code: int, text: str, data: dict[str, Any]) -> None:
        self._writer.write(_error_frame(msg_id, code, text, data))
        await self._writer.drain()

    async def _read_line(self) -> bytes:
        parts: list[bytes] = []
        while True:
            try:
                parts.append(await self._reader.readuntil(b"\n"))
                return b"".join(parts)
            except asyncio.LimitOverrunError as e:
                parts.append(await self._reader.readexactly(e.consumed))
            except asyncio.IncompleteReadError as e:
                parts.append(e.partial)
                return b"".join(parts)


def _error_frame(msg_id: object, code: int, text: str, data: dict[str, Any]) -> bytes:
    frame = {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": text, "data": data}}
    return json.dumps(frame, separators=(",", ":")).encode() + b"\n"
