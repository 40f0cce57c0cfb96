"""The shell verbs (A26): thin ACP clients of a running ``serve`` process.

Each verb finds the live servers in the discovery directory, connects to
them as an ACP client (no second protocol; the few methods a verb needs are
spoken by :mod:`._rpc`, so a verb does not pay for importing the SDK), asks,
prints, and leaves. TARGET is an execution id, a unique prefix of one, or nothing when
exactly one execution is served. Output is one readable line (or a short
block) by default and JSON with ``--json``; a failure is a :class:`CtlError`
that the CLI prints as one line with a non-zero exit.

The verbs' client never answers a permission request (A20): it waits until it
leaves, and the server then asks the next driver, so a passing ``send`` cannot
reject a tool call nobody looked at.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, NotRequired, TextIO, TypedDict, TypeVar, cast

from ._discovery import Record, RuntimeDirError, live_records, runtime_dir
from ._listen import TOKEN_KEY
from ._rpc import LINE_LIMIT, AnswerTooLarge, RpcClient, RpcError
from ._sigint import run

if TYPE_CHECKING:
    from acp.client.connection import ClientSideConnection

    from ._frames import EndParams, Execution, JsonObject, MessagesParams

ASK_SECONDS = 10.0
"""How long one request to a server may take before the verb gives up on it."""

EXT = "agent_channel/"
"""Our extension methods (the SDK adds the leading underscore)."""


class CtlError(Exception):
    """A verb failed; the message is the one line to print."""


class _Quiet:
    """The console's default ACP client: ignores the stream, never answers a permission
    request (it waits until we leave, and the server asks another driver)."""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.Event().wait()

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        from acp import RequestError

        raise RequestError.method_not_found(f"_{method}")


T = TypeVar("T")


@dataclass
class Server:
    """A connected, initialized server and what it serves (the verbs' side)."""

    record: Record
    conn: RpcClient
    executions: list[Execution]

    async def ask(self, method: str, params: Mapping[str, object]) -> JsonObject:
        """An extension request's answer: an object, read with checks (a server's word)."""
        answer = await _ask(self.conn.request("_" + EXT + method, params))
        return cast("JsonObject", answer) if isinstance(answer, dict) else {}


@dataclass
class Linked:
    """A connected, initialized server over the SDK's client side (the console's)."""

    record: Record
    conn: ClientSideConnection
    executions: list[Execution]


def _answer_errors() -> tuple[type[Exception], ...]:
    """The error answers a request can raise: ours, and the SDK's once it is loaded."""
    acp = sys.modules.get("acp")
    request_error: type[Exception] | None = getattr(acp, "RequestError", None)
    return (RpcError,) if request_error is None else (RpcError, request_error)


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


async def _ask(call: Awaitable[T]) -> T:
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
    """The ``initialize`` ``_meta`` a client sends: the token on TCP (see ``_listen``)."""
    t = record.transport
    token = t.get("token") if t["kind"] == "tcp" else None
    return {TOKEN_KEY: token} if token else {}


@asynccontextmanager
async def reached(record: Record) -> AsyncGenerator[Server, None]:
    """An initialized connection to ``record``'s server and its listing, for a verb."""
    reader, writer = await open_stream(record)
    conn = RpcClient(reader, writer)
    try:
        params: dict[str, object] = {"protocolVersion": 1}
        if meta := initialize_meta(record):
            params["_meta"] = meta
        await _ask(conn.request("initialize", params))
        listed = await _ask(conn.request("_" + EXT + "list", {}))
        yield Server(record, conn, executions_of(listed))
    finally:
        await conn.close()


@asynccontextmanager
async def connected(
    record: Record,
    client: Any = None,
    *,
    name: str | None = None,
    reader: asyncio.StreamReader | None = None,
) -> AsyncGenerator[Linked, None]:
    """An initialized SDK connection to ``record``'s server and its listing. ``client``
    handles what the server sends (default: a quiet one), ``name`` goes in ``clientInfo``,
    ``reader`` as for :func:`open_stream`."""
    from acp.client.connection import ClientSideConnection
    from acp.schema import Implementation

    reader, writer = await open_stream(record, reader)
    conn = ClientSideConnection(client or _Quiet(), writer, reader)  # pyright: ignore[reportArgumentType]
    info = Implementation(name=name, version="1") if name else None
    try:
        meta: dict[str, Any] = initialize_meta(record)  # the SDK's **kwargs are ``_meta``
        await _ask(conn.initialize(protocol_version=1, client_info=info, **meta))
        listed = await _ask(conn.ext_method(EXT + "list", {}))
        yield Linked(record, conn, executions_of(listed))
    finally:
        await conn.close()
        writer.close()


def executions_of(listed: object) -> list[Execution]:
    """The entries of a ``list`` answer that are objects (each from our server's ``describe``)."""
    found = (
        cast("dict[str, object]", listed).get("executions") if isinstance(listed, dict) else None
    )
    if not isinstance(found, list):
        return []
    return [cast("Execution", e) for e in cast("list[object]", found) if isinstance(e, dict)]


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
                problems.append(f"pid {record.pid}: {e}")
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


# -- the verbs ---------------------------------------------------------------------------


class _Listed(TypedDict):
    """One server in ``ls --json``."""

    pid: int
    where: str
    transport: str
    startedAt: float
    executions: NotRequired[list[Execution]]
    error: NotRequired[str]


Out = TextIO


def emit(out: Out, as_json: bool, data: object, line: str | Callable[[], str]) -> None:
    if as_json:
        out.write(json.dumps(data) + "\n")
    else:
        out.write((line if isinstance(line, str) else line()) + "\n")
    out.flush()


def refuse(out: Out, as_json: bool, data: object, why: str) -> NoReturn:
    """The server said no: the answer still goes out as JSON for programs, then the failure."""
    if as_json:
        emit(out, True, data, "")
    raise CtlError(why)


def _describe_execution(e: Execution) -> str:
    parts = [
        exec_id(e),
        str(e.get("status", "?")),
        f"turn {e.get('turnState', '?')}",
        f"{e.get('messageCount', '?')} messages",
        f"{e.get('clients', 0)} clients",
    ]
    if queued := e.get("queued"):
        parts.append(f"{queued} queued")
    if e.get("pendingApproval"):
        parts.append("approval pending")
    if e.get("drivable") is False:
        parts.append("observe-only")
    line = "  ".join(parts) + f"  {e.get('title', '')}".rstrip()
    for call in e.get("runningToolCalls", []):
        line += f"\n    tool call {call.get('id', '?')}  running  {call.get('title', '')}"
    return line.rstrip()


async def ls(out: Out, *, as_json: bool) -> int:
    records = live_records(runtime_dir(create=False))
    listing: list[_Listed] = []
    lines: list[str] = []
    for record in records:
        entry: _Listed = {
            "pid": record.pid,
            "where": record.where(),
            "transport": record.transport["kind"],
            "startedAt": record.started_at,
        }
        try:
            async with reached(record) as server:
                entry["executions"] = server.executions
        except CtlError as e:
            entry["error"] = str(e)
        listing.append(entry)
        started = time.strftime("%H:%M:%S", time.localtime(record.started_at))
        head = f"pid {record.pid}  {record.where()}  since {started}"
        if "error" in entry:
            lines.append(f"{head}  not answering: {entry['error']}")
            continue
        executions = entry.get("executions", [])
        lines.append(f"{head}  {len(executions)} executions")
        lines += ["  " + _describe_execution(e) for e in executions]
    if not records:
        lines.append("no agent-channel server is running")
    emit(out, as_json, {"servers": listing}, "\n".join(lines))
    return 0


def _summary_line(i: int, m: JsonObject) -> str:
    role = str(m.get("role", "?"))
    text = str(m.get("text", "")).replace("\n", " ")
    calls = m.get("toolCalls")
    names = [str(c) for c in calls] if isinstance(calls, list) else []
    ids = m.get("toolCallIds")
    named = [str(i) for i in ids] if isinstance(ids, list) else []
    if len(named) == len(names):  # an older server sends the names alone
        names = [f"{n} ({i})" for n, i in zip(names, named, strict=True)]
    tail = f"  [tools: {', '.join(names)}]" if names else ""
    if (answers := m.get("toolCallId")) and not names:
        tail = f"  [result of {answers}]"
    return f"{i:>4}  {role:<9} {text}{tail}"


async def messages(
    out: Out, target: str | None, *, tail: int | None, all_: bool, full: bool, as_json: bool
) -> int:
    async with servers() as found:
        server, execution = resolve(found, target)
        params: MessagesParams = {"sessionId": exec_id(execution)}
        if all_:
            params["all"] = True
        elif tail is not None:
            params["tail"] = tail
        if full:
            params["full"] = True
        envelope = await server.ask("messages", params)

    def readable() -> str:
        msgs = envelope.get("messages")
        items = msgs if isinstance(msgs, list) else []
        count = envelope.get("count", len(items))
        head = f"{exec_id(execution)}  {envelope.get('status', '?')}  {count} messages"
        first = max(0, int(count) - len(items)) if isinstance(count, int) else 0
        body = [
            json.dumps(m) if full else _summary_line(first + i + 1, m)
            for i, m in enumerate(items)
            if isinstance(m, dict)
        ]
        return "\n".join([head, *body])

    emit(out, as_json, envelope, readable)
    return 0


@asynccontextmanager
async def bound(target: str) -> AsyncGenerator[tuple[Server, str], None]:
    """A connection bound (``session/load``) to ``target``'s execution."""
    async with servers() as found:
        server, execution = resolve(found, target)
        session_id = exec_id(execution)
        params: dict[str, object] = {"cwd": os.getcwd(), "sessionId": session_id, "mcpServers": []}
        await _ask(server.conn.request("session/load", params))
        yield server, session_id


async def send(out: Out, target: str, text: str, *, as_json: bool) -> int:
    if not text.strip():
        raise CtlError("send: the message is empty")
    async with bound(target) as (server, session_id):
        prompt = [{"type": "text", "text": text}]
        params = {"sessionId": session_id, "prompt": prompt}
        response = await _ask(server.conn.request("session/prompt", params))
    answer = cast("JsonObject", response) if isinstance(response, dict) else {}
    data: JsonObject = {"sessionId": session_id, "stopReason": answer.get("stopReason")}
    if meta := answer.get("_meta"):
        data["_meta"] = meta
    emit(out, as_json, data, f"sent to {session_id}")
    return 0


async def cancel(out: Out, target: str, *, as_json: bool) -> int:
    """Interrupt the turn (``_agent_channel/cancel_turn``: ``session/cancel`` with an answer).
    With no turn running there is nothing to do, and the verb says so; the exit status is 0
    either way, since no turn runs afterwards (what the caller wanted)."""
    async with servers() as found:
        server, execution = resolve(found, target)
        session_id = exec_id(execution)
        answer = await server.ask("cancel_turn", {"sessionId": session_id})
    done = bool(answer.get("cancelled"))
    data: JsonObject = {"sessionId": session_id, "cancelled": done}
    if done:
        line = f"cancelled the turn of {session_id}"
    else:
        data["reason"] = answer.get("reason")
        line = f"nothing to cancel: no turn is running in {session_id} ({data['reason']})"
    emit(out, as_json, data, line)
    return 0


async def cancel_tool(out: Out, target: str, tool_call_id: str, *, as_json: bool) -> int:
    async with servers() as found:
        server, execution = resolve(found, target)
        session_id = exec_id(execution)
        answer = await server.ask(
            "cancel_tool_call", {"sessionId": session_id, "toolCallId": tool_call_id}
        )
    done = bool(answer.get("cancelled"))
    data: JsonObject = {"sessionId": session_id, "toolCallId": tool_call_id, "cancelled": done}
    if not done:
        reason = str(answer.get("reason", ""))
        data["reason"] = reason
        why = _NOT_CANCELLED.get(reason, "unknown, already finished, or its execution is gone")
        why = why.format(session_id=session_id)
        refuse(out, as_json, data, f"tool call {tool_call_id!r} was not cancelled: {why}")
    emit(out, as_json, data, f"cancelled tool call {tool_call_id} of {session_id}")
    return 0


_NOT_CANCELLED = {
    "not_in_region": "it is running but cannot be cancelled alone (its agent does not run it "
    "in ch.region(tool_call.id)); `agent-channel-acp cancel {session_id}` interrupts the turn",
    "cancelling": "it is being cancelled already",
    "finished": "it already finished",
    "unknown": "no running tool call has this id (see agent-channel-acp ls)",
    "gone": "its execution is gone",
}
"""Why ``cancel_tool_call`` answered false, by its ``reason``, in words."""


async def queue(out: Out, target: str, *, withdraw: str | None, as_json: bool) -> int:
    async with servers() as found:
        server, execution = resolve(found, target)
        session_id = exec_id(execution)
        if withdraw is not None:
            answer = await server.ask("withdraw", {"sessionId": session_id, "messageId": withdraw})
            done = bool(answer.get("withdrawn"))
            data = {"sessionId": session_id, "messageId": withdraw, "withdrawn": done}
            if not done:
                why = (
                    f"message {withdraw!r} was not withdrawn: unknown, or already read by the agent"
                )
                refuse(out, as_json, data, why)
            emit(out, as_json, data, f"withdrew message {withdraw} from {session_id}")
            return 0
        answer = await server.ask("queue", {"sessionId": session_id})

    def readable() -> str:
        entries = answer.get("messages")
        items = entries if isinstance(entries, list) else []
        if not items:
            return f"{session_id}: nothing queued"
        rows = [f"{session_id}: {len(items)} queued"]
        for q in items:
            if isinstance(q, dict):
                text = str(q.get("text", "")).replace("\n", " ")
                who = q.get("client", "")
                rows.append(f"  {q.get('id', '?')}  {who}  {text}")
        return "\n".join(rows)

    emit(out, as_json, {"sessionId": session_id, **answer}, readable)
    return 0


async def end(out: Out, target: str, *, reason: str | None, as_json: bool) -> int:
    async with servers() as found:
        server, execution = resolve(found, target)
        session_id = exec_id(execution)
        params: EndParams = {"sessionId": session_id}
        if reason:
            params["reason"] = reason
        await server.ask("end", params)
    emit(out, as_json, {"sessionId": session_id}, f"ended {session_id}")
    return 0


def run_verb(verb: Callable[[], Coroutine[object, object, int]]) -> int:
    """Run one verb; a failure is one line on stderr and exit status 1."""
    try:
        return run(verb())
    except (CtlError, RuntimeDirError) as e:
        sys.stderr.write(f"agent-channel-acp: {e}\n")
        return 1
    except KeyboardInterrupt:
        return 130
