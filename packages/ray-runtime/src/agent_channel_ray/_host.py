"""The Ray async actor that hosts executions: it opens each one's channel and runs its body.

One actor may host many executions (a pool: a Ray actor is a process of ~60 MB, so one per
execution does not fit hundreds on a small cluster); :func:`~agent_channel_ray.launch` starts
one actor per execution unless given a host. Every method runs on the actor's event loop,
the loop the executions run on, so a snapshot and the position in the event log are taken
in one step: nothing can be published between them.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from agent_channel import (
    AgentRef,
    Cancel,
    ChannelItem,
    ExecutionEvent,
    ExecutionFinished,
    ExecutionSnapshot,
    TurnState,
    open_channel,
    open_store,
)
from agent_channel.lowlevel import MAX_QUEUED, as_body, load_agent

from ._routes import ROUTE_LIMIT, Kind, Route
from ._wire import Batch, Outcome, Requests, SteerState, call

LOG_LIMIT = 10_000
"""Events an execution's log keeps for watchers; one further behind takes a new snapshot."""
ENDED_LIMIT = 1_000
"""Ended executions a host keeps readable (messages, snapshot) before forgetting the oldest."""
BATCH_LIMIT = 1_000
"""Events one poll returns at most."""
REOPEN_WAIT = 60.0
"""Seconds a restarted host waits for an execution's run to reopen before a call on it
says it does not know it."""

Body = Callable[..., Awaitable[Any]]


class _Hosted:
    """One execution on this host: its ref once open, and its numbered event log."""

    def __init__(self) -> None:
        self.ref: AgentRef | None = None
        self.opened = asyncio.Event()
        self.log: deque[tuple[int, ExecutionEvent]] = deque(maxlen=LOG_LIMIT)
        self.next_seq = 0
        self.closed = False
        self.ended = asyncio.Event()  # set with ``closed``: its run is over
        self.wake = asyncio.Event()
        self.live: dict[int, Callable[[], None]] = {}
        self.routes: dict[int, Route] = {}

    def record(self, event: ExecutionEvent) -> None:
        self.log.append((self.next_seq, event))
        self.next_seq += 1
        self.wake.set()
        self.wake = asyncio.Event()


