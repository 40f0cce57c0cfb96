"""The library's way into attach mode: a program serves the executions it runs itself.

``agent-channel-acp serve`` starts agents from a factory; a program that starts its own (an
evaluation, a batch of twenty agents, a service) opens :func:`attachable` instead and hands
it the top-level ref of each execution. Operators attach with the same clients (the verbs,
the console, the bridge) and are optional: an execution runs on its own whether anyone
watches or not. It is the same listener, discovery record and shutdown as ``serve``
(:func:`~._serve.hosting`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_channel.lowlevel import as_body

from ..agent._execution import BACKLOG_LIMIT
from ..agent.attach._server import AttachServer
from ..stream._ring import REPLAY
from ..wire._discovery import Record
from ._serve import hosting

if TYPE_CHECKING:
    from agent_channel.abc import ExecutionRef

    from ._asgi import WsOptions


class Attachable:
    """The executions an :func:`attachable` block serves (yielded by it).

    Each execution added is one ACP session id (its execution id); every client that
    attaches sees them in ``ls``, the picker and ``session/load``.
    """

    def __init__(self, server: AttachServer, record: Record) -> None:
        self._server = server
        self._record = record

    @property
    def where(self) -> str:
        """Where it listens: the unix socket's path, or ``127.0.0.1:PORT``."""
        return self._record.where()

    @property
    def ws_url(self) -> str | None:
        """The WebSocket listener's ``ws://`` (or ``wss://``) url, with ``ws`` given."""
        return self._record.ws["url"] if self._record.ws else None

    @property
    def record(self) -> Path:
        """The discovery record (for TCP it holds the token clients present)."""
        assert self._record.path is not None
        return self._record.path

    def add(self, ref: ExecutionRef, *, title: str) -> str:
        """Serve the top-level execution behind ``ref``; returns its execution id.

        Call it on the loop the block runs on. The execution may run anywhere, on this
        loop or on another thread's: its events hop over in order, approvals asked there
        are answered here. It is served until it ends (then it is kept, finished, for
        reading) or until the block ends; ending it is its program's job (``end`` from an
        operator is refused).
        """
        return self._server.add(ref, title=title)

    async def run(self, body: Callable[[], Awaitable[object]] | object, *, title: str) -> str:
        """Run ``body`` as a new execution on its own channel, served while it runs.

        ``body`` may also be a framework's agent object (a ``pydantic_ai.Agent``) that an
        installed adapter serves: it runs with its own model.

        Returns its execution id once the body returns. The execution is live: an
        interactive agent waits for operators' messages instead of ending, until an
        operator ends it (``end``) or the block ends.
        """
        return await self._server.run(as_body(body), title=title)

    def executions(self) -> list[dict[str, Any]]:
        """What ``_agent_channel/list`` answers: id, title, status, turn state, clients..."""
        return self._server.executions()


@contextlib.asynccontextmanager
async def attachable(
    *,
    socket_path: str | Path | None = None,
    port: int | None = None,
    replay: int = REPLAY,
    approve: bool = False,
    backlog_limit: int = BACKLOG_LIMIT,
    context_window: int | None = None,
    ws: int | WsOptions | None = None,
) -> AsyncGenerator[Attachable, None]:
    """Serve the executions this program runs to operators who attach, for the block.

    Listens on a unix socket (``socket_path``, default ``<runtime dir>/<pid>.sock``, 0600,
    peer uid checked) or on TCP 127.0.0.1:``port`` (0: any free port; clients present the
    record's token), and writes the discovery record the verbs and the console look for.
    ``replay``, ``approve``, ``backlog_limit`` and ``context_window`` are
    :class:`AttachServer`'s. ``ws`` (a port on 127.0.0.1, 0 for any, or ``WsOptions`` for
    TLS and another host) also listens over WebSocket, behind the record's token (needs
    the ``remote`` extra). One per process (the record is named after the pid).

    Leaving the block stops serving: executions started with :meth:`Attachable.run` are
    ended (their clients get the final turn state and ``session_ended``), clients are
    disconnected, the socket and the record removed. Executions added with
    :meth:`Attachable.add` go on, unserved. No signal handlers are installed (the
    program's own stay in charge).

    Example::

        async with attachable() as served:
            async with open_channel() as ch:
                served.add(ch.ref(), title="eval 7")
                await run_my_agent(ch)
    """
    server = AttachServer(
        replay=replay, approve=approve, backlog_limit=backlog_limit, context_window=context_window
    )
    path = Path(os.path.abspath(socket_path)) if socket_path is not None else None  # noqa: ASYNC240 (no I/O: the verbs run from anywhere)
    options: WsOptions | None = None
    if isinstance(ws, int):
        from ._asgi import WsOptions

        options = WsOptions(ws)
    else:
        options = ws
    async with hosting(server, socket_path=path, port=port, ws=options) as record:
        yield Attachable(server, record)
