"""The ACP agent: a plain handler class the SDK routes to, and the serve loop.

Deliberately not a subclass of ``acp.Agent``: the Protocol's inherited stubs
would answer ``{}`` for methods we do not implement instead of -32601.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal, cast
from uuid import uuid4

from acp import Agent
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
from agent_channel import Journal, Store, StoreBusy

from ...stream import _mapping as m
from ...stream._binding import Writer
from ...stream._outbox import check_limit
from ...stream._questions import can_elicit
from ...wire._errors import WireError
from ...wire._transport import LineTransport
from .. import _debug as debug
from .. import _listing as listing
from .._children import children, steer_child, stop_child, string
from .._execution import BACKLOG_LIMIT, Body, NotRunnable
from .._finished import Forgotten
from .._handler import McpServer, initialize_response, prompt_content, sdk_error, shadowed_names
from ._session import Session

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from ...stream._hub import Hub


async def _children(hub: Hub, params: dict[str, Any]) -> dict[str, Any]:
    return children(hub)


_CHILD_REQUESTS: dict[str, Callable[[Hub, dict[str, Any]], Awaitable[dict[str, Any]]]] = {
    "agent_channel/children": _children,
    "agent_channel/steer_child": steer_child,
    "agent_channel/stop_child": stop_child,
}
"""The extension requests stdio answers besides the debug counts: the children's (K11, K12)."""

log = logging.getLogger("agent_channel_acp")

AgentFactory = Callable[..., Body]
"""``factory(model) -> body``: what ``--agent module:attr`` names."""


