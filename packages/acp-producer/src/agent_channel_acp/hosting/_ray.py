"""``serve --ray``: an attach server for the executions a Ray cluster runs.

The cluster's executions are not ours to start or end: the server joins the cluster, asks
its registry every :data:`LOOK` seconds for the running ones and serves each new one as
:meth:`AttachServer.add` does (``end`` from an operator is refused; a shutdown leaves them
running), at most :data:`SERVED_LIMIT` running at once. ``agent_channel_ray`` is loaded by
name here, at the edge: the producer does not depend on Ray. A ref's calls block on the
network: its ref says it is ``remote`` and the hub makes the operator's calls on a worker
thread (see ``Hub.call``); the registry is read on a worker thread.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._install import RAY, hint
from ..wire._discovery import Record, RuntimeDirError
from ._listen import ListenError
from ._serve import ServeError, host

if TYPE_CHECKING:
    from ..agent.attach._server import AttachServer
    from ._asgi import WsOptions

log = logging.getLogger("agent_channel_acp")

LOOK = 1.0
"""Seconds between two looks at the cluster's registry for new executions."""
SERVED_LIMIT = 256
"""Running executions one ``serve --ray`` serves at once (as many as an attach server keeps
finished ones, ``AttachServer.finished_kept``); past it new ones wait, with one log line."""

MISSING = f"serve --ray needs agent-channel-ray: {hint(RAY)}"


def load_ray() -> Any:
    """``agent_channel_ray``, or a :class:`ServeError` saying how to install it."""
    try:
        return importlib.import_module("agent_channel_ray")
    except ModuleNotFoundError as e:
        if e.name in ("agent_channel_ray", "ray") or (e.name or "").startswith("ray."):
            raise ServeError(MISSING) from None
        raise


def serve_ray_command(
    address: str,
    hosted: Callable[[str], list[Any]],
    *,
    socket_path: str | None,
    port: int | None,
    replay: int,
    context_window: int | None,
    approve: bool = False,
    as_json: bool,
    ws: WsOptions | None = None,
) -> int:
    """``agent-channel-acp serve --ray ADDRESS``: serve the cluster's executions until
    SIGINT/SIGTERM; the exit status. ``hosted`` is ``agent_channel_ray.hosted``
    (:func:`load_ray`): the cluster's running executions, joining it first. With
    ``approve`` their approvals are routed to the drivers, as ``serve --approve`` does."""
    from ..agent.attach._server import AttachServer

    path = Path(socket_path).absolute() if socket_path else None
    try:
        first = hosted(address)  # joins the cluster: a wrong address fails here, at once
    except Exception as e:
        raise ServeError(f"cannot join the Ray cluster at {address}: {e}") from None

    async def main() -> None:
        server = AttachServer(replay=replay, approve=approve, context_window=context_window)
        add = Adder(server)

        async def follow() -> None:
            add(first)
            while True:
                await asyncio.sleep(LOOK)
                try:
                    add(await asyncio.to_thread(hosted, address))
                except Exception as e:  # the cluster is away for now: look again
                    log.warning("cannot list the Ray cluster's executions: %s", e)

        await host(
            server,
            socket_path=path,
            port=port,
            start=follow,
            ws=ws,
            announce=_announcer(address, len(first), as_json),
        )

    try:
        asyncio.run(main())
    except (RuntimeDirError, ListenError) as e:
        raise ServeError(str(e)) from None
    return 0


class Adder:
    """Serves each new execution of the cluster's list, at most ``limit`` running at once."""

    def __init__(self, server: AttachServer, limit: int = SERVED_LIMIT) -> None:
        self._server = server
        self._limit = limit
        self._served: set[str] = set()
        self._full = False  # said so once, until there is room again

    def __call__(self, found: list[Any]) -> None:
        listed = {execution_id for execution_id, _, _ in found}
        self._served &= listed  # the ended ones: the registry lists running ones only
        running = sum(1 for hub in self._server.hubs() if hub.running)
        for execution_id, title, ref in found:
            if execution_id in self._served:
                continue
            if running >= self._limit:
                if not self._full:
                    log.warning(
                        "serving %d running executions of the Ray cluster, the limit: "
                        "%s and later ones are served as others end",
                        self._limit,
                        execution_id,
                    )
                self._full = True
                return
            try:  # listed as its host opens it: until then the host does not know it
                self._server.add(ref, title=title, execution_id=execution_id)
            except Exception as e:
                log.info("execution %s not served yet (next look): %s", execution_id, e)
                continue
            ending = getattr(ref, "end", None)
            if callable(ending):  # the `end` verb ends it on the cluster; stopping us does not
                hub = self._server.hub(execution_id)
                hub.ending = _off_the_loop(ending)
                hub.outlives_server = True
            self._served.add(execution_id)
            running += 1
        self._full = False


def _off_the_loop(end: Callable[[], object]) -> Callable[[], None]:
    """``end`` (a blocking cluster call) on a worker thread: the verb waits for the end
    through the execution's events, not on the server's loop."""

    def ending() -> None:
        asyncio.get_running_loop().run_in_executor(None, end)

    return ending


def _announcer(address: str, count: int, as_json: bool) -> Callable[[Record], None]:
    def announce(record: Record) -> None:
        if as_json:
            listen = {k: v for k, v in record.transport.items() if k != "token"}
            data: dict[str, object] = {"pid": record.pid, "listen": listen, "ray": address}
            if record.ws is not None:
                data["ws"] = record.ws["url"]  # never the token
            data["record"] = str(record.path)
            print(json.dumps(data), flush=True)
            return
        where = record.where() + (f" and {record.ws['url']}" if record.ws else "")
        print(
            f"agent-channel-acp: serving the Ray cluster at {address} ({count} running "
            f"execution{'s' if count != 1 else ''}, more as they start) on {where} "
            f"(pid {record.pid}); attach with `agent-channel-acp ls`, `send`, or `bridge`",
            flush=True,
        )

    return announce