class ExecutionHostActor:
    """The actor's class; :data:`ExecutionHost` is it as a Ray actor (``.remote()``)."""

    def __init__(self) -> None:
        self._executions: dict[str, _Hosted] = {}
        self._ended: deque[str] = deque()
        self._tokens = 0
        # Restarted on another node (a durable execution's host, ``max_restarts``): its runs
        # are submitted again by the registry, so a call may come before its run reopens.
        self._restarted = _reconstructed()
        self._epoch = uuid.uuid4().hex  # this incarnation (a watcher's events say which)

    def _get(self, execution_id: str) -> _Hosted:
        hosted = self._executions.get(execution_id)
        if hosted is None:
            hosted = self._executions[execution_id] = _Hosted()
        return hosted

    async def _ref(self, execution_id: str) -> AgentRef:
        if execution_id not in self._executions and not self._restarted:
            raise LookupError(f"no execution {execution_id!r} on this host")
        hosted = self._get(execution_id)
        try:
            await asyncio.wait_for(hosted.opened.wait(), REOPEN_WAIT)
        except TimeoutError:
            raise LookupError(f"no execution {execution_id!r} on this host") from None
        assert hosted.ref is not None
        return hosted.ref

    async def run(
        self,
        execution_id: str,
        body: str | Body,
        args: tuple[Any, ...] = (),
        max_queued: int = MAX_QUEUED,
        live: bool = False,
        store: str | None = None,
    ) -> Any:
        """Open the execution's channel and run ``body(*args)`` in it; its return value.
        ``live``: marked live for its whole run (see :func:`~agent_channel_ray.launch`).
        ``store``: a spec ``agent_channel.open_store`` opens here, on this node; the
        execution is durable in it under its id, and restored from it when this run is
        submitted again (its host restarted on another node).

        Cancelled by ``ray.cancel`` this is an outer cancellation: the channel ends as any
        execution whose caller cancelled it does (``stop_reason`` ``cancelled``).
        """
        hosted = self._get(execution_id)
        try:  # a body that cannot be loaded ends the execution too (launch waits for it)
            # a spec or an object: a framework's agent object (a pydantic-ai Agent) is run
            # by its installed adapter, anything else is the body it is
            fn = as_body(load_agent(body) if isinstance(body, str) else body)
            journal = None
            if store is not None:
                meta: dict[str, object] = {"mode": "ray"}
                journal = open_store(store).journal(execution_id, meta)
            async with open_channel(max_queued=max_queued, journal=journal) as ch:
                ref = ch.ref()
                snapshot, _ = ref.watch(hosted.record)
                hosted.next_seq = snapshot.seq
                hosted.ref = ref
                if live:
                    ref.mark_live()  # released as the channel closes
                hosted.opened.set()
                return await fn(*args)
        finally:
            hosted.closed = True
            hosted.ended.set()
            for route in list(hosted.routes.values()):
                route.end()
            hosted.wake.set()
            hosted.opened.set()  # a caller waiting for a body that failed to start
            self._forget_old(execution_id)

    def _forget_old(self, execution_id: str) -> None:
        self._ended.append(execution_id)
        while len(self._ended) > ENDED_LIMIT:
            self._executions.pop(self._ended.popleft(), None)

    async def ping(self) -> None:
        """Nothing: a bare round trip, the benchmarks' floor."""

    async def opened(self, execution_id: str) -> bool:
        """Wait until the execution's channel is open; ``False`` if it ended first."""
        hosted = self._get(execution_id)  # its run may not have started yet
        await hosted.opened.wait()
        return not hosted.closed

    async def post(self, execution_id: str, item: ChannelItem) -> Outcome:
        ref = await self._ref(execution_id)
        return call(ref.post, item)

    async def interrupt(self, execution_id: str, cancel: Cancel | None) -> Outcome:
        ref = await self._ref(execution_id)
        return call(ref.interrupt, cancel)

    async def withdraw(self, execution_id: str, item_id: str) -> Outcome:
        ref = await self._ref(execution_id)
        return call(ref.withdraw, item_id)

    async def cancel_region(self, execution_id: str, key: str) -> Outcome:
        ref = await self._ref(execution_id)
        return call(ref.cancel_region, key)

    async def messages(self, execution_id: str) -> Outcome:
        ref = await self._ref(execution_id)
        return call(ref.messages)

    async def state(self, execution_id: str) -> tuple[TurnState, bool]:
        ref = await self._ref(execution_id)
        return ref.turn_state, ref.closed

    async def children(self, execution_id: str, method: str, args: tuple[Any, ...]) -> Outcome:
        """One of ``ref.children``'s methods."""
        if method not in ("list", "info", "result", "messages", "steer", "stop"):
            return Outcome(error="ValueError", message=f"no children method {method!r}")
        ref = await self._ref(execution_id)
        if method == "steer":  # the receipt as it stands: its outcome comes as ChildSteered
            return call(lambda *a: SteerState.of(ref.children.steer(*a)), *args)
        return call(getattr(ref.children, method), *args)

    async def mark_live(self, execution_id: str) -> int:
        ref = await self._ref(execution_id)
        self._tokens += 1
        self._get(execution_id).live[self._tokens] = ref.mark_live()
        return self._tokens

    async def release_live(self, execution_id: str, token: int) -> None:
        hosted = self._executions.get(execution_id)
        release = hosted.live.pop(token, None) if hosted is not None else None
        if release is not None:
            release()

    async def route(self, execution_id: str, kind: Kind) -> Outcome:
        """Route a ref's approver or resolver (see ``_routes``); its token, ``0`` once the
        execution has ended (nothing to route)."""
        ref = await self._ref(execution_id)
        hosted = self._get(execution_id)
        if hosted.closed:
            return Outcome(value=0)
        if len(hosted.routes) >= ROUTE_LIMIT:
            message = f"execution {execution_id} has {ROUTE_LIMIT} routes already"
            return Outcome(error="RuntimeError", message=message)
        self._tokens += 1
        token = self._tokens
        hosted.routes[token] = Route(kind, ref, lambda: hosted.routes.pop(token, None))
        return Outcome(value=token)

    async def requests(self, execution_id: str, token: int, version: int, wait: float) -> Requests:
        """A route's parked requests once they differ from ``version`` (a long poll)."""
        hosted = self._executions.get(execution_id)
        route = hosted.routes.get(token) if hosted is not None else None
        if route is None:  # ended (released, the execution over, forgotten)
            return Requests(version, (), done=True)
        return await route.poll(version, wait)

    async def answer(self, execution_id: str, token: int, rid: str, outcome: Outcome) -> None:
        hosted = self._executions.get(execution_id)
        route = hosted.routes.get(token) if hosted is not None else None
        if route is not None:
            route.answer(rid, outcome)

    async def unroute(self, execution_id: str, token: int) -> None:
        hosted = self._executions.get(execution_id)
        route = hosted.routes.get(token) if hosted is not None else None
        if route is not None:
            route.end()

    async def snapshot(self, execution_id: str) -> ExecutionSnapshot:
        """The execution's state now; its ``seq`` is the number of the next event logged."""
        ref = await self._ref(execution_id)
        snapshot, release = ref.watch(_ignore)
        release()
        return snapshot

    async def final(self, execution_id: str, wait: float = 10.0) -> ExecutionFinished | None:
        """How the execution ended (its last event), waiting up to ``wait`` s for its run to
        be over (a cancelled run's caller may hear of it first); ``None`` if it is not, or
        unknown. The registry keeps it before it frees the actor: a watcher that had not
        read so far yet still learns how the execution ended (see ``RayRef.watch``)."""
        hosted = self._executions.get(execution_id)
        if hosted is None:
            return None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(hosted.ended.wait(), wait)
        if not hosted.closed or not hosted.log:
            return None
        last = hosted.log[-1][1]
        return last if isinstance(last, ExecutionFinished) else None

    async def events(self, execution_id: str, after: int, wait: float = 1.0) -> Batch:
        """The logged events numbered ``after`` and up; waits up to ``wait`` s for one."""
        hosted = self._executions.get(execution_id)
        if hosted is None:  # forgotten (see ENDED_LIMIT): nothing more will come
            return Batch(events=(), closed=True, lost=True, epoch=self._epoch)
        await hosted.opened.wait()
        if hosted.next_seq <= after and not hosted.closed:
            wake = hosted.wake
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), wait)
        log = hosted.log
        if log and log[0][0] > after:
            return Batch(events=(), closed=hosted.closed, lost=True, epoch=self._epoch)
        start = after - log[0][0] if log else 0
        events = tuple(log[i] for i in range(start, min(len(log), start + BATCH_LIMIT)))
        done = hosted.closed and (not events or events[-1][0] == hosted.next_seq - 1)
        return Batch(events=events, closed=done, epoch=self._epoch)


def _ignore(event: ExecutionEvent) -> None:
    return None


def _reconstructed() -> bool:
    import warnings

    import ray

    try:
        with warnings.catch_warnings():  # Ray's property warns about an attribute it reads
            warnings.simplefilter("ignore", DeprecationWarning)
            return bool(ray.get_runtime_context().was_current_actor_reconstructed)
    except Exception:  # not in an actor (a test builds the class directly)
        return False
