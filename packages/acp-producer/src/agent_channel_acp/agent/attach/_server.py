"""Attach mode: operators join executions that run on their own.

An :class:`AttachServer` holds any number of top-level executions (one
:class:`~._hub.Hub` each; its id is the ACP session id), starts the ones it runs itself
(:meth:`AttachServer.run`), and serves any number of client connections (a listener
hands each accepted socket to :meth:`AttachServer.serve_connection`; each connection is
an :class:`~._attach_client.AttachClient`). Finished executions are kept, listed and
readable, within a bound. The rules are A3-A27 in ``docs/acp-behaviour.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from typing import Any, ClassVar, cast
from uuid import uuid4

from acp import Agent
from acp.agent.connection import AgentSideConnection
from agent_channel import AgentChannel, Journal
from agent_channel.abc import ExecutionRef

from ...stream._hub import Hub
from ...stream._outbox import check_limit
from ...wire._errors import WireError
from ...wire._frames import ServerAbout
from ...wire._transport import LineTransport
from .._execution import BACKLOG_LIMIT, Body, run
from .._finished import Forgotten
from .._handler import sdk_error, shadowed_names
from .._listing import Listed, from_hub
from ._client import AttachClient

log = logging.getLogger("agent_channel_acp")


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
        self.backlog_limit = check_limit(backlog_limit)
        if replay < 0:
            raise ValueError(f"replay must be 0 or more, not {replay}")
        self._replay = replay
        self._approve = approve
        self._context_window = context_window
        self._hubs: dict[str, Hub] = {}
        self._cwds: dict[str, str] = {}  # the process's working directory when each was added
        self._forgotten = Forgotten()
        self._clients: set[AttachClient] = set()
        self._runs: set[asyncio.Future[object]] = set()
        self._restored: dict[str, float] = {}  # execution id -> when a restart restored it
        self._stopping = False  # the server is shutting down: a store keeps its executions
        self.started = time.time()
        """When it started serving: its discovery record's ``started_at`` too."""
        self.store: str | None = None
        """The store file that keeps its executions, for ``list`` to say (``serve --store``)."""
        self.on_change: Callable[[], None] | None = None
        """Called when the list of executions or their state changes (discovery records)."""

    # -- executions --------------------------------------------------------------------

    def add(self, ref: ExecutionRef, *, title: str, execution_id: str | None = None) -> str:
        """Serve one top-level execution; returns its execution id (the ACP session id)."""
        execution_id = execution_id or uuid4().hex
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
        self._cwds[execution_id] = os.getcwd()
        self._changed()
        return execution_id

    async def run(
        self,
        body: Body,
        *,
        title: str,
        execution_id: str | None = None,
        journal: Journal | None = None,
        restored: float | None = None,
    ) -> str:
        """Add ``body``'s execution, run it to completion (``_execution.run``: live, in a
        channel of its own); its id. Raises ``NotRunnable`` when it cannot run.

        ``_agent_channel/end`` cancels the body; that ends this call normally. With a
        ``journal`` (the store's, under ``execution_id``) it is durable: ``end`` records
        its end, a shutdown does not (a restart restores it; ``restored`` says when one did).
        """
        ended = False

        def started(ch: AgentChannel, task: asyncio.Future[object]) -> None:
            nonlocal execution_id
            execution_id = self.add(ch.ref(), title=title, execution_id=execution_id)
            if restored is not None:
                self._restored[execution_id] = restored
            self._runs.add(task)
            task.add_done_callback(self._runs.discard)

            def end() -> None:
                nonlocal ended
                ended = True
                if ch.stop_reason is None:
                    ch.stop_reason = "cancelled"
                if journal is not None and not self._stopping:
                    journal.finish("closed", ch.stop_reason, None)
                task.cancel()

            self._hubs[execution_id].ending = end

        try:
            await run(body, started, journal)
        except asyncio.CancelledError:
            if not ended or _cancelling():
                raise
        return execution_id or ""

    def executions(self) -> list[dict[str, Any]]:
        """What ``_agent_channel/list`` returns (A24), also written into discovery records."""
        restored = self._restored
        return [
            {**hub.describe(), "restored": restored[hub.id]}
            if hub.id in restored
            else hub.describe()
            for hub in self._hubs.values()
        ]

    def about(self) -> ServerAbout:
        """The server itself, for ``_agent_channel/list``: a client over a network (or any
        client) reads its pid, its start and its store here, not from a record of its own."""
        return {"pid": os.getpid(), "startedAt": self.started, "store": self.store}

    def listed(self) -> list[Listed]:
        """Every execution held, as ``session/list`` rows (D5; a ``_listing.Source``)."""
        return [from_hub(hub, self._cwds.get(hub.id, "/")) for hub in self._hubs.values()]

    def hubs(self) -> list[Hub]:
        return list(self._hubs.values())

    def hub(self, session_id: str) -> Hub:
        hub = self._hubs.get(session_id)
        if hub is not None:
            return hub
        if session_id in self._forgotten:
            raise sdk_error(WireError.forgotten_session(session_id))
        raise sdk_error(WireError.unknown_session(session_id))

    def known(self, session_id: str) -> bool:
        return session_id in self._hubs or session_id in self._forgotten

    def counts(self) -> dict[str, int]:
        """What the debug request reports (see ``_debug``)."""
        hubs = self._hubs.values()
        return {
            "connections": len(self._clients),
            "executions": len(hubs),
            "bindings": sum(h.clients for h in hubs),
        }

    def _changed(self) -> None:
        finished = [h for h in self._hubs.values() if not h.running and not h.clients]
        for hub in finished[: max(0, len(finished) - self.finished_kept)]:
            del self._hubs[hub.id]
            self._cwds.pop(hub.id, None)
            self._restored.pop(hub.id, None)
            self._forgotten.add(hub.id)
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
        client = AttachClient(self)
        transport = LineTransport(
            reader,
            writer,
            shadowed=shadowed_names(client),
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
        and ``session_ended``) and stop watching the others. A stored execution is not
        recorded as ended by this: the next server on its store restores it."""
        self._stopping = True
        for hub in list(self._hubs.values()):
            if hub.running and hub.ending is not None and not hub.outlives_server:
                hub.ending()
        runs = list(self._runs)
        if runs:
            await asyncio.wait(runs, timeout=1.0)
        for hub in self._hubs.values():
            hub.close()


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
