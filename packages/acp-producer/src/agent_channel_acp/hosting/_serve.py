"""Hosting an attach server: listen, publish the discovery record, stop cleanly.

:func:`host` is the lifetime of ``agent-channel-acp serve`` minus the agent:
the checked runtime directory (dead records swept), the listener, the
record (rewritten when the executions change), and on SIGINT/SIGTERM the
orderly end: stop accepting, end the executions (clients get their final
notifications), close the connections, remove the record and the socket.
No ``acp`` import here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

from ..wire._discovery import Publication, Record, RuntimeDirError, runtime_dir, sweep
from ._listen import Listener, ListenError, listen_tcp, listen_unix

if TYPE_CHECKING:
    from ..wire._frames import Recorded

log = logging.getLogger("agent_channel_acp")

REFRESH = 0.5
"""Least seconds between two rewrites of the discovery record (changes in between coalesce)."""

POLL = 5.0
"""Seconds between looks at the executions when the server reports no change."""

RECORD_KEYS = ("id", "title", "status")
"""What the record keeps of each execution (clients ask the server for the rest)."""


class Served(Protocol):
    """What :func:`host` serves: the attach server's connection side."""

    async def serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None: ...

    def executions(self) -> Sequence[Mapping[str, object]]: ...

    async def aclose(self) -> None: ...


class _Watched(Protocol):
    """A served server that says when its executions change (the attach server does)."""

    on_change: Callable[[], object] | None


def record_executions(server: Served) -> list[Recorded]:
    """The listing's entries cut to :data:`RECORD_KEYS` (the server's ``describe``)."""
    return [cast("Recorded", {k: e[k] for k in RECORD_KEYS if k in e}) for e in server.executions()]


_hosted: list[Served] = []  # the one server this process publishes (the record is per pid)


@contextlib.asynccontextmanager
async def hosting(
    server: Served,
    *,
    socket_path: Path | None = None,
    port: int | None = None,
    start: Callable[[], Awaitable[None]] | None = None,
) -> AsyncGenerator[Record, None]:
    """Listen for ``server`` and publish its record for the block; yields the record.

    ``start`` (the executions ``serve`` runs) goes as a task once the record is written.
    Leaving the block stops accepting, closes ``server`` (its ``run()`` executions end
    and their clients are told), then the connections, the socket and the record.
    """
    if _hosted:
        raise RuntimeError("this process already serves attach mode (one server per process)")
    directory = runtime_dir()
    sweep(directory)
    handler = server.serve_connection
    listener: Listener
    if port is not None:
        listener = await listen_tcp(handler, port)
    else:
        listener = await listen_unix(handler, socket_path or directory / f"{os.getpid()}.sock")
    _hosted.append(server)
    publication = Publication(directory, listener.transport)
    loop = asyncio.get_running_loop()
    changed = asyncio.Event()
    watched = cast("_Watched", server) if hasattr(server, "on_change") else None
    if watched is not None:  # the attach server says when its executions change (any thread)
        watched.on_change = lambda: loop.call_soon_threadsafe(changed.set)
    tasks: list[asyncio.Task[None]] = []
    try:
        publication.write(record_executions(server))
        tasks.append(loop.create_task(_refresh(server, publication, changed)))
        if start is not None:
            tasks.append(loop.create_task(_run(start)))
        yield publication.record
    finally:
        if watched is not None:
            watched.on_change = None
        try:
            await listener.close(connections=False)
            await server.aclose()  # executions end; their clients are told
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await listener.close()
        finally:
            publication.remove()
            _hosted.remove(server)


async def host(
    server: Served,
    *,
    socket_path: Path | None = None,
    port: int | None = None,
    start: Callable[[], Awaitable[None]] | None = None,
    announce: Callable[[Record], None] | None = None,
) -> None:
    """Serve ``server`` until SIGINT/SIGTERM (or cancellation); ``start`` runs the executions.

    ``start`` runs as a task once the record is published; when it returns the
    server stays up (finished executions can still be read). This is :func:`hosting`
    (what :func:`attachable` is built on too) plus the signals.
    """
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    async with hosting(server, socket_path=socket_path, port=port, start=start) as record:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            if announce is not None:
                announce(record)
            await stop.wait()
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)


async def _refresh(server: Served, publication: Publication, changed: asyncio.Event) -> None:
    """Keep the record's executions current: on each change, at most every :data:`REFRESH` s."""
    while True:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(POLL):
                await changed.wait()
        changed.clear()
        publication.write(record_executions(server))
        await asyncio.sleep(REFRESH)


