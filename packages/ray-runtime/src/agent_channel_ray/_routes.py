"""The actor's side of an approver or resolver routed from a :class:`RayRef`.

A route is routed onto the execution's own ref, as a producer's approver would be; each
request it is asked is parked (bounded: :data:`REQUEST_LIMIT`) until the ref's follower,
long-polling :meth:`Route.poll`, sends the answer back. The wait is an ordinary ``await``
in the asking turn: an interrupt cancels it, which takes the request off the list, and the
follower cancels its call. When the route ends (released, its follower silent for
:data:`LEASE` s, the execution over) its parked requests are asked of what the execution
had before it: the route before, else the opener's approver; with none, an approval is
refused and a question gets the "no one can answer" answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, Literal

from agent_channel import AgentRef, Answer, new_id
from agent_channel.lowlevel import approver_of, resolver_of
from agent_channel.questions import NO_ONE

from ._wire import Outcome, Requests

log = logging.getLogger(__name__)

Kind = Literal["approvals", "questions"]

REQUEST_LIMIT = 100
"""Requests one route parks at once; one more is refused at once (an approval ``False``, a
question unanswered), with a log line."""
ROUTE_LIMIT = 64
"""Routes one execution holds at once (each attach server's hub holds two)."""
LEASE = 10.0
"""Seconds a route waits for its follower's next poll before it ends (its process died)."""
TOO_MANY = "too many questions waiting for an answer"


class Route:
    """One routed approver or resolver, standing in for it on the actor (see the module)."""

    def __init__(self, kind: Kind, ref: AgentRef, on_end: Callable[[], object]) -> None:
        self.kind: Kind = kind
        self._ref = ref
        self._loop = asyncio.get_running_loop()
        self._pending: dict[str, tuple[Any, asyncio.Future[Outcome | None]]] = {}
        self._version = 0
        self._wake = asyncio.Event()
        self._seen = self._loop.time()
        self._on_end = on_end
        self.done = False
        route = ref.route_approvals if kind == "approvals" else ref.route_questions
        self._release = route(self._ask)
        self._lease = asyncio.ensure_future(self._expire())

    async def _ask(self, request: Any) -> Any:
        if self.done:  # routed when the route ended (a child's approver read it before)
            return await self._fallback(request)
        if len(self._pending) >= REQUEST_LIMIT:
            log.warning("%s: %d requests waiting already; refused", self.kind, REQUEST_LIMIT)
            return False if self.kind == "approvals" else Answer(None, reason=TOO_MANY)
        rid = new_id()
        future: asyncio.Future[Outcome | None] = self._loop.create_future()
        self._pending[rid] = (request, future)
        self._changed()
        try:
            outcome = await future
        finally:  # answered, withdrawn (the turn was interrupted) or the route ended
            del self._pending[rid]
            self._changed()
        if outcome is None:
            return await self._fallback(request)
        return outcome.unwrap()

    async def _fallback(self, request: Any) -> Any:
        if self.kind == "approvals":
            approver = approver_of(self._ref)
            return False if approver is None else await approver(request)
        resolver = resolver_of(self._ref)
        return Answer(None, reason=NO_ONE) if resolver is None else await resolver(request)

    def _changed(self) -> None:
        self._version += 1
        self._wake.set()
        self._wake = asyncio.Event()

    async def poll(self, version: int, wait: float) -> Requests:
        """The parked requests once they differ from ``version`` (or ``wait`` s passed)."""
        self._seen = self._loop.time()
        if self._version == version and not self.done:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)
        self._seen = self._loop.time()
        pending = tuple((rid, request) for rid, (request, _) in self._pending.items())
        return Requests(self._version, pending, self.done)

    def answer(self, rid: str, outcome: Outcome) -> None:
        """Wake the turn waiting for ``rid`` with ``outcome`` (gone already: nothing)."""
        entry = self._pending.get(rid)
        if entry is not None and not entry[1].done():
            entry[1].set_result(outcome)

    def end(self) -> None:
        """Stop routing: the execution has what it had; parked requests are asked of that."""
        if self.done:
            return
        self.done = True
        self._release()
        self._lease.cancel()
        for _, future in self._pending.values():
            if not future.done():
                future.set_result(None)
        self._changed()
        self._on_end()

    async def _expire(self) -> None:
        while not self.done:
            await asyncio.sleep(LEASE / 4)
            if self._loop.time() - self._seen > LEASE:
                log.warning("%s: the routing ref stopped polling; routing ended", self.kind)
                self.end()
