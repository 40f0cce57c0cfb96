"""A ref's side of a routed approver or resolver: it answers what the actor parks.

A thread of the route's own long-polls the host for the parked requests (as ``_follow``
does for events) and runs the approver or resolver for each new one on the event loop that
routed it (``anyio.from_thread``: asyncio or trio), each call waiting in a thread of its own
so the poll goes on; the answer goes back by an actor call. A request no longer listed was
withdrawn (its turn interrupted, the execution over): its call is cancelled. The route ends
with its release, the host's end of it, or the actor's death (every call then cancelled).
Routing and releasing submit actor calls without waiting for them: the event loop that
routes (an attach server's) never waits on the network.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import anyio.from_thread
import anyio.lowlevel
import ray
from anyio.lowlevel import EventLoopToken

from ._routes import Kind
from ._wire import Outcome, Requests, failure

log = logging.getLogger(__name__)

POLL_WAIT = 1.0
"""Seconds one poll waits on the host for a change (a long poll: requests come at once)."""

Fn = Callable[[Any], Awaitable[Any]]


def start(host: Any, execution_id: str, kind: Kind, fn: Fn) -> Callable[[], None]:
    """Route ``fn`` onto ``execution_id`` on ``host`` and follow the route, answering with
    ``fn`` on the calling loop; returns the release (idempotent, from any thread). Neither
    waits for the actor: the route is asked for here, its token awaited by the follower."""
    loop = anyio.lowlevel.current_token()
    routed = host.route.remote(execution_id, kind)  # a submission: it does not wait
    stop = threading.Event()
    lock = threading.Lock()
    known: list[int] = []  # the route's token, once the follower has it
    calls: dict[str, _Call] = {}

    def unroute(token: int) -> None:
        try:  # a submission: the host ends the route (the follower sees it end)
            host.unroute.remote(execution_id, token)
        except Exception:  # the driver shut down: nothing is routed any more
            log.debug("route %s of %s: already gone", token, execution_id)

    def release() -> None:
        with lock:
            if stop.is_set():
                return
            stop.set()
            token = known[0] if known else None
        if token is not None:
            unroute(token)

    def follow() -> None:
        try:
            outcome: Outcome = ray.get(routed)
            token: int = outcome.unwrap()
            if token == 0:  # the execution had ended
                return
            with lock:
                known.append(token)
                released = stop.is_set()
            if released:  # released before the route was made
                unroute(token)
                return
            version = -1
            while not stop.is_set():
                got: Requests = ray.get(
                    host.requests.remote(execution_id, token, version, POLL_WAIT)
                )
                version = got.version
                listed = dict(got.pending)
                for rid in [rid for rid in calls if rid not in listed]:
                    calls.pop(rid).cancel()  # withdrawn (or answered: then a no-op)
                for rid, request in listed.items():
                    if rid not in calls and not stop.is_set():
                        calls[rid] = _Call(host, execution_id, token, rid, fn, request, loop)
                if got.done:
                    return
        # The actor died, too many routes; or the driver shut down, which Ray raises in a
        # thread waiting in ray.get as SystemExit.
        except (Exception, SystemExit) as exc:
            log.info("route of %s ended: %s: %s", execution_id, type(exc).__name__, exc)
        finally:
            stop.set()
            for c in list(calls.values()):
                c.cancel()

    name = f"ray-{kind}-{execution_id}"
    threading.Thread(target=follow, name=name, daemon=True).start()
    return release


class _Call:
    """One request's approver or resolver call, on the routing loop, from a thread of its own."""

    def __init__(
        self,
        host: Any,
        execution_id: str,
        token: int,
        rid: str,
        fn: Fn,
        request: Any,
        loop: EventLoopToken,
    ) -> None:
        self._host, self._id, self._token, self._rid = host, execution_id, token, rid
        self._fn, self._request, self._loop = fn, request, loop
        self._lock = threading.Lock()
        self._scope: anyio.CancelScope | None = None
        self._cancelled = False
        threading.Thread(target=self._run, name=f"ray-ask-{rid}", daemon=True).start()

    def _run(self) -> None:
        try:
            outcome = anyio.from_thread.run(self._ask, token=self._loop)
        except Exception as exc:  # the routing loop is gone: nobody answers here
            log.info("request %s of %s not answered: %s", self._rid, self._id, exc)
            return
        if outcome is None:  # cancelled: the request was withdrawn
            return
        try:
            ray.get(self._host.answer.remote(self._id, self._token, self._rid, outcome))
        except (Exception, SystemExit) as exc:  # the actor died, or the driver shut down
            log.info("answer %s of %s lost: %s", self._rid, self._id, type(exc).__name__)

    async def _ask(self) -> Outcome | None:
        with anyio.CancelScope() as scope:
            with self._lock:
                self._scope = scope
                if self._cancelled:
                    scope.cancel()
            try:
                return Outcome(value=await self._fn(self._request))
            except Exception as exc:  # the asking turn gets it, as a local approver's
                return failure(exc)
        return None

    def cancel(self) -> None:
        """Cancel the call (from the follower's thread; done or not started: harmless)."""
        with self._lock:
            self._cancelled = True
            scope = self._scope
        if scope is not None:
            try:
                anyio.from_thread.run_sync(scope.cancel, token=self._loop)
            except Exception:  # the loop is gone: so is the call
                log.debug("request %s of %s: its loop is gone", self._rid, self._id)