async def _run(start: Callable[[], Awaitable[None]]) -> None:
    await start()


Body = Callable[[], Awaitable[object]]
"""One execution's async function, as a factory gives it."""


class ServeError(RuntimeError):
    """``serve`` cannot start; the message is the one line to print."""


def _with_task(body: Body, task: str) -> Body:
    """``body`` with ``task`` posted to its own channel first (the agent reads it at once)."""

    async def run() -> object:
        from agent_channel import UserMessage, agent_channel

        agent_channel().ref().post(UserMessage(task, source="task"))
        return await body()

    return run


GENERIC_NAMES = frozenset(
    {"factory", "agent_factory", "make_agent", "create_agent", "build_agent", "get_agent"}
    | {"agent", "make", "create", "build", "main"}
)
"""Factory names that say nothing of the agent: its executions take the module's name."""


def agent_name(spec: str, body: object) -> str:
    """What ``serve`` calls the executions of ``spec``'s agent: the name its body carries
    (a ``name`` attribute: the agent's own), else the factory's, else, when that one is
    generic (``factory``), its module's: what the author named."""
    own = getattr(body, "name", None)
    if isinstance(own, str) and own.strip():
        return own.strip()
    module, _, attr = spec.partition(":")
    last = attr.rpartition(".")[2]
    return module if last.lower() in GENERIC_NAMES else last


def _title(name: str, task: str | None, i: int, count: int) -> str:
    title = name
    if task:
        short = " ".join(task.split())
        title += f": {short[:57]}..." if len(short) > 60 else f": {short}"
    return f"{title} #{i + 1}" if count > 1 else title


def _announcer(count: int, as_json: bool) -> Callable[[Record], None]:
    def announce(record: Record) -> None:
        if as_json:
            listen = {k: v for k, v in record.transport.items() if k != "token"}
            data = {"pid": record.pid, "listen": listen, "record": str(record.path)}
            print(json.dumps(data), flush=True)
            return
        what = f"{count} execution{'s' if count != 1 else ''}"
        print(
            f"agent-channel-acp: serving {what} on {record.where()} (pid {record.pid}); "
            "attach with `agent-channel-acp ls`, `send`, or `bridge` from an editor",
            flush=True,
        )

    return announce


def serve_command(
    factory: Callable[..., object],
    *,
    spec: str,
    model: str | None,
    task: str | None,
    socket_path: str | None,
    port: int | None,
    count: int,
    replay: int,
    approve: bool,
    context_window: int | None,
    as_json: bool,
) -> int:
    """``agent-channel-acp serve``: run ``count`` executions until SIGINT/SIGTERM; exit status.

    A factory that gives no runnable body ends ``serve`` with a :class:`ServeError`: what
    it returned is checked here, and what calling that returns as the executions start
    (no execution of such a factory could ever run).
    """
    from ..agent._execution import NotRunnable
    from ..agent.attach._server import AttachServer

    bodies: list[Body] = []
    name = ""
    for _ in range(count):
        try:
            body = factory(model)
        except Exception as e:
            raise ServeError(f"the agent factory failed: {type(e).__name__}: {e}") from None
        if not callable(body):
            raise ServeError(
                f"the agent factory returned {body!r} ({type(body).__name__}), not a callable "
                "body: factory(model) must return the async function that runs one execution"
            )
        name = name or agent_name(spec, body)
        runnable = cast("Body", body)  # called as it starts: checked there
        bodies.append(_with_task(runnable, task) if task else runnable)

    path = Path(socket_path).absolute() if socket_path else None  # verbs run from anywhere

    async def main() -> None:
        server = AttachServer(replay=replay, approve=approve, context_window=context_window)
        hosting = asyncio.current_task()
        unrunnable: list[NotRunnable] = []

        async def one(i: int, body: Body) -> None:
            try:
                await server.run(body, title=_title(name, task, i, count))
            except NotRunnable as e:
                unrunnable.append(e)
                if hosting is not None and len(unrunnable) == 1:
                    hosting.cancel()
            except Exception as e:
                log.error("an execution failed: %r", e)

        async def start() -> None:
            await asyncio.gather(*(one(i, b) for i, b in enumerate(bodies)))

        try:
            await host(
                server,
                socket_path=path,
                port=port,
                start=start,
                announce=_announcer(count, as_json),
            )
        except asyncio.CancelledError:
            if unrunnable:
                raise ServeError(f"the agent factory's body cannot run: {unrunnable[0]}") from None
            raise

    try:
        asyncio.run(main())
    except (RuntimeDirError, ListenError) as e:
        raise ServeError(str(e)) from None
    return 0
