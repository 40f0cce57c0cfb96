"""The attach suite's client side: a server subprocess on a unix socket, SDK clients on it.

With :data:`TRANSPORT` ``"ws"`` (the attach conftest's ``transport`` fixture sets it) the
server also listens over WebSocket and every client connects there instead, through the
verbs' own WebSocket client, presenting the token: the same tests, over the other path.

``serving(...)`` starts ``attach_server.py`` (until ``agent-channel-acp serve`` lands) with
the suite's agents; ``Client`` is an SDK ``ClientSideConnection`` over the socket that
records every inbound frame in order (``rec.wire``). Waits are event-driven
(``rec.wait_until``); the guard only catches hangs.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
from acp.client.connection import ClientSideConnection
from agent_channel_acp.wire._ws import ws_streams
from agents import GATES_ENV
from conftest import GUARD, HERE, Recorder, agent_env

TRANSPORT = "unix"
"""Which path the clients take: ``"unix"`` or ``"ws"`` (set per test by the fixture)."""
AGENT: str | None = None
"""The agent :func:`serving` runs when its arguments name none (``consumer`` sets it); ``None``:
the attach server's own default, the ReAct loop's ``agents:attach_agent``."""

TOKEN_KEY = "agent_channel.token"


@dataclass
class AttachRecorder(Recorder):
    notes: list[tuple[str, dict[str, Any]]] = field(
        default_factory=list[tuple[str, dict[str, Any]]]
    )

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        self.notes.append((method, params))
        self._poke()

    def frames(self, session_id: str) -> list[dict[str, Any]]:
        """Inbound notifications for ``session_id``, in wire order."""
        return [
            f
            for f in self.wire
            if "method" in f and (f.get("params") or {}).get("sessionId") == session_id
        ]

    def updates_of(self, session_id: str) -> list[dict[str, Any]]:
        return [
            f["params"]["update"]
            for f in self.frames(session_id)
            if f["method"] == "session/update"
        ]

    def states(self, session_id: str) -> list[str]:
        return [
            f["params"]["state"]
            for f in self.frames(session_id)
            if f["method"] == "_agent_channel/turn_state"
        ]

    def texts(self, session_id: str, kind: str = "agent_message_chunk") -> str:
        return "".join(
            u["content"].get("text", "")
            for u in self.updates_of(session_id)
            if u["sessionUpdate"] == kind
        )

    def has(self, session_id: str, method: str) -> bool:
        return any(f["method"] == method for f in self.frames(session_id))


@dataclass
class Client:
    conn: ClientSideConnection
    rec: AttachRecorder
    writer: asyncio.StreamWriter

    async def new(self, **meta: Any) -> str:
        kwargs: dict[str, Any] = {"cwd": str(HERE), "mcp_servers": []}
        if meta:
            kwargs["_meta"] = meta  # pyright: ignore[reportArgumentType]
        return (await self.conn.new_session(**kwargs)).session_id

    async def load(self, session_id: str, *, observe: bool = False) -> None:
        params: dict[str, Any] = {"cwd": str(HERE), "sessionId": session_id, "mcpServers": []}
        if observe:
            params["_meta"] = {"agent_channel.observe": True}
        await self.request("session/load", params)

    async def prompt(self, session_id: str, text: str) -> Any:
        return await self.request(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
        )

    async def cancel(self, session_id: str) -> None:
        await self.conn._conn.send_notification("session/cancel", {"sessionId": session_id})  # pyright: ignore[reportPrivateUsage]

    async def request(self, method: str, params: Any) -> Any:
        return await self.conn._conn.send_request(method, params)  # pyright: ignore[reportPrivateUsage]

    async def ext(self, name: str, **params: Any) -> Any:
        return await self.request(f"_agent_channel/{name}", params)

    async def until(self, predicate: Callable[[], object]) -> None:
        await self.rec.wait_until(predicate)

    async def close(self) -> None:
        await self.conn.close()
        self.writer.close()


@dataclass
class Server:
    path: Path
    ids: list[str]
    proc: asyncio.subprocess.Process
    gates: Path
    clients: list[Client] = field(default_factory=list[Client])
    ws: tuple[str, str] | None = None
    """The WebSocket url and token, when the clients go over WebSocket."""

    async def streams(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A byte stream to the server, over the transport of this run."""
        if self.ws is None:
            return await asyncio.open_unix_connection(self.path, limit=1 << 24)
        reader = asyncio.StreamReader(limit=1 << 24)
        return await ws_streams(self.ws[0], reader=reader)

    @property
    def meta(self) -> dict[str, str]:
        """What ``initialize`` carries in ``_meta``: the token over WebSocket."""
        return {TOKEN_KEY: self.ws[1]} if self.ws is not None else {}

    def open(self, name: str) -> None:
        """Open the gate ``name``: the tool waiting at it returns."""
        (self.gates / name).touch()

    async def connect(self, **recorder: Any) -> Client:
        reader, writer = await self.streams()
        rec = AttachRecorder(**recorder)
        conn = ClientSideConnection(rec, writer, reader, observers=[rec.observe])
        with anyio.fail_after(GUARD):
            await conn.initialize(protocol_version=1, **self.meta)
        client = Client(conn, rec, writer)
        self.clients.append(client)
        return client

    async def raw(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Frames by hand; over WebSocket, once the token was presented (answer consumed)."""
        reader, writer = await self.streams()
        if self.ws is not None:
            params = {"protocolVersion": 1, "_meta": self.meta}
            hello = {"jsonrpc": "2.0", "id": "auth", "method": "initialize", "params": params}
            writer.write(json.dumps(hello).encode() + b"\n")
            with anyio.fail_after(GUARD):
                answer = json.loads(await reader.readline())
            assert answer.get("id") == "auth" and "result" in answer, answer
        return reader, writer

    async def stop(self, *, term: bool = False) -> None:
        """Close every client, then end the process: its stdin closed (or SIGTERM with
        ``term``), killed if it is still there after the guard."""
        for c in self.clients:
            with suppress(Exception):
                await c.close()
        if self.proc.returncode is not None:
            return
        if term:
            self.proc.terminate()
        elif self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            with anyio.fail_after(GUARD):
                await self.proc.wait()
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()


@asynccontextmanager
async def serving(*args: str) -> AsyncIterator[Server]:
    """``attach_server.py *args`` as a subprocess; its stdin closing ends it. The clients
    go over :data:`TRANSPORT`."""
    gates = Path(tempfile.mkdtemp(prefix="acp-gates-"))
    over_ws = TRANSPORT == "ws"
    if AGENT is not None and "--agent" not in args:
        args = ("--agent", AGENT, *args)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / "attach_server.py"),
        *args,
        *(["--ws"] if over_ws else []),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=agent_env(**{GATES_ENV: str(gates)}),
    )
    assert proc.stdout is not None and proc.stdin is not None
    ws: tuple[str, str] | None = None
    with anyio.fail_after(GUARD * 3):
        line = (await proc.stdout.readline()).decode().split()
        if over_ws and line[:1] == ["WS"]:
            ws = (line[1], line[2])
            line = (await proc.stdout.readline()).decode().split()
    assert line and line[0] == "READY", line
    assert ws is not None or not over_ws, "the server did not listen over WebSocket"
    server = Server(Path(line[1]), line[2:], proc, gates, ws=ws)
    try:
        yield server
    finally:
        await server.stop()


# -- helpers shared by the attach tests ---------------------------------------------------


async def bound(server: Server) -> tuple[Client, str]:
    c = await server.connect()
    sid = await c.new()
    await c.until(lambda: c.rec.states(sid))
    return c, sid


def user_chunks(c: Client, sid: str) -> list[dict[str, Any]]:
    return [
        u
        for u in c.rec.updates_of(sid)
        if u["sessionUpdate"] == "user_message_chunk" and not u["_meta"].get("agent_channel.replay")
    ]


def card_status(c: Client, sid: str, tool_call_id: str) -> str | None:
    status = None
    for u in c.rec.updates_of(sid):
        if u.get("toolCallId") == tool_call_id and "status" in u:
            status = u["status"]
    return status


def tool_ids(c: Client, sid: str) -> list[str]:
    return [u["toolCallId"] for u in c.rec.updates_of(sid) if u["sessionUpdate"] == "tool_call"]


async def status(c: Client, sid: str | None = None) -> dict[str, Any]:
    """Execution ``sid``'s entry in the list (the first one without ``sid``)."""
    listed = (await c.ext("list"))["executions"]
    return next(e for e in listed if sid is None or e["id"] == sid)


async def parked(c: Client, sid: str | None = None) -> dict[str, Any]:
    """Poll the list (an observable condition) until the agent waits for the operator."""
    with anyio.fail_after(GUARD):
        while (s := await status(c, sid))["status"] != "waiting for operator":
            await anyio.lowlevel.checkpoint()
    return s
