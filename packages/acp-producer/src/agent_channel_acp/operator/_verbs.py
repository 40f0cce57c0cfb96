"""The shell verbs (A26): thin ACP clients of a running ``serve`` process.

Each verb finds the live servers in the discovery directory, connects to
them as an ACP client (no second protocol; the few methods a verb needs are
spoken by :mod:`..wire._rpc`, so a verb does not pay for importing the SDK), asks,
prints, and leaves. TARGET is an execution id, a unique prefix of one, or nothing when
exactly one execution is served. Output is one readable line (or a short
block) by default and JSON with ``--json``; a failure is a :class:`CtlError`
that the CLI prints as one line with a non-zero exit.

The verbs' client never answers a permission request (A20): it waits until it
leaves, and the server then asks the next driver, so a passing ``send`` cannot
reject a tool call nobody looked at.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import AsyncGenerator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, NoReturn, NotRequired, TextIO, TypedDict, cast

from .._sigint import run
from ..wire._discovery import Record, RuntimeDirError, live_records, runtime_dir
from ._connect import (
    CtlError,
    Server,
    ask,
    exec_id,
    failed_at,
    reached,
    resolve,
    resolve_child,
    servers,
)

if TYPE_CHECKING:
    from ..wire._frames import (
        ChildEntry,
        EndParams,
        Execution,
        JsonObject,
        MessagesParams,
        ServerAbout,
        SteerChildParams,
        StopChildParams,
    )


class _Listed(TypedDict):
    """One server in ``ls --json``."""

    pid: NotRequired[int]
    where: str
    transport: str
    startedAt: NotRequired[float]
    store: NotRequired[str | None]
    """The file its store keeps executions in, or None: it keeps none."""
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
    waiting = e.get("pendingApprovals", [])
    if len(waiting) > 1:
        parts.append(f"{len(waiting)} approvals pending")
    elif waiting or e.get("pendingApproval"):  # (a server of before the list: its one slot)
        parts.append("approval pending")
    if e.get("pendingQuestion"):
        parts.append("question pending")
    if e.get("drivable") is False:
        parts.append("observe-only")
    if restored := e.get("restored"):  # a server restarted on its store brought it back
        parts.append(f"restored {time.strftime('%H:%M:%S', time.localtime(restored))}")
    line = "  ".join(parts) + f"  {e.get('title', '')}".rstrip()
    for call in e.get("runningToolCalls", []):
        line += f"\n    tool call {call.get('id', '?')}  running  {call.get('title', '')}"
    asking = {a.get("childId") for a in waiting}
    for child in e.get("children", []):
        row = _describe_child(child, asking=child.get("id") in asking)
        line += "\n" + "  " * (child.get("depth", 1) + 1) + row
    return line.rstrip()


def _describe_child(c: ChildEntry, *, asking: bool = False) -> str:
    """A child's line under its execution (K11): indented by its depth; ``asking`` when a
    call of its waits for an operator's approval."""
    status = str(c.get("status", "?"))
    if status == "ended":
        status = f"ended ({c.get('end') or '?'})"
    parts = [f"child {c.get('id', '?')}", status, f"{c.get('turns', 0)} turns"]
    if tokens := c.get("tokens"):
        parts.append(f"{tokens} tokens")
    if asking:
        parts.append("approval pending")
    return "  ".join(parts) + f"  {c.get('name', '')}"


async def ls(out: Out, *, as_json: bool) -> int:
    """List the servers and their executions. A server named with ``--server`` that cannot
    be reached fails the verb (one line, exit 1); of the local ones, those that answer are
    listed and each that does not is one line on stderr (in ``--json``, an entry with its
    ``error``), with exit status 1."""
    records = live_records(runtime_dir(create=False))
    listing: list[_Listed] = []
    lines: list[str] = []
    failed = False
    for record in records:
        try:
            async with reached(record) as server:
                entry = _listed(record, server.about)
                entry["executions"] = server.executions
        except CtlError as e:
            if record.named:  # the one server asked for: nothing to list
                raise CtlError(failed_at(record, e)) from None
            failed = True
            entry = _listed(record, None)
            entry["error"] = str(e)
            sys.stderr.write(f"agent-channel-acp: {record.name()} is not answering: {e}\n")
            listing.append(entry)
            continue
        listing.append(entry)
        pid = entry.get("pid")
        head = [f"pid {pid}" if pid else "remote", entry["where"]]
        if "startedAt" in entry:
            head.append(f"since {time.strftime('%H:%M:%S', time.localtime(entry['startedAt']))}")
        if store := entry.get("store"):
            head.append(f"store {store}")
        executions = entry.get("executions", [])
        lines.append("  ".join([*head, f"{len(executions)} executions"]))
        lines += ["  " + _describe_execution(e) for e in executions]
    if not records:
        lines.append("no agent-channel server is running")
    if lines or as_json:
        emit(out, as_json, {"servers": listing}, "\n".join(lines))
    return 1 if failed else 0


