"""Attach mode: operators join executions that run on their own.

An :class:`AttachServer` holds any number of top-level executions (one
:class:`~._hub.Hub` each; its id is the ACP session id) and serves any number of
client connections (a listener hands each accepted socket to
:meth:`AttachServer.serve_connection`). Each client session is a
:class:`~._binding.Binding`: bound to one execution as a driver or an observer, or
still choosing one (the picker, A3). Prompts are acknowledged at once and queued for
the agent's next boundary (A7); everything the execution does streams to every
binding of it. The rules are A3-A27 in ``docs/acp-behaviour.md``.

A bind (``session/new``, ``session/load`` or a pick) takes effect once its response is
on the wire: the transport reports it, and the binding's preamble, replay and live
stream start in that same step, so nothing is missed or sent twice (A5).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, ClassVar, cast
from uuid import uuid4

from acp import Agent, RequestError
from acp.agent.connection import AgentSideConnection
from acp.schema import (
    ClientCapabilities,
    CloseSessionResponse,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallUpdate,
)
from agent_channel import (
    AgentRef,
    ChannelClosed,
    ChannelFull,
    ChatMessage,
    ChatMessageAssistant,
    open_channel,
)

from . import _debug as debug
from . import _mapping as m
from ._binding import Binding
from ._hub import META, Hub, not_attachable, queue_full
from ._outbox import RUN_MAX
from ._server import initialize_response, not_found, shadowed_names
from ._session import BACKLOG_LIMIT, NotRunnable
from ._transport import LineTransport

log = logging.getLogger("agent_channel_acp")

TAIL = 20
"""Messages ``_agent_channel/messages`` returns by default (A19)."""
MIN_PREFIX = 4
"""Characters an execution id prefix needs (shorter digit strings are picker numbers)."""
SUMMARY_TEXT = 200
"""Characters of a message's text in a summary."""

_WATCHED = frozenset({"session/new", "session/load", "session/prompt"})


