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
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast
from urllib.parse import urlsplit, urlunsplit
from uuid import uuid4

from .._install import REMOTE, hint
from ..wire._discovery import Publication, Record, RuntimeDirError, runtime_dir, sweep
from ._listen import Listener, ListenError, listen_tcp, listen_unix

if TYPE_CHECKING:
    from agent_channel import Journal, Store

    from ..wire._frames import Recorded
    from ._asgi import WsEndpoint, WsOptions

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
    ws: WsOptions | None = None,
) -> AsyncGenerator[Record, None]:
    """Listen for ``server`` and publish its record for the block; yields the record.

    ``start`` (the executions ``serve`` runs) goes as a task once the record is written.
    With ``ws`` it also listens over WebSocket (:mod:`._asgi`; the record's ``ws`` entry).
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
    endpoint: WsEndpoint | None = None
    if ws is not None:
        try:
            endpoint = await _ws_endpoint(handler, ws)
        except BaseException:
            await listener.close()
            raise
    _hosted.append(server)
    started: object = getattr(server, "started", None)  # the attach server's, which it tells
    publication = Publication(
        directory,
        listener.transport,
        endpoint and endpoint.transport,
        started if isinstance(started, float) else None,
    )
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
            if endpoint is not None:
                endpoint.stop_accepting()
            await server.aclose()  # executions end; their clients are told
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await listener.close()
            if endpoint is not None:
                await endpoint.close()
        finally:
            publication.remove()
            _hosted.remove(server)


async def _ws_endpoint(handler: Callable[..., Awaitable[None]], ws: WsOptions) -> WsEndpoint:
    from ._asgi import WsEndpoint

    endpoint = WsEndpoint(handler, ws)
    try:
        await endpoint.start()
    except ImportError as e:  # uvicorn missing
        await endpoint.close()
        raise ListenError(f"--ws needs the remote extra ({e}): {hint(REMOTE)}") from None
    return endpoint


async def host(
    server: Served,
    *,
    socket_path: Path | None = None,
    port: int | None = None,
    start: Callable[[], Awaitable[None]] | None = None,
    announce: Callable[[Record], None] | None = None,
    ws: WsOptions | None = None,
) -> None:
    """Serve ``server`` until SIGINT/SIGTERM (or cancellation); ``start`` runs the executions.

    ``start`` runs as a task once the record is published; when it returns the
    server stays up (finished executions can still be read). This is :func:`hosting`
    (what :func:`attachable` is built on too) plus the signals.
    """
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    async with hosting(server, socket_path=socket_path, port=port, start=start, ws=ws) as record:
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


def _announcer(count: int, as_json: bool, restored: int = 0) -> Callable[[Record], None]:
    def announce(record: Record) -> None:
        if as_json:
            listen = {k: v for k, v in record.transport.items() if k != "token"}
            data: dict[str, object] = {"pid": record.pid, "listen": listen}
            if record.ws is not None:
                data["ws"] = record.ws["url"]  # never the token
            data["record"] = str(record.path)
            print(json.dumps(data), flush=True)
            return
        what = f"{count} execution{'s' if count != 1 else ''}"
        if restored:
            what += f" ({restored} restored from the store)"
        where = record.where() + (f" and {record.ws['url']}" if record.ws else "")
        print(
            f"agent-channel-acp: serving {what} on {where} (pid {record.pid}); "
            "attach with `agent-channel-acp ls`, `send`, or `bridge` from an editor",
            flush=True,
        )

    return announce


def _body(factory: Callable[..., object], model: str | None) -> Body:
    try:
        body = factory(model)
    except Exception as e:
        raise ServeError(f"the agent factory failed: {type(e).__name__}: {e}") from None
    if not callable(body):
        raise ServeError(
            f"the agent factory returned {body!r} ({type(body).__name__}), not a callable "
            "body: factory(model) must return the async function that runs one execution"
        )
    return cast("Body", body)  # called as it starts: checked there


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
    store: str | bool | None = None,
    restore: str = "go",
    load: Callable[[str], Callable[..., object]] | None = None,
    ws: WsOptions | None = None,
) -> int:
    """``agent-channel-acp serve``: run ``count`` executions until SIGINT/SIGTERM; exit status.

    A factory that gives no runnable body ends ``serve`` with a :class:`ServeError`: what
    it returned is checked here, and what calling that returns as the executions start
    (no execution of such a factory could ever run). With a ``store`` (a path, or ``True``
    for the default one) the executions are durable: the unfinished ones a store holds are
    restored under their ids (and then no new ones start), each with its own agent and
    model (``load`` imports another agent's factory by its spec); ``restore="wait"`` has
    them wait for an operator's message first.
    """
    from ..agent._execution import NotRunnable
    from ..agent.attach._server import AttachServer

    opened = _open_store(store)
    runs: list[Run] = []
    name = ""
    if opened is not None:
        runs = _restorable(opened, spec, factory, load, wait=restore == "wait")
    for _ in range(0 if runs else count):
        body = _body(factory, model)
        name = name or agent_name(spec, body)
        runs.append(Run(_with_task(body, task) if task else body))
    for i, r in enumerate(runs):
        if r.title is None:
            r.title = _title(name, task, i, len(runs))
        if opened is not None and r.journal is None:
            r.id = uuid4().hex
            meta = {"mode": "serve", "spec": spec, "model": model, "title": r.title}
            r.journal = opened.journal(r.id, {**meta, "cwd": os.getcwd()})

    path = Path(socket_path).absolute() if socket_path else None  # verbs run from anywhere

    async def main() -> None:
        server = AttachServer(replay=replay, approve=approve, context_window=context_window)
        if opened is not None:
            server.store = _where(opened, store)
        hosting = asyncio.current_task()
        unrunnable: list[NotRunnable] = []

        async def one(r: Run) -> None:
            try:
                await server.run(
                    r.body,
                    title=r.title or name,
                    execution_id=r.id,
                    journal=r.journal,
                    restored=r.restored,
                )
            except NotRunnable as e:
                unrunnable.append(e)
                if hosting is not None and len(unrunnable) == 1:
                    hosting.cancel()
            except Exception as e:
                log.error("an execution failed: %r", e)

        async def start() -> None:
            await asyncio.gather(*(one(r) for r in runs))

        try:
            await host(
                server,
                socket_path=path,
                port=port,
                start=start,
                ws=ws,
                announce=_announcer(len(runs), as_json, sum(r.restored is not None for r in runs)),
            )
        except asyncio.CancelledError:
            if unrunnable:
                raise ServeError(f"the agent factory's body cannot run: {unrunnable[0]}") from None
            raise

    try:
        asyncio.run(main())
    except (RuntimeDirError, ListenError) as e:
        raise ServeError(str(e)) from None
    finally:
        if opened is not None:
            opened.close()
    return 0


@dataclass
class Run:
    """One execution ``serve`` runs: new, or restored from its store."""

    body: Body
    title: str | None = None
    id: str | None = None
    journal: Journal | None = None
    restored: float | None = None


def _open_store(store: str | bool | None) -> Store | None:
    if store is None or store is False:
        return None
    from agent_channel import StoreError, open_store

    try:
        return open_store(None if store is True else store)
    except StoreError as e:
        raise ServeError(str(e)) from None


def _where(opened: Store, spec: str | bool | None) -> str:
    """Where the store is, for ``ls`` to say: a file's absolute path, or the URL typed
    without its password."""
    path = getattr(opened, "path", None)
    if isinstance(path, Path):
        return str(path.absolute())
    parts = urlsplit(str(spec))
    if parts.password is None:
        return str(spec)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def _restorable(
    store: Store,
    spec: str,
    factory: Callable[..., object],
    load: Callable[[str], Callable[..., object]] | None,
    *,
    wait: bool,
) -> list[Run]:
    """The store's unfinished ``serve`` executions, each with a body of its own agent.

    One whose agent cannot be loaded or made is recorded as ended with the reason (it
    would never run), never left "running"; the others go on under their ids.
    """
    runs: list[Run] = []
    for e in reversed(store.executions("running")):  # oldest first, as they were started
        meta = e.meta
        if meta.get("mode") != "serve":
            continue
        their_spec = meta.get("spec")
        their_model = meta.get("model")
        try:
            if their_spec == spec:
                made = factory
            elif load is not None:
                made = load(str(their_spec))
            else:
                raise ServeError(f"its agent {their_spec} is not this server's {spec}")
            body = _body(made, their_model if isinstance(their_model, str) else None)
        except Exception as err:
            log.error("execution %s cannot be restored: %s", e.id, err)
            store.journal(e.id).finish("ended", None, f"could not be restored: {err}")
            continue
        title = meta.get("title")
        journal = store.journal(e.id, wait=wait)
        runs.append(
            Run(
                body,
                title=title if isinstance(title, str) else e.id,
                id=e.id,
                journal=journal,
                restored=time.time(),
            )
        )
    return runs