def _listed(record: Record, about: ServerAbout | None) -> _Listed:
    """A server's entry in ``ls --json``: its pid and start as it says them, else as its
    discovery record does; a ``--server`` one that does not say them (an older server) has
    neither, since nothing here knows them. ``store`` only when the server says."""
    entry: _Listed = {"where": record.where(), "transport": record.transport["kind"]}
    if about is not None:
        entry.update(pid=about["pid"], startedAt=about["startedAt"], store=about["store"])
    elif not record.named:
        entry.update(pid=record.pid, startedAt=record.started_at)
    return entry


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
    out: Out,
    target: str | None,
    *,
    tail: int | None,
    all_: bool,
    full: bool,
    child: str | None = None,
    as_json: bool,
) -> int:
    async with servers() as found:
        server, execution = resolve(found, target)
        params: MessagesParams = {"sessionId": exec_id(execution)}
        if child:
            child = resolve_child(execution, child)
            params["childId"] = child
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
        whose = f"{exec_id(execution)} child {child}" if child else exec_id(execution)
        head = f"{whose}  {envelope.get('status', '?')}  {count} messages"
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
        await ask(server.conn.request("session/load", params))
        yield server, session_id


async def send(out: Out, target: str, text: str, *, as_json: bool) -> int:
    if not text.strip():
        raise CtlError("send: the message is empty")
    async with bound(target) as (server, session_id):
        prompt = [{"type": "text", "text": text}]
        params = {"sessionId": session_id, "prompt": prompt}
        response = await ask(server.conn.request("session/prompt", params))
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


async def answer(out: Out, target: str, text: str, *, as_json: bool) -> int:
    """Answer the model's oldest pending question (Q4), however the driver was asked (its
    form or request is voided). Exit status 1 when no question is waiting."""
    if not text.strip():
        raise CtlError("answer: the answer is empty")
    async with servers() as found:
        server, execution = resolve(found, target)
        session_id = exec_id(execution)
        reply = await server.ask("answer", {"sessionId": session_id, "text": text})
    data: JsonObject = {"sessionId": session_id, **reply}
    if not reply.get("answered"):
        refuse(out, as_json, data, f"nothing to answer: no question is waiting in {session_id}")
    emit(out, as_json, data, f"answered the question of {session_id}")
    return 0


async def steer_child(out: Out, target: str, child: str, text: str, *, as_json: bool) -> int:
    """``send --child``: steer one child as the operator (K12); its parent's model is told.
    Exit status 1 when the child never read it (it had ended)."""
    if not text.strip():
        raise CtlError("send: the message is empty")
    async with servers() as found:
        server, execution = resolve(found, target)
        session_id = exec_id(execution)
        child = resolve_child(execution, child)
        params: SteerChildParams = {"sessionId": session_id, "childId": child, "text": text}
        answer = await server.ask("steer_child", params)
    outcome = str(answer.get("outcome", "?"))
    data: JsonObject = {"sessionId": session_id, "childId": child, **answer}
    if outcome == "undelivered":
        why = answer.get("reason") or "it had ended"
        refuse(out, as_json, data, f"child {child} of {session_id} did not read it: {why}")
    if outcome == "delivered":
        line = f"steered child {child} of {session_id}: it read the message"
    else:
        line = f"steered child {child} of {session_id}: queued, it reads it at its next step"
    emit(out, as_json, data, line)
    return 0


async def stop_child(out: Out, target: str, child: str, *, as_json: bool) -> int:
    """``cancel --child``: stop one child (K12); the others and the parent go on, and the
    parent's model is told at its next step. Exit status 0 when it had ended already (no
    child runs afterwards, which is what the caller wanted), as ``cancel`` does."""
    async with servers() as found:
        server, execution = resolve(found, target)
        session_id = exec_id(execution)
        child = resolve_child(execution, child)
        params: StopChildParams = {"sessionId": session_id, "childId": child}
        answer = await server.ask("stop_child", params)
    done = bool(answer.get("stopped"))
    data: JsonObject = {"sessionId": session_id, "childId": child, **answer}
    if done:
        line = f"stopped child {child} of {session_id}"
    else:
        line = f"nothing to stop: child {child} of {session_id} had ended"
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