class AttachServer:
    """Top-level executions served to attaching clients (see the module docstring).

    ``replay`` bounds each execution's replay ring; ``backlog_limit`` the bytes one
    client session may fall behind before it is dropped; finished executions are kept
    (listed, loadable, readable) until :attr:`finished_kept` newer ones finished.
    """

    finished_kept: ClassVar[int] = 256

    def __init__(
        self,
        *,
        replay: int = 100,
        approve: bool = False,
        backlog_limit: int = BACKLOG_LIMIT,
        context_window: int | None = None,
    ) -> None:
        if backlog_limit < RUN_MAX:
            raise ValueError(f"backlog_limit must be at least {RUN_MAX} bytes, not {backlog_limit}")
        if replay < 0:
            raise ValueError(f"replay must be 0 or more, not {replay}")
        self._replay = replay
        self._approve = approve
        self._backlog_limit = backlog_limit
        self._context_window = context_window
        self._hubs: OrderedDict[str, Hub] = OrderedDict()
        self._forgotten: OrderedDict[str, None] = OrderedDict()
        self._clients: set[_Client] = set()
        self._runs: set[asyncio.Task[Any]] = set()
        self.on_change: Callable[[], None] | None = None
        """Called when the list of executions or their state changes (discovery records)."""

    # -- executions --------------------------------------------------------------------

    def add(self, ref: AgentRef, *, title: str) -> str:
        """Serve one top-level execution; returns its execution id (the ACP session id)."""
        execution_id = uuid4().hex
        hub = Hub(
            execution_id,
            ref,
            title=title,
            replay=self._replay,
            approve=self._approve,
            context_window=self._context_window,
            on_change=self._changed,
        )
        self._hubs[execution_id] = hub
        self._changed()
        return execution_id

    async def run(self, body: Callable[[], Awaitable[object]], *, title: str) -> str:
        """Open a channel, add it, run ``body`` to completion inside it.

        The execution is live (an operator surface is attached, so an interactive agent
        waits for messages instead of ending). ``_agent_channel/end`` cancels the body;
        that ends this call normally.
        """
        async with open_channel() as ch:
            ref = ch.ref()
            execution_id = self.add(ref, title=title)
            hub = self._hubs[execution_id]
            release = ref.mark_live()
            run = body()
            if not inspect.isawaitable(run):
                release()
                raise NotRunnable(f"calling the body returned {run!r}, not an awaitable")
            task = asyncio.ensure_future(run)
            self._runs.add(task)
            ended = False

            def end() -> None:
                nonlocal ended
                ended = True
                if ch.stop_reason is None:
                    ch.stop_reason = "cancelled"
                task.cancel()

            hub.ending = end
            try:
                await task
            except asyncio.CancelledError:
                if not ended or _cancelling():
                    raise
            finally:
                self._runs.discard(task)
                release()
        return execution_id

    def executions(self) -> list[dict[str, Any]]:
        """What ``_agent_channel/list`` returns (A24), also written into discovery records."""
        return [hub.describe() for hub in self._hubs.values()]

    def hub(self, session_id: str) -> Hub:
        hub = self._hubs.get(session_id)
        if hub is not None:
            return hub
        if session_id in self._forgotten:
            raise not_found(session_id, "the execution finished and is no longer kept")
        raise not_found(session_id, "no execution with this id on this server")

    def known(self, session_id: str) -> bool:
        return session_id in self._hubs or session_id in self._forgotten

    def _changed(self) -> None:
        finished = [h for h in self._hubs.values() if not h.running and not h.bindings]
        for hub in finished[: max(0, len(finished) - self.finished_kept)]:
            del self._hubs[hub.id]
            self._forgotten[hub.id] = None
            if len(self._forgotten) > 4096:
                self._forgotten.popitem(last=False)
        if self.on_change is not None:
            try:
                self.on_change()
            except Exception:
                log.exception("the attach server's change hook failed")

    # -- connections -------------------------------------------------------------------

    async def serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Serve one client connection (already authenticated by the listener) until it closes."""
        client = _Client(self)
        transport = LineTransport(
            reader,
            writer,
            shadowed=shadowed_names(client),
            watch=_WATCHED,
            on_response=client.answered,
        )
        client.transport = transport
        conn = AgentSideConnection(
            cast("Agent", client), transport, listening=False, use_unstable_protocol=True
        )
        client.conn = conn
        self._clients.add(client)
        try:
            await conn.listen()
        finally:
            self._clients.discard(client)
            client.closed()
            with contextlib.suppress(Exception):
                await asyncio.shield(conn.close())

    async def aclose(self) -> None:
        """End every execution this server started (their clients get the final turn_state
        and ``session_ended``) and stop watching the others."""
        for hub in list(self._hubs.values()):
            if hub.running and hub.ending is not None:
                hub.ending()
        runs = list(self._runs)
        if runs:
            await asyncio.wait(runs, timeout=1.0)
        for hub in self._hubs.values():
            hub.close()


class _Client:
    """One connection's ACP handler: its sessions (bindings) and its requests.

    A plain class, not ``acp.Agent``: unimplemented methods must answer -32601.
    """

    def __init__(self, server: AttachServer) -> None:
        self._server = server
        self.transport: LineTransport | None = None
        self.conn: AgentSideConnection | None = None
        self.name = f"client-{uuid4().hex[:8]}"
        self._bindings: dict[str, Binding] = {}
        self._opening: dict[str, tuple[Hub | None, bool, str]] = {}  # wire id -> bind on response
        self._closed = False

    # -- Peer ----------------------------------------------------------------------------

    @property
    def writer(self) -> LineTransport:
        if self.transport is None:
            raise RuntimeError("serve the client with AttachServer.serve_connection()")
        return self.transport

    @property
    def gone(self) -> bool:
        transport = self.transport
        return self._closed or transport is None or transport.gone

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption]
    ) -> Any:
        assert self.conn is not None
        return await self.conn.request_permission(
            session_id=session_id, tool_call=tool_call, options=options
        )

    def closed(self) -> None:
        """The connection ended: its bindings leave; the executions go on (A15)."""
        self._closed = True
        for binding in self._bindings.values():
            binding.leave()
        self._bindings.clear()

    # -- ACP methods -------------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        if client_info is not None and client_info.name:
            self.name = f"{client_info.name}-{self.name.removeprefix('client-')}"
        return initialize_response(protocol_version)

    async def new_session(
        self,
        cwd: str,
        mcp_servers: list[Any] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        observe = _wants_observe(kwargs)
        drivable = [h for h in self._server._hubs.values() if h.running]  # pyright: ignore[reportPrivateUsage]
        if len(drivable) == 1:  # A3: bind at once
            hub = drivable[0]
            self._open_later(hub.id, hub, observe)
            return NewSessionResponse(session_id=hub.id)
        wire_id = f"pick-{uuid4().hex}"
        self._open_later(wire_id, None, observe)
        return NewSessionResponse(session_id=wire_id)

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[Any] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        binding = self._bindings.get(session_id)
        hub = binding.hub if binding is not None and binding.hub is not None else None
        if hub is None:
            hub = self._server.hub(session_id)
        self._open_later(session_id, hub, _wants_observe(kwargs))
        return LoadSessionResponse()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        binding = self._binding(session_id)
        if not prompt:
            raise RequestError.invalid_params({"reason": "the prompt is empty"})
        content = m.prompt_content(prompt)
        text = (
            content
            if isinstance(content, str)
            else " ".join(getattr(p, "text", "") for p in content)
        )
        hub = binding.hub
        if hub is None:
            self._pick(binding, text.strip())
            return PromptResponse(stop_reason="end_turn")
        if not hub.running:
            raise not_attachable(session_id)
        if binding.observe:
            raise RequestError.invalid_request(
                {"reason": "this session observes only: it cannot prompt", "sessionId": session_id}
            )
        try:
            message_id = hub.post(content, text, self.name)
        except ChannelClosed:
            raise not_attachable(session_id) from None
        except ChannelFull as e:
            raise queue_full(session_id, e) from None
        hub.prompted(binding)
        await self._caught_up()  # the queue's update goes out before the answer
        # A7: the agent reads it at its boundary; the id is the one the queue lists (A25)
        return PromptResponse(stop_reason="end_turn", field_meta={f"{META}messageId": message_id})

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        binding = self._bindings.get(session_id)
        if binding is None or binding.hub is None:
            log.warning("cancel for unknown session %r ignored", session_id)
            return
        if not binding.is_driver:
            log.info("cancel from an observe-only session %r ignored", session_id)  # A14
            return
        binding.hub.interrupt()

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        binding = self._binding(session_id)
        binding.leave()
        del self._bindings[session_id]
        return CloseSessionResponse()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if debug.asked(method):
            hubs = self._server._hubs.values()  # pyright: ignore[reportPrivateUsage]
            return debug.counts(
                connections=len(self._server._clients),  # pyright: ignore[reportPrivateUsage]
                executions=len(hubs),
                bindings=sum(len(h.bindings) for h in hubs),
            )
        handler = _EXT.get(method)
        if handler is None:
            raise RequestError.method_not_found(f"_{method}")
        if not isinstance(params, dict):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise RequestError.invalid_params({"reason": "params must be an object"})
        result = await handler(self, params)
        await self._caught_up()
        return result

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        log.info("ignoring extension notification _%s", method)

    async def _caught_up(self) -> None:
        """Wait until every update sent to this connection's sessions so far is written:
        an answer never overtakes them (a client that reads "waiting for operator" has
        the turn that led there, even when its stream is backed up)."""
        for binding in list(self._bindings.values()):
            await binding.flush()

    # -- extension requests ------------------------------------------------------------

    async def _list(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"executions": self._server.executions()}

    async def _messages(self, params: dict[str, Any]) -> dict[str, Any]:
        hub = self._target(params)
        every = params.get("all", False)
        full = params.get("full", False)
        tail = params.get("tail")
        if not isinstance(every, bool) or not isinstance(full, bool):
            raise RequestError.invalid_params({"reason": "all and full must be booleans"})
        if tail is not None and every:
            raise RequestError.invalid_params({"reason": "all and tail are mutually exclusive"})
        if tail is None:
            tail = TAIL
        if isinstance(tail, bool) or not isinstance(tail, int) or tail < 1:
            raise RequestError.invalid_params({"reason": "tail must be an integer of at least 1"})
        messages = hub.messages()
        picked = messages if every else messages[-tail:]
        return {
            "as_of": datetime.now(UTC).isoformat(),
            "sessionId": hub.id,
            "status": hub.status,
            "count": len(messages),
            "messages": [msg.model_dump(mode="json") if full else _summary(msg) for msg in picked],
        }

    async def _queue(self, params: dict[str, Any]) -> dict[str, Any]:
        hub = self._target(params)
        return {"sessionId": hub.id, "messages": [q.as_json() for q in hub.queue.values()]}

    async def _withdraw(self, params: dict[str, Any]) -> dict[str, Any]:
        hub = self._target(params)
        message_id = _string(params, "messageId")
        withdrawn = hub.withdraw(message_id)
        return {"withdrawn": withdrawn}

    async def _cancel_tool_call(self, params: dict[str, Any]) -> dict[str, Any]:
        session_id = _string(params, "sessionId")
        tool_call_id = _string(params, "toolCallId")
        if not self._server.known(session_id) and session_id not in self._bindings:
            raise not_found(session_id, "no execution with this id on this server")
        try:
            hub = self._target(params)
        except RequestError:
            return {"cancelled": False, "reason": "gone"}
        if hub.cancel_tool_call(tool_call_id):
            return {"cancelled": True}
        return {"cancelled": False, "reason": hub.tool_call_state(tool_call_id)}

    async def _cancel_turn(self, params: dict[str, Any]) -> dict[str, Any]:
        """What ``session/cancel`` does, for a client that must know whether a turn was
        running (the ``cancel`` verb): ``cancelled`` false, with the execution's status as
        the reason, when there was none to stop."""
        hub = self._target(params)
        if hub.interrupt():
            return {"cancelled": True}
        return {"cancelled": False, "reason": hub.status}

    async def _end(self, params: dict[str, Any]) -> dict[str, Any]:
        hub = self._target(params)
        reason = params.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise RequestError.invalid_params({"reason": "reason must be a string"})
        if hub.running:
            if hub.ending is None:
                raise RequestError.invalid_request(
                    {
                        "reason": "this execution was not started by the server: "
                        "its program ends it",
                        "sessionId": hub.id,
                    }
                )
            log.info("execution %s: ended by %s (%s)", hub.id, self.name, reason or "no reason")
            hub.ending()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5.0):
                    await hub.ended.wait()
        return {}

    # -- plumbing ----------------------------------------------------------------------

    def _binding(self, session_id: str) -> Binding:
        binding = self._bindings.get(session_id)
        if binding is not None:
            return binding
        if self._server.known(session_id):
            raise not_found(session_id, "not bound on this connection (session/load binds it)")
        raise not_found(session_id, "no such session on this server")

    def _target(self, params: dict[str, Any]) -> Hub:
        session_id = _string(params, "sessionId")
        binding = self._bindings.get(session_id)
        if binding is not None and binding.hub is not None:
            return binding.hub
        return self._server.hub(session_id)

    def _open_later(self, wire_id: str, hub: Hub | None, observe: bool, note: str = "") -> None:
        self._opening[wire_id] = (hub, observe, note)

    def answered(self, method: str, params: Any, response: dict[str, Any]) -> None:
        """Transport hook: a watched request's response is on the wire; bind now (A5)."""
        if "result" not in response:
            return
        if method == "session/new":
            result = response["result"]
            wire_id = result.get("sessionId") if isinstance(result, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        else:
            wire_id = params.get("sessionId") if isinstance(params, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if not isinstance(wire_id, str):
            return
        opening = self._opening.pop(wire_id, None)
        if opening is None or self._closed or self.transport is None:
            return
        hub, observe, note = opening
        binding = self._bindings.get(wire_id)
        if binding is None:
            binding = Binding(wire_id, self, backlog_limit=self._server._backlog_limit)  # pyright: ignore[reportPrivateUsage]
            self._bindings[wire_id] = binding
        else:
            binding.rebind()
        binding.observe = observe or (hub is not None and not hub.running)
        if hub is None:
            self._show_picker(binding, note)
        else:
            hub.bind(binding, driver=not binding.observe)

    def _targets(self) -> list[Hub]:
        hubs = list(self._server._hubs.values())  # pyright: ignore[reportPrivateUsage]
        return [h for h in hubs if h.running] + [h for h in hubs if not h.running]

    def _show_picker(self, binding: Binding, prefix: str = "") -> None:
        targets = self._targets()
        if targets:
            lines = [
                f"{i}. {h.title} [{h.id}] ({h.status}, {len(h.bindings)} client(s))"
                for i, h in enumerate(targets, 1)
            ]
            text = "Choose an execution: reply with its number or id.\n" + "\n".join(lines)
        else:
            text = "No executions are being served yet. Reply with anything to see the list again."
        update = m.chunk_json("text", f"{prefix}{text}\n", f"picker-{uuid4().hex[:12]}")
        update["_meta"] = {f"{META}targets": [h.describe() for h in targets]}
        binding.live(_live(update))

    def _pick(self, binding: Binding, text: str) -> None:
        targets = self._targets()
        hub: Hub | None = None
        if text.isdigit() and len(text) < MIN_PREFIX:
            if 1 <= int(text) <= len(targets):
                hub = targets[int(text) - 1]
        elif len(text) >= MIN_PREFIX:
            matches = [h for h in targets if h.id == text] or [
                h for h in targets if h.id.startswith(text)
            ]
            hub = matches[0] if len(matches) == 1 else None
        if hub is None:
            self._open_later(binding.wire_id, None, binding.observe, f"Not a choice: {text!r}.\n")
            return
        self._open_later(binding.wire_id, hub, binding.observe)


_EXT: dict[str, Callable[[_Client, dict[str, Any]], Awaitable[dict[str, Any]]]] = {
    "agent_channel/list": _Client._list,  # pyright: ignore[reportPrivateUsage]
    "agent_channel/messages": _Client._messages,  # pyright: ignore[reportPrivateUsage]
    "agent_channel/queue": _Client._queue,  # pyright: ignore[reportPrivateUsage]
    "agent_channel/withdraw": _Client._withdraw,  # pyright: ignore[reportPrivateUsage]
    "agent_channel/cancel_tool_call": _Client._cancel_tool_call,  # pyright: ignore[reportPrivateUsage]
    "agent_channel/cancel_turn": _Client._cancel_turn,  # pyright: ignore[reportPrivateUsage]
    "agent_channel/end": _Client._end,  # pyright: ignore[reportPrivateUsage]
}


def _live(update: dict[str, Any]) -> Any:
    from ._hub import Live

    return Live(None, update)


def _wants_observe(kwargs: dict[str, Any]) -> bool:
    return kwargs.get(f"{META}observe") is True


def _string(params: dict[str, Any], key: str) -> str:
    value = params.get(key)
    if not isinstance(value, str) or not value:
        raise RequestError.invalid_params({"reason": f"{key} must be a non-empty string"})
    return value


def _summary(msg: ChatMessage) -> dict[str, Any]:
    text = msg.text
    out: dict[str, Any] = {
        "id": msg.id,
        "role": msg.role,
        "text": text if len(text) <= SUMMARY_TEXT else text[: SUMMARY_TEXT - 1] + "…",
    }
    if isinstance(msg, ChatMessageAssistant) and msg.tool_calls:
        out["toolCalls"] = [c.name for c in msg.tool_calls]
        out["toolCallIds"] = [c.id for c in msg.tool_calls]
    source = getattr(msg, "source", None)
    if source:
        out["source"] = source
    tool_call_id = getattr(msg, "tool_call_id", None)
    if tool_call_id:
        out["toolCallId"] = tool_call_id
    return out


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
