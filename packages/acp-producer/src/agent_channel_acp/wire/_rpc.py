"""A minimal JSON-RPC 2.0 client over newline-delimited frames, for the shell verbs.

A verb is a fresh process that asks a server one or two things and leaves. Importing
the ACP SDK costs it about a second (its schema models are built at import), ten times
what the rest of the verb takes, so the verbs speak the few methods they need here:
``initialize``, ``session/load``, ``session/prompt``, ``session/cancel`` and the
``_agent_channel/…`` requests. The console and the bridge stay on the SDK.

What the server sends besides answers is ignored: stream notifications, and permission
requests, which are never answered (A20: the server asks the next driver once this
client leaves, so a passing ``send`` cannot reject a tool call nobody looked at). Any
other request from the server gets -32601.

No ``acp`` import here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

from ._errors import WireError

if TYPE_CHECKING:
    from ._frames import Frame, JsonValue, Outgoing


LINE_LIMIT = 1 << 24
"""Bytes of one frame a verb reads: an answer past it ends the connection (16 MiB)."""


class AnswerTooLarge(ConnectionError):
    """The server's answer was longer than :data:`LINE_LIMIT`: the verb cannot read it."""


_IGNORED = frozenset({"session/request_permission"})
"""Server requests left unanswered (see the module docstring)."""


class RpcClient:
    """Requests and notifications on one connection; answers matched by id."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._next = 0
        self._waiting: dict[int | str | None, asyncio.Future[JsonValue]] = {}
        self._reading = asyncio.get_running_loop().create_task(self._read(), name="ctl-read")

    async def request(self, method: str, params: Mapping[str, object]) -> JsonValue:
        """The result of ``method``; a :class:`~._errors.WireError` for an error answer,
        ``ConnectionError`` when the server closes the connection first."""
        self._next += 1
        msg_id = self._next
        answer: asyncio.Future[JsonValue] = asyncio.get_running_loop().create_future()
        self._waiting[msg_id] = answer
        try:
            await self._send({"id": msg_id, "method": method, "params": params})
            return await answer
        finally:
            self._waiting.pop(msg_id, None)

    async def notify(self, method: str, params: Mapping[str, object]) -> None:
        await self._send({"method": method, "params": params})

    async def close(self) -> None:
        self._reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reading
        self._writer.close()

    async def _send(self, frame: Outgoing) -> None:
        await self._write(json.dumps({"jsonrpc": "2.0", **frame}).encode() + b"\n")

    async def _write(self, line: bytes) -> None:
        if self._reading.done():
            raise ConnectionError("the server closed the connection")
        self._writer.write(line)
        await self._writer.drain()

    async def _read(self) -> None:
        gone = ConnectionError("the server closed the connection")
        try:
            while line := await self._reader.readline():
                try:
                    frame: object = json.loads(line)
                except ValueError:
                    continue  # not ours to fix: a verb only needs its answers
                if isinstance(frame, dict):
                    await self._take(cast("Frame", frame))
        except OSError:  # reset
            pass
        except ValueError:  # a line over the reader's limit: the rest cannot be framed
            gone = AnswerTooLarge(
                f"the server's answer is over the {LINE_LIMIT >> 20} MiB a verb reads"
            )
        finally:
            for answer in self._waiting.values():
                if not answer.done():
                    answer.set_exception(gone)

    async def _take(self, frame: Frame) -> None:
        method = frame.get("method")
        if method is None:
            answer = self._waiting.get(frame.get("id"))
            if answer is None or answer.done():
                return
            error: object = frame.get("error")
            if isinstance(error, dict):
                answer.set_exception(WireError.read(cast("dict[str, object]", error)))
            else:
                answer.set_result(frame.get("result"))
        elif "id" in frame and method not in _IGNORED:
            await self._write(WireError.method_not_found(method).frame(frame["id"]))
