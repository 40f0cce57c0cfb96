"""``agent-channel-acp bridge [TARGET]`` (A21): a stdio agent that is a running agent's socket.

A stdio-only client (Zed) launches the bridge as its agent; the bridge
connects to a running ``serve`` process and relays frames both ways byte for
byte, with two exceptions made at the start of the conversation:

- The first ``session/new`` becomes ``session/load`` of TARGET when one is
  given (an execution id or a unique prefix), and the answer to it gets the
  ``sessionId`` the client expects from ``session/new``. The server's bind
  preamble follows that answer (A5), so the client sees it as the new
  session's history. Without TARGET the request passes unchanged and the
  server decides: it binds to the only drivable execution or sends its picker
  (A3). Later ``session/new`` requests always pass unchanged (a new thread in
  Zed gets the picker).
- Over TCP the record's token is added to ``initialize`` (see ``_listen``).

Once both are done the relay only copies bytes. When either side closes,
the bridge closes the other and exits (0 when the client ended it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from ..wire._discovery import Record, live_records, runtime_dir
from ._connect import CtlError, exec_id, initialize_meta, open_stream, resolve, servers

if TYPE_CHECKING:
    from ..wire._frames import JsonObject, JsonValue

Rewrite = Callable[["JsonObject"], "JsonObject | None"]
"""One direction's rewrite of a whole frame: the frame to send instead, or None."""

_CHUNK = 1 << 16


@dataclass
class _Rewrite:
    """What is still to be rewritten, shared by the two directions."""

    target: str | None
    meta: dict[str, str]
    new_seen: bool = False
    init_seen: bool = False
    load_id: JsonValue = None
    fixed: bool = False

    @property
    def up_done(self) -> bool:
        return self.new_seen and (self.init_seen or not self.meta)

    @property
    def down_done(self) -> bool:
        return self.up_done and (self.target is None or self.fixed)

    def up(self, message: JsonObject) -> JsonObject | None:
        """The client's frame rewritten, or None to pass it unchanged."""
        method = message.get("method")
        if method == "initialize" and self.meta and not self.init_seen:
            self.init_seen = True
            params = cast("JsonObject", message.get("params") or {})
            meta = cast("JsonObject", params.get("_meta") or {})
            return {**message, "params": {**params, "_meta": {**meta, **self.meta}}}
        if method == "session/new" and not self.new_seen:
            self.new_seen = True
            if self.target is None:
                return None
            params = cast("JsonObject", message.get("params") or {})
            self.load_id = message.get("id")
            load: JsonObject = {
                "sessionId": self.target,
                "cwd": params.get("cwd", "/"),
                "mcpServers": params.get("mcpServers") or [],
            }
            return {"jsonrpc": "2.0", "id": self.load_id, "method": "session/load", "params": load}
        return None

    def down(self, message: JsonObject) -> JsonObject | None:
        """The server's frame rewritten, or None to pass it unchanged."""
        if self.fixed or self.load_id is None or "method" in message:
            return None
        if message.get("id") != self.load_id:
            return None
        self.fixed = True
        if "result" not in message:
            return None  # an error passes as it is
        result = cast("JsonObject", message.get("result") or {})
        return {**message, "result": {**result, "sessionId": self.target}}


async def _pump(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    rewrite: Rewrite,
    done: Callable[[], bool],
) -> None:
    """Copy ``reader`` to ``writer``; whole lines go through ``rewrite`` until ``done()``."""
    whole = True  # at the start of a line
    while True:
        if done():
            data = await reader.read(_CHUNK)
            if not data:
                return
            writer.write(data)
            await writer.drain()
            continue
        try:
            data = await reader.readuntil(b"\n")
            line = whole
            whole = True
        except asyncio.LimitOverrunError as e:  # a long line: it passes as it is
            data = await reader.readexactly(e.consumed)
            line, whole = False, False
        except asyncio.IncompleteReadError as e:
            data, line = e.partial, False
        if not data:
            return
        if line:
            data = _rewritten(data, rewrite)
        writer.write(data)
        await writer.drain()


def _rewritten(line: bytes, rewrite: Rewrite) -> bytes:
    try:
        message: object = json.loads(line)
    except (ValueError, RecursionError):
        return line
    if not isinstance(message, dict):
        return line
    changed = rewrite(cast("JsonObject", message))
    if changed is None:
        return line
    return json.dumps(changed, separators=(",", ":")).encode() + b"\n"


async def _choose(target: str | None) -> tuple[Record, str | None]:
    """The server to relay to and the execution id to bind (None: the server's choice)."""
    if target is not None:
        async with servers() as found:
            server, execution = resolve(found, target)
            return server.record, exec_id(execution)
    records = live_records(runtime_dir(create=False))
    if not records:
        raise CtlError(f"no agent-channel server is running (none in {runtime_dir(create=False)})")
    if len(records) > 1:
        pids = ", ".join(str(r.pid) for r in records)
        raise CtlError(f"{len(records)} servers are running (pids {pids}): name a TARGET")
    return records[0], None


async def bridge(target: str | None) -> int:
    record, session_id = await _choose(target)
    server_reader, server_writer = await open_stream(record)
    from ..wire._stdio import stdio_streams

    client_reader, client_writer = await stdio_streams()
    state = _Rewrite(session_id, initialize_meta(record))
    up = asyncio.ensure_future(_pump(client_reader, server_writer, state.up, lambda: state.up_done))
    down = asyncio.ensure_future(
        _pump(server_reader, client_writer, state.down, lambda: state.down_done)
    )
    try:
        finished, _ = await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (up, down):
            task.cancel()
        await asyncio.gather(up, down, return_exceptions=True)
        for w in (server_writer, client_writer):
            with contextlib.suppress(Exception):
                w.close()
    if up in finished:
        return 0  # the client ended it
    sys.stderr.write(f"agent-channel-acp bridge: the server at {record.where()} closed\n")
    return 1
