"""Attach mode's handler of one client connection: its sessions and its requests.

Each client session is a :class:`~._binding.Binding`, bound to one execution's hub as a
driver or an observer, or still choosing one (the picker, A3). Prompts are acknowledged
at once and queued for the agent's next boundary (A7). A bind (``session/new``,
``session/load`` or a pick) happens once its request's task is done, i.e. its response
is on the wire (the SDK writes it in that task), atomically with the hub: the preamble,
the replay, then the live stream, nothing missed or sent twice (A5). A plain class, not
``acp.Agent``: unimplemented methods must answer -32601.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from functools import partial
from typing import Any, ClassVar, Protocol
from uuid import uuid4

from acp.agent.connection import AgentSideConnection
from acp.schema import (
    ClientCapabilities,
    CloseSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ResumeSessionResponse,
    ToolCallUpdate,
)
from agent_channel import ChannelClosed, ChannelFull

from ...stream import _mapping as m
from ...stream._binding import Binding
from ...stream._hub import Hub
from ...stream._items import META, Live
from ...stream._questions import can_elicit
from ...wire._errors import WireError
from ...wire._frames import ServerAbout
from ...wire._transport import LineTransport
from .. import _debug as debug
from .. import _listing as listing
from .._handler import McpServer, initialize_response, prompt_content, refused, sdk_error
from .._listing import Listed
from . import _picker as picker
from ._requests import REQUESTS

log = logging.getLogger("agent_channel_acp")


class Registry(Protocol):
    """What a connection reads of the attach server."""

    backlog_limit: int

    def hubs(self) -> list[Hub]:
        """Every execution held, in the order they were added."""
        ...

    def hub(self, session_id: str) -> Hub:
        """The execution with this id; -32002 when there is none."""
        ...

    def known(self, session_id: str) -> bool: ...

    def listed(self) -> list[Listed]:
        """Every execution held, as ``session/list`` rows (D5)."""
        ...

    def executions(self) -> list[dict[str, Any]]: ...

    def about(self) -> ServerAbout:
        """The server itself: pid, start, store (``_agent_channel/list``)."""
        ...

    def counts(self) -> dict[str, int]: ...


class AttachClient:
    """One connection's ACP handler (see the module docstring)."""

    sessions_limit: ClassVar[int] = 256
    """How many sessions one connection may keep open (bound, observing or choosing); one
    more is refused until it closes one (``session/close``)."""

    def __init__(self, server: Registry) -> None:
        self._server = server
        self.transport: LineTransport | None = None
        self.conn: AgentSideConnection | None = None
        self.name = f"client-{uuid4().hex[:8]}"
        self._bindings: dict[str, Binding] = {}
        self._hubs: dict[str, Hub] = {}  # wire id -> the hub its binding is bound to
        self._closed = False

    # -- the binding's peer ------------------------------------------------------------

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
    ) -> object:
        assert self.conn is not None
        return await self.conn.request_permission(
            session_id=session_id, tool_call=tool_call, options=options
        )

    elicitation = False
    """Whether the client advertised form elicitation (the model's questions use it, Q4)."""

    def closed(self) -> None:
        """The connection ended: its bindings leave; the executions go on (A15)."""
        self._closed = True
        for wire_id in list(self._bindings):
            self._leave(wire_id)

    # -- ACP methods -------------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: object,
    ) -> InitializeResponse:
        self.elicitation = can_elicit(client_capabilities)
        if client_info is not None and client_info.name:
            self.name = f"{client_info.name}-{self.name.removeprefix('client-')}"
        return initialize_response(protocol_version)

    async def new_session(
        self,
        cwd: str,
        mcp_servers: list[McpServer] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: object,
    ) -> NewSessionResponse:
        observe = _wants_observe(kwargs)
        drivable = [h for h in self._server.hubs() if h.running]
        if len(drivable) == 1:  # A3: bind at once
            hub = drivable[0]
            self._open(hub.id, hub, observe)
            return NewSessionResponse(session_id=hub.id)
        wire_id = f"pick-{uuid4().hex}"
        self._open(wire_id, None, observe)
        return NewSessionResponse(session_id=wire_id)

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[McpServer] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: object,
    ) -> LoadSessionResponse:
        hub = self._hubs.get(session_id) or self._server.hub(session_id)
        self._open(session_id, hub, _wants_observe(kwargs))
        return LoadSessionResponse()

    async def resume_session(
        self,
        cwd: str,
        session_id: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[McpServer] | None = None,
        **kwargs: object,
    ) -> ResumeSessionResponse:
        """D5: bind like ``session/load`` (observe-only when asked or when it cannot be
        driven), but without the replay: the client has the history; live from here on."""
        hub = self._hubs.get(session_id) or self._server.hub(session_id)
        self._open(session_id, hub, _wants_observe(kwargs), replay=False)
        return ResumeSessionResponse()

    async def list_sessions(
        self, cursor: str | None = None, cwd: str | None = None, **kwargs: object
    ) -> ListSessionsResponse:
        """D5: every execution the server holds (the picker's sessions are not listed); like
        ``_agent_channel/list``, after what this connection was owed (a row's state is never
        ahead of the stream the client has read)."""
        page = listing.answer([self._server], cwd=cwd, cursor=cursor)
        await self._caught_up()
        return page

    async def prompt(
        self, session_id: str, prompt: list[m.PromptBlock], **kwargs: object
    ) -> PromptResponse:
        binding = self._binding(session_id)
        content = prompt_content(prompt)
        text = (
            content
            if isinstance(content, str)
            else " ".join(getattr(p, "text", "") for p in content)
        )
        hub = self._hubs.get(session_id)
        if hub is None:
            self._pick(binding, text.strip())
            return PromptResponse(stop_reason="end_turn")
        if not hub.running:
            raise sdk_error(WireError.ended(session_id))
        if binding.observe:
            raise sdk_error(WireError.observer(session_id))
        if (qid := hub.questions.answer(text, prompt=True)) is not None:  # Q2: an answer
            return PromptResponse(stop_reason="end_turn", field_meta={f"{META}answered": qid})
        # The answer never overtakes what this connection was owed before the prompt; the
        # queue's update that the post causes follows it (A7: the answer is the ack). The
        # marks go in first, so a slow reader still has its message posted at once.
        owed = self._owed()
        try:
            message_id = await hub.post(content, text, self.name)
        except (ChannelClosed, ChannelFull) as e:
            raise refused(session_id, e) from None
        except ConnectionError:  # a remote ref's host restarted mid-call (HostRestarted)
            raise sdk_error(WireError.host_restarted(session_id)) from None
        hub.prompted(binding)
        for written in owed:
            await written
        # A7: the agent reads it at its boundary; the id is the one the queue lists (A25)
        return PromptResponse(stop_reason="end_turn", field_meta={f"{META}messageId": message_id})

    async def cancel(self, session_id: str, **kwargs: object) -> None:
        binding = self._bindings.get(session_id)
        hub = self._hubs.get(session_id)
        if binding is None or hub is None:
            log.warning("cancel for unknown session %r ignored", session_id)
            return
        if not binding.is_driver:
            log.info("cancel from an observe-only session %r ignored", session_id)  # A14
            return
        await hub.interrupt()

    async def close_session(self, session_id: str, **kwargs: object) -> CloseSessionResponse:
        self._binding(session_id)
        self._leave(session_id)
        return CloseSessionResponse()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if debug.asked(method):
            return debug.counts(**self._server.counts())
        handler = REQUESTS.get(method)
        if handler is None:
            raise sdk_error(WireError.method_not_found(f"_{method}"))
        if not isinstance(params, dict):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise sdk_error(WireError.invalid_params("params must be an object"))
        result = await handler(self, params)
        await self._caught_up()
        return result

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        log.info("ignoring extension notification _%s", method)

    # -- what the extension requests read ----------------------------------------------

    def target(self, params: dict[str, Any]) -> Hub:
        session_id = params.get("sessionId")
        if not isinstance(session_id, str) or not session_id:
            raise sdk_error(WireError.invalid_params("sessionId must be a non-empty string"))
        return self._hubs.get(session_id) or self._server.hub(session_id)

    def known(self, session_id: str) -> bool:
        return self._server.known(session_id) or session_id in self._bindings

    def executions(self) -> list[dict[str, Any]]:
        return self._server.executions()

    def about(self) -> dict[str, Any]:
        return dict(self._server.about())

    # -- plumbing ----------------------------------------------------------------------

    async def _caught_up(self) -> None:
        """Wait until every update sent to this connection's sessions so far is written:
        an answer never overtakes them (a client that reads "waiting for operator" has
        the turn that led there, even when its stream is backed up)."""
        for written in self._owed():
            await written

    def _owed(self) -> list[asyncio.Future[None]]:
        """A mark in each of this connection's sessions, put in now: each future is done
        once everything that session was owed at this moment is written."""
        loop = asyncio.get_running_loop()
        owed: list[asyncio.Future[None]] = []
        for wire_id, binding in list(self._bindings.items()):
            written: asyncio.Future[None] = loop.create_future()
            hub = self._hubs.get(wire_id)
            done = partial(_settle, written)
            if hub is None:
                binding.mark(done)
            else:
                hub.after(binding, done)
            owed.append(written)
        return owed

    def _binding(self, session_id: str) -> Binding:
        binding = self._bindings.get(session_id)
        if binding is not None:
            return binding
        if self._server.known(session_id):
            raise sdk_error(WireError.not_bound(session_id))
        raise sdk_error(WireError.unknown_session(session_id))

    def _leave(self, wire_id: str) -> None:
        binding = self._bindings.pop(wire_id, None)
        hub = self._hubs.pop(wire_id, None)
        if binding is not None:
            if hub is not None:
                hub.unbind(binding)
            binding.leave()

    def _open(
        self, wire_id: str, hub: Hub | None, observe: bool, note: str = "", replay: bool = True
    ) -> None:
        """Bind ``wire_id`` to ``hub`` (None: the picker's list) once this request's task is
        done, i.e. its response is on the wire (A5: the response first, then the preamble,
        the replay unless ``replay`` is false (a resume), and the live stream, all taken then)."""
        if wire_id not in self._bindings and len(self._bindings) >= self.sessions_limit:
            raise sdk_error(WireError.too_many_sessions(self.sessions_limit))
        task = asyncio.current_task()
        if task is None:
            self._bind(wire_id, hub, observe, note, replay)
            return

        def bind(done: asyncio.Task[object]) -> None:
            if not done.cancelled() and done.exception() is None:
                self._bind(wire_id, hub, observe, note, replay)

        task.add_done_callback(bind)

    def _bind(
        self, wire_id: str, hub: Hub | None, observe: bool, note: str, replay: bool = True
    ) -> None:
        if self._closed or self.transport is None:
            return
        binding = self._bindings.get(wire_id)
        if binding is None:
            binding = Binding(wire_id, self, backlog_limit=self._server.backlog_limit)
            self._bindings[wire_id] = binding
        else:
            old = self._hubs.pop(wire_id, None)
            if old is not None:
                old.unbind(binding)
            binding.rebind()
        binding.observe = observe or (hub is not None and not hub.running)
        if hub is None:
            binding.live(Live(None, picker.listing(self._targets(), note)))
        else:
            self._hubs[wire_id] = hub
            hub.bind(binding, driver=not binding.observe, replay=replay)

    def _targets(self) -> list[Hub]:
        hubs = self._server.hubs()
        return [h for h in hubs if h.running] + [h for h in hubs if not h.running]

    def _pick(self, binding: Binding, text: str) -> None:
        hub = picker.pick(self._targets(), text)
        if hub is None:
            self._open(binding.wire_id, None, binding.observe, f"Not a choice: {text!r}.\n")
            return
        self._open(binding.wire_id, hub, binding.observe)


def _wants_observe(kwargs: Mapping[str, object]) -> bool:
    return kwargs.get(f"{META}observe") is True


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
