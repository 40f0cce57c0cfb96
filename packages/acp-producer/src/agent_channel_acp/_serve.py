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
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from ._discovery import Publication, Record, runtime_dir, sweep
from ._listen import Listener, listen_tcp, listen_unix

REFRESH = 0.5
"""Seconds between checks of the executions for the discovery record."""

RECORD_KEYS = ("id", "title", "status")
"""What the record keeps of each execution (clients ask the server for the rest)."""


class Served(Protocol):
    """What :func:`host` serves: the attach server's connection side."""

    async def serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None: ...

    def executions(self) -> list[dict[str, Any]]: ...

    async def aclose(self) -> None: ...


def record_executions(server: Served) -> list[dict[str, Any]]:
    return [{k: e[k] for k in RECORD_KEYS if k in e} for e in server.executions()]


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
    server stays up (finished executions can still be read).
    """
    directory = runtime_dir()
    sweep(directory)
    handler = server.serve_connection
    listener: Listener
    if port is not None:
        listener = await listen_tcp(handler, port)
    else:
        listener = await listen_unix(handler, socket_path or directory / f"{os.getpid()}.sock")
    publication = Publication(directory, listener.transport)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    running: asyncio.Task[None] | None = None
    try:
        publication.write(record_executions(server))
        if announce is not None:
            announce(publication.record)
        if start is not None:
            running = loop.create_task(_run(start))
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(REFRESH):
                    await stop.wait()
            publication.write(record_executions(server))
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        try:
            await listener.close(connections=False)
            await server.aclose()  # executions end; their clients are told
            if running is not None:
                running.cancel()
                await asyncio.gather(running, return_exceptions=True)
            await listener.close()
        finally:
            publication.remove()


async def _run(start: Callable[[], Awaitable[None]]) -> None:
    await start()
