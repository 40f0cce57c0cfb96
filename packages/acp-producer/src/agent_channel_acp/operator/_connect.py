"""Reaching a running ``serve``: discovery, a byte stream, ``initialize``, the listing.

The verbs and the bridge speak their few methods through :mod:`..wire._rpc`, so they do not pay
for importing the SDK (A26: a verb starts in about 0.2 s); the console's SDK connection is
:mod:`._sdk`. A failure is a :class:`CtlError`: one line for a person, a non-zero exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncGenerator, Awaitable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar, cast

from ..wire._discovery import TOKEN_KEY, Record, RuntimeDirError, live_records, runtime_dir
from ..wire._errors import WireError
from ..wire._rpc import LINE_LIMIT, AnswerTooLarge, RpcClient

if TYPE_CHECKING:
    from ..wire._frames import Execution, JsonObject, ServerAbout, WsTransport

ASK_SECONDS = 10.0
"""How long one request to a server may take before the verb gives up on it."""

EXT = "agent_channel/"
"""Our extension methods (the SDK adds the leading underscore)."""


class CtlError(Exception):
    """A verb failed; the message is the one line to print."""


T = TypeVar("T")


@dataclass
class Server:
    """A connected, initialized server and what it serves (the verbs' side)."""

    record: Record
    conn: RpcClient
    executions: list[Execution]
    about: ServerAbout | None = None
    """What the server says of itself (None from a server older than it)."""

    async def ask(self, method: str, params: Mapping[str, object]) -> JsonObject:
        """An extension request's answer: an object, read with checks (a server's word)."""
        answer = await ask(self.conn.request("_" + EXT + method, params))
        return cast("JsonObject", answer) if isinstance(answer, dict) else {}


def _answer_errors() -> tuple[type[Exception], ...]:
    """The error answers a request can raise: ours, and the SDK's once it is loaded."""
    acp = sys.modules.get("acp")
    request_error: type[Exception] | None = getattr(acp, "RequestError", None)
    return (WireError,) if request_error is None else (WireError, request_error)


async def ask_within(call: Awaitable[T], error: type[Exception]) -> T:
    """Await one request, turning its failures into ``error`` with one readable line."""
    try:
        async with asyncio.timeout(ASK_SECONDS):
            return await call
    except TimeoutError:
        raise error(f"the server did not answer within {ASK_SECONDS:g} s") from None
    except _answer_errors() as e:
        raise error(describe_error(e)) from None
    except AnswerTooLarge as e:
        raise error(str(e)) from None
    except ConnectionError:
        raise error("the server closed the connection") from None


async def ask(call: Awaitable[T]) -> T:
    return await ask_within(call, CtlError)


def describe_error(e: Exception) -> str:
    """An error answer as one line for a person: the server's ``data.reason`` alone when it
    gives one (the JSON-RPC message, "Invalid request" and the like, is for programs), else
    the message and its code."""
    data: object = getattr(e, "data", None)
    fields = cast("dict[str, object]", data) if isinstance(data, dict) else {}
    reason = fields.get("reason") or fields.get("details")
    return str(reason) if reason else f"{e} (code {getattr(e, 'code', '?')})"


async def open_stream(
    record: Record, reader: asyncio.StreamReader | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A byte stream to the server ``record`` names, read through ``reader`` if given (the
    console's reads a fast stream its own way)."""
    t = record.transport
    loop = asyncio.get_running_loop()
    reader = reader or asyncio.StreamReader(limit=LINE_LIMIT, loop=loop)
    protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
    if t["kind"] == "ws":
        from ..wire._ws import ws_streams

        try:
            async with asyncio.timeout(ASK_SECONDS):
                return await ws_streams(t["url"], cafile=t.get("cafile"), reader=reader)
        except (OSError, TimeoutError) as e:
            raise CtlError(
                f"cannot connect to the server at {record.named or record.where()}: {e}"
            ) from None
    try:
        async with asyncio.timeout(ASK_SECONDS):
            if t["kind"] == "unix":
                transport, _ = await loop.create_unix_connection(lambda: protocol, t["path"])
            else:
                transport, _ = await loop.create_connection(lambda: protocol, t["host"], t["port"])
    except (OSError, TimeoutError) as e:
        raise CtlError(f"cannot connect to the server at {record.where()}: {e}") from None
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)


def initialize_meta(record: Record) -> dict[str, str]:
    """The ``initialize`` ``_meta`` a client sends: the token on TCP and WebSocket."""
    t = record.transport
    token = t.get("token") if t["kind"] != "unix" else None
    return {TOKEN_KEY: token} if token else {}


def remote_record(url: str, token_file: str | None, cafile: str | None) -> Record:
    """The server ``--server URL`` names, as a record: its token from ``token_file``, else
    from the local discovery record that lists that url (none: the server will say)."""
    from urllib.parse import urlsplit

    from ..wire._discovery import TokenFileError, read_token_file

    given = url
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss") or not parts.hostname or parts.port is None:
        raise CtlError(f"--server takes ws://HOST:PORT or wss://HOST:PORT, not {url!r}")
    path = parts.path if parts.path not in ("", "/") else "/acp"
    url = f"{parts.scheme}://{parts.netloc}{path}"
    transport: WsTransport = {"kind": "ws", "url": url}
    if cafile:
        transport["cafile"] = cafile
    token: str | None = None
    if token_file:
        try:
            token = read_token_file(token_file)
        except TokenFileError as e:
            raise CtlError(str(e)) from None
    else:
        with contextlib.suppress(RuntimeDirError):
            for r in live_records(runtime_dir(create=False)):
                ws = r.ws
                if ws is not None and urlsplit(ws["url"]).port == parts.port and ws.get("token"):
                    token = ws.get("token")
                    break
    if token:
        transport["token"] = token
    return Record(pid=0, transport=transport, named=given)


@asynccontextmanager
async def reached(record: Record) -> AsyncGenerator[Server, None]:
    """An initialized connection to ``record``'s server and its listing, for a verb."""
    reader, writer = await open_stream(record)
    conn = RpcClient(reader, writer)
    try:
        params: dict[str, object] = {"protocolVersion": 1}
        if meta := initialize_meta(record):
            params["_meta"] = meta
        await ask(conn.request("initialize", params))
        listed = await ask(conn.request("_" + EXT + "list", {}))
        yield Server(record, conn, executions_of(listed), about_of(listed))
    finally:
        await conn.close()


def executions_of(listed: object) -> list[Execution]:
    """The entries of a ``list`` answer that are objects (each from our server's ``describe``)."""
    found = (
        cast("dict[str, object]", listed).get("executions") if isinstance(listed, dict) else None
    )
    if not isinstance(found, list):
        return []
    return [cast("Execution", e) for e in cast("list[object]", found) if isinstance(e, dict)]


def failed_at(record: Record, e: CtlError) -> str:
    """Why ``record``'s server could not be used, naming it as the user did (``--server``)
    or by its pid; never "pid 0"."""
    why = str(e)
    if record.named:
        return why if record.named in why else f"{record.named}: {why}"
    return f"pid {record.pid}: {why}"


def about_of(listed: object) -> ServerAbout | None:
    """The ``server`` entry of a ``list`` answer, when it has the shape ours sends."""
    found = cast("dict[str, object]", listed).get("server") if isinstance(listed, dict) else None
    if not isinstance(found, dict):
        return None
    about = cast("dict[str, object]", found)
    pid, started, store = about.get("pid"), about.get("startedAt"), about.get("store")
    if not isinstance(pid, int) or not isinstance(started, int | float):
        return None
    return {
        "pid": pid,
        "startedAt": float(started),
        "store": store if isinstance(store, str) else None,
    }


def exec_id(execution: Execution) -> str:
    return str(execution.get("id", ""))


@asynccontextmanager
async def servers() -> AsyncGenerator[list[Server], None]:
    """Every live server, connected; one that cannot be reached is skipped (and said)."""
    records = live_records(runtime_dir(create=False))
    if not records:
        raise CtlError(f"no agent-channel server is running (none in {runtime_dir(create=False)})")
    async with AsyncExitStack() as stack:
        found: list[Server] = []
        problems: list[str] = []
        for record in records:
            try:
                found.append(await stack.enter_async_context(reached(record)))
            except CtlError as e:
                problems.append(failed_at(record, e))
        if not found:
            raise CtlError("; ".join(problems))
        for problem in problems:
            sys.stderr.write(f"agent-channel-acp: skipping a server: {problem}\n")
        yield found


def resolve(found: list[Server], target: str | None) -> tuple[Server, Execution]:
    """The execution ``target`` names: an id, a unique prefix, or the only one."""
    every = [(s, e) for s in found for e in s.executions]
    if target is None:
        if len(every) == 1:
            return every[0]
        if not every:
            raise CtlError("no executions are being served")
        raise CtlError(f"{len(every)} executions are served: name one (see agent-channel-acp ls)")
    exact = [(s, e) for s, e in every if exec_id(e) == target]
    if exact:
        return exact[0]
    matches = [(s, e) for s, e in every if exec_id(e).startswith(target)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise CtlError(f"no execution matches {target!r} (see agent-channel-acp ls)")
    ids = ", ".join(exec_id(e) for _, e in matches)
    raise CtlError(f"{target!r} matches {len(matches)} executions ({ids}): give more of the id")


def resolve_child(execution: Execution, child: str) -> str:
    """The child of ``execution`` that ``child`` names, as ``resolve`` reads a target: its id,
    or a unique prefix of one. A prefix that matches none is sent as it is (the server names
    it unknown, or one started since the listing); one that matches several is an error."""
    ids = [str(c.get("id", "")) for c in execution.get("children", [])]
    if child in ids:
        return child
    matches = [i for i in ids if i.startswith(child)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        return child
    raise CtlError(
        f"{child!r} matches {len(matches)} children of {exec_id(execution)} "
        f"({', '.join(sorted(matches))}): give more of the id"
    )