class AcpServer:
    """Serves one ACP connection: each ``session/new`` starts one top-level execution.

    ``backlog_limit`` bounds the bytes of updates one session queues for a client that is
    not reading; past it they are dropped with a notice (answers are kept). At most
    :attr:`running_limit` sessions run at once; a finished one is kept for ``session/load``
    until :attr:`finished_kept` newer ones finished.
    """

    finished_kept: ClassVar[int] = 32
    """How many finished sessions are kept for ``session/load``; older ones are freed."""
    running_limit: ClassVar[int] = 256
    """How many sessions may run at once; one more ``session/new`` is refused (each is an
    execution its client has to end: ``session/close``)."""

    def __init__(
        self,
        factory: AgentFactory,
        *,
        model: str | None = None,
        approve: bool = False,
        context_window: int | None = None,
        backlog_limit: int = BACKLOG_LIMIT,
        store: Store | None = None,
        restore: Literal["go", "wait"] = "go",
    ) -> None:
        self._factory = factory
        self._store = store
        self._restore_wait = restore == "wait"
        self._model = model
        self._approve = approve
        self._context_window = context_window
        self._backlog_limit = check_limit(backlog_limit)
        self._sessions: dict[str, Session] = {}  # running
        self._finished: OrderedDict[str, Session] = OrderedDict()  # kept for session/load
        self._forgotten = Forgotten()
        self._conn: AgentSideConnection | None = None
        self._transport: LineTransport | None = None

    def on_connect(self, conn: AgentSideConnection) -> None:
        self._conn = conn

    def use_writer(self, writer: LineTransport) -> None:
        """The connection's transport: sessions write updates through it on the spot when idle."""
        self._transport = writer

    # -- the sessions' peer (each session's binding writes and asks through it) --------

    name = "stdio"

    @property
    def writer(self) -> Writer:
        if self._transport is None:
            raise RuntimeError("serve an AcpServer with serve() or serve_stdio()")
        return self._transport

    @property
    def gone(self) -> bool:
        transport = self._transport
        return transport is None or transport.gone

    elicitation = False
    """Whether the client advertised form elicitation (the model's questions use it, Q2)."""

    @property
    def conn(self) -> AgentSideConnection | None:
        return self._conn

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption]
    ) -> object:
        if self._conn is None:
            raise ConnectionError("no connection")
        return await self._conn.request_permission(
            session_id=session_id, tool_call=tool_call, options=options
        )

    # -- ACP methods -------------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: object,
    ) -> InitializeResponse:
        self.elicitation = can_elicit(client_capabilities)
        return initialize_response(protocol_version)

    async def new_session(
        self,
        cwd: str,
        mcp_servers: list[McpServer] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: object,
    ) -> NewSessionResponse:
        if mcp_servers:
            log.info("ignoring %d MCP server(s): not supported", len(mcp_servers))
        self._room()
        session_id = uuid4().hex
        journal = None
        if self._store is not None:
            meta = {"mode": "stdio", "cwd": cwd, "model": self._model}
            journal = self._store.journal(session_id, meta)
        session = await self._start(session_id, cwd, journal)
        # Updates flow once this request's task is done: its response is written (S2).
        return NewSessionResponse(session_id=session.id)

    def _room(self) -> None:
        """Refuse one more running session past :attr:`running_limit` (before any is journaled)."""
        if len(self._sessions) >= self.running_limit:
            raise sdk_error(WireError.too_many_sessions(self.running_limit))

    async def _start(
        self, session_id: str, cwd: str, journal: Journal | None, *, replay: bool = False
    ) -> Session:
        """A session's execution started (new, or restored from the store's ``journal``:
        then for ``session/load``, whose replay is queued before its first event and goes
        out before the answer, or ``session/resume``, which has none)."""
        if self._conn is None or self._transport is None:
            raise RuntimeError("serve an AcpServer with serve() or serve_stdio()")
        try:
            body = self._factory(self._model)
        except Exception as e:
            log.exception("the agent factory failed")
            if journal is not None and journal.restored() is None:
                journal.finish("ended", None, f"the agent factory failed: {e!r}")
            raise sdk_error(WireError.factory_failed(repr(e))) from e
        session = Session(
            session_id,
            self,
            body,
            approve=self._approve,
            context_window=self._context_window,
            backlog_limit=self._backlog_limit,
            on_done=self._session_done,
            cwd=cwd,
            journal=journal,
        )
        self._sessions[session.id] = session
        try:
            new = journal is None or journal.restored() is None
            await session.start(hold=new, replay=replay and not new)
        except NotRunnable as e:
            self._sessions.pop(session.id, None)
            log.error("the agent factory did not return a runnable body: %s", e)
            raise sdk_error(WireError.not_runnable(str(e))) from None
        return session

    async def _found(self, session_id: str, *, replay: bool) -> tuple[Session, bool]:
        """The session, live, or restored from the store when a previous process left it
        unfinished there (D4, D5: a client that restarted its agent picks its thread up);
        whether it was restored (then with its replay queued, when ``replay``)."""
        store = self._store
        if store is not None and self._live(session_id) is None:
            row = store.get(session_id)
            if row is not None and row.status == "running" and row.meta.get("mode") == "stdio":
                self._room()  # a restored session runs again: it counts
                cwd = row.meta.get("cwd")
                try:
                    journal = store.journal(session_id, wait=self._restore_wait)
                except StoreBusy as e:  # a shared store: another live agent runs it (N6)
                    raise sdk_error(WireError.held_elsewhere(session_id, str(e))) from None
                where = cwd if isinstance(cwd, str) else os.getcwd()
                return await self._start(session_id, where, journal, replay=replay), True
        return self._session(session_id), False

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[McpServer] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: object,
    ) -> LoadSessionResponse:
        session, restored = await self._found(session_id, replay=True)
        if restored:  # its replay went first, before the execution's own events
            await session.flush()
        else:
            await session.replay()
        return LoadSessionResponse()

    async def list_sessions(
        self, cursor: str | None = None, cwd: str | None = None, **kwargs: object
    ) -> ListSessionsResponse:
        """D5: this process's sessions, running and finished-but-kept, then the store's
        unfinished ones (a previous process's, which ``session/load`` restores)."""
        sources: list[listing.Source] = [self]
        if self._store is not None:
            sources.append(listing.Stored(self._store, "stdio"))
        return listing.answer(sources, cwd=cwd, cursor=cursor)

    async def resume_session(
        self,
        cwd: str,
        session_id: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[McpServer] | None = None,
        **kwargs: object,
    ) -> ResumeSessionResponse:
        """D5: go on with a session without its history replayed. The one stdio client
        already gets its stream, so this only checks that the session is still here (or
        restores it from the store)."""
        await self._found(session_id, replay=False)
        return ResumeSessionResponse()

    def listed(self) -> list[listing.Listed]:
        """The live sessions as ``session/list`` rows (a ``_listing.Source``)."""
        sessions = [*self._sessions.values(), *self._finished.values()]
        return [row for s in sessions if (row := s.listed()) is not None]

    async def prompt(
        self, session_id: str, prompt: list[m.PromptBlock], **kwargs: object
    ) -> PromptResponse:
        session = self._session(session_id)
        return await session.prompt(prompt_content(prompt))

    async def cancel(self, session_id: str, **kwargs: object) -> None:
        session = self._sessions.get(session_id) or self._finished.get(session_id)
        if session is None:
            log.warning("cancel for unknown session %r ignored", session_id)
            return
        session.cancel()

    async def close_session(self, session_id: str, **kwargs: object) -> CloseSessionResponse:
        """End the session; with a store, mark it closed there (never restored again)."""
        store = self._store
        stored = store.get(session_id) if store is not None else None
        if stored is not None and self._live(session_id) is None:
            if stored.status == "closed" or stored.meta.get("mode") != "stdio":
                raise sdk_error(WireError.forgotten_session(session_id))
            store.close_execution(session_id)  # pyright: ignore[reportOptionalMemberAccess]
            self._forgotten.add(session_id)
            return CloseSessionResponse()
        session = self._session(session_id)
        self._sessions.pop(session_id, None)
        self._finished.pop(session_id, None)
        self._forgotten.add(session_id)
        await session.close()
        if store is not None and stored is not None:
            store.close_execution(session_id)
        return CloseSessionResponse()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if debug.asked(method):
            return debug.counts(sessions=len(self._sessions), finished=len(self._finished))
        request = _CHILD_REQUESTS.get(method)  # K11, K12: as attach mode answers them
        if request is None:
            raise sdk_error(WireError.method_not_found(f"_{method}"))
        session = self._session(string(params, "sessionId"))
        hub = session.hub
        if hub is None:  # no prompt yet: the execution has not started, so has no child
            if method == "agent_channel/children":
                return {"sessionId": session.id, "children": []}
            raise sdk_error(WireError.unknown_child(session.id, string(params, "childId")))
        return await request(hub, params)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        log.info("ignoring extension notification _%s", method)

    # -- plumbing ----------------------------------------------------------------------

    def _live(self, session_id: str) -> Session | None:
        return self._sessions.get(session_id) or self._finished.get(session_id)

    def _session(self, session_id: str) -> Session:
        session = self._live(session_id)
        if session is not None:
            return session
        if session_id in self._forgotten:
            raise sdk_error(WireError.forgotten_session(session_id))
        raise sdk_error(WireError.unknown_session(session_id))

    def _session_done(self, session: Session) -> None:
        """A session's execution ended and its last updates are out: keep it for load only."""
        if self._sessions.pop(session.id, None) is None:
            return  # closed meanwhile
        self._finished[session.id] = session
        while len(self._finished) > self.finished_kept:
            old, _ = self._finished.popitem(last=False)
            self._forgotten.add(old)

    def shadowed_names(self) -> dict[str, frozenset[str]]:
        return shadowed_names(self)

    async def shutdown(self) -> None:
        """End every execution (EOF on the transport)."""
        sessions = [*self._sessions.values(), *self._finished.values()]
        await asyncio.gather(*(s.end() for s in sessions), return_exceptions=True)


async def serve(
    server: AcpServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Serve ``server`` over a byte-stream pair until the peer closes its side."""
    transport = LineTransport(
        reader,
        writer,
        shadowed=server.shadowed_names(),
    )
    server.use_writer(transport)
    # A plain class on purpose (see the module docstring), hence the cast.
    # Unstable routing serves session/close and session/resume (stable in the spec,
    # unstable in SDK 0.12); the other unstable methods have no handler here: -32601.
    conn = AgentSideConnection(
        cast("Agent", server), transport, listening=False, use_unstable_protocol=True
    )
    try:
        await conn.listen()
    finally:
        try:
            await server.shutdown()
        finally:
            await asyncio.shield(conn.close())
