# pyright: reportPrivateUsage=false
# (the scope, the ref and the channel are one unit split for their different audiences)
"""The channel: one per execution, many producers, one consumer.

Hot paths are written for their cost: ``post`` is an append and a check,
``drain`` a length test when nothing is queued, and ``scope`` on a channel
nobody holds a ref to is a shared no-op (no producer exists who could
interrupt it, so no cancel scope is needed).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from types import TracebackType
from typing import Literal

import anyio

from ._errors import AgentInterrupted, ChannelClosed, NotOwner
from ._events import (
    ExecutionEvent,
    ExecutionFinished,
    ItemsDrained,
    StopReason,
    TurnCancelled,
    TurnEnded,
    TurnStarted,
    TurnState,
)
from ._items import Cancel, ChannelItem
from ._loop import LoopHandle
from ._messages import ToolCall

log = logging.getLogger("agent_channel")

# Field-less events are immutable: publish one shared instance instead of building one per turn.
_TURN_STARTED = TurnStarted()
_TURN_ENDED = TurnEnded()

Subscriber = Callable[[ExecutionEvent], None]
"""An event callback. It runs synchronously in the consumer's task: keep it quick."""

Approver = Callable[[ToolCall], Awaitable[bool]]
"""Decides whether a tool call may run; installed by whoever opens the channel."""


class AgentChannel:
    """The consumer's side of one execution's channel.

    Get the current one with :func:`agent_channel`; a runtime creates one per
    execution with :func:`open_channel`. Producers never hold this object:
    they hold the :class:`AgentRef` that :meth:`ref` returns.
    """

    __slots__ = (
        "__weakref__",
        "_closed",
        "_live",
        "_loop",
        "_owner",
        "_queue",
        "_reachable",
        "_scope",
        "_subscribers",
        "_task",
        "_thread",
        "_waiter",
        "approver",
        "stop_reason",
        "turn_state",
    )

    def __init__(self, *, approver: Approver | None = None) -> None:
        self._queue: deque[ChannelItem] = deque()
        self._scope: _Scope | None = None
        self._reachable = False
        self._subscribers: tuple[Subscriber, ...] = ()
        self._waiter: anyio.Event | None = None
        self._owner: object | None = None
        self._closed = False
        self._live = 0
        self._loop = LoopHandle()
        self._task = self._loop.current_task
        self._thread = threading.get_ident()
        self.approver = approver
        """Asked before each tool call when set (see :data:`Approver`)."""
        self.stop_reason: StopReason | None = None
        """The consumer's last word on why it stopped; reported in :class:`ExecutionFinished`."""
        self.turn_state: TurnState = "idle"
        """The last scope transition."""

    # -- producer side (reached through AgentRef) -------------------------------------

    def post(self, item: ChannelItem) -> None:
        """Queue ``item`` for the consumer's next :meth:`drain`. Safe from any thread."""
        if self._closed:
            raise ChannelClosed(f"execution finished; {item.type} {item.id} not delivered")
        self._queue.append(item)
        if self._waiter is not None:
            self._call_on_loop(self._wake)

    def interrupt(self, cancel: Cancel | None = None) -> None:
        """Queue ``cancel`` and stop the bound scope, if any. Safe from any thread.

        With no scope bound this is a plain :meth:`post` of the cancel, never an
        error. On a finished execution there is nothing to stop and it does nothing.
        """
        if self._closed:
            return
        cancel = cancel if cancel is not None else Cancel()
        self._queue.append(cancel)
        scope = self._scope
        if scope is not None:
            self._call_on_loop(lambda: scope.interrupt(cancel))
        if self._waiter is not None:
            self._call_on_loop(self._wake)

    def ref(self) -> AgentRef:
        """A producer handle. From now on scopes can be interrupted (see :meth:`scope`)."""
        self._reachable = True
        return AgentRef(self)

    @property
    def is_live(self) -> bool:
        """True while a producer with external reach (an operator surface) is attached."""
        return self._live > 0

    @property
    def closed(self) -> bool:
        """True once the execution has finished."""
        return self._closed

    # -- consumer side -----------------------------------------------------------------

    def drain(self) -> list[ChannelItem]:
        """Take every queued item, oldest first. Never blocks."""
        if self._owner is not self._task():
            self._claim()
        q = self._queue
        if not q:
            return []
        # popleft is atomic, so a post racing in from another thread is never lost
        items = [q.popleft()] if len(q) == 1 else [q.popleft() for _ in range(len(q))]
        if self._subscribers:
            self.publish(ItemsDrained(items=tuple(items)))
        return items

    async def receive(self) -> list[ChannelItem]:
        """Wait until at least one item is queued, then drain."""
        if self._owner is not self._task():
            self._claim()
        if not self._queue:
            waiter = self._waiter = anyio.Event()
            try:
                if not self._queue:  # an item posted before the waiter was visible
                    await waiter.wait()
            finally:
                self._waiter = None
        return self.drain()

    def scope(self) -> _Scope | _NullScope:
        """An interruptible region: ``with channel.scope(): ...``.

        Raises :class:`AgentInterrupted` on exit when, and only when, this
        channel's :meth:`interrupt` cancelled it. A scope entered while nobody
        holds a ref is a no-op: a ref taken during it cannot stop it, and that
        interrupt is delivered at the next boundary instead.
        """
        if self._owner is not self._task():
            self._claim()
        if not self._reachable:
            return _NULL_SCOPE
        return _Scope(self)

    @property
    def observed(self) -> bool:
        """True when someone subscribed: build events only then."""
        return bool(self._subscribers)

    def publish(self, event: ExecutionEvent) -> None:
        """Hand ``event`` to every subscriber. A failing subscriber is logged, not raised."""
        for callback in self._subscribers:
            try:
                callback(event)
            except Exception:
                log.exception("event subscriber %r failed", callback)

    # -- internals ---------------------------------------------------------------------

    def _claim(self) -> None:
        task = self._task()
        if self._owner is None:
            self._owner = task
            return
        raise NotOwner(
            "only the task that consumes this channel may drain it, wait on it or enter its "
            f"scope; it is owned by {self._owner!r}, not {task!r}"
        )

    def _call_on_loop(self, fn: Callable[[], object]) -> None:
        if threading.get_ident() == self._thread:
            fn()
        else:
            self._loop.call_soon_threadsafe(fn)

    def _wake(self) -> None:
        if self._waiter is not None:
            self._waiter.set()

    def _subscribe(self, callback: Subscriber) -> Callable[[], None]:
        self._subscribers = (*self._subscribers, callback)

        def unsubscribe() -> None:
            self._subscribers = tuple(s for s in self._subscribers if s is not callback)

        return unsubscribe

    def _close(self, error: BaseException | None) -> None:
        self._closed = True
        undelivered = tuple(self._queue)
        self._queue.clear()
        if isinstance(error, anyio.get_cancelled_exc_class()) and self.stop_reason is None:
            self.stop_reason = "cancelled"
        message = None if error is None or self.stop_reason == "cancelled" else repr(error)
        if self._subscribers:
            self.publish(
                ExecutionFinished(
                    stop_reason=self.stop_reason, undelivered=undelivered, error=message
                )
            )
        self._subscribers = ()


class _Scope:
    """A bound, interruptible region (see :meth:`AgentChannel.scope`)."""

    __slots__ = ("_channel", "_cs", "_interrupt")

    def __init__(self, channel: AgentChannel) -> None:
        self._channel = channel
        self._cs = channel._loop.cancel_scope()
        self._interrupt: Cancel | None = None

    def interrupt(self, cancel: Cancel) -> None:
        # Runs on the consumer's loop. A scope that has already exited ignores it:
        # the Cancel stays queued and is delivered at the next boundary.
        if self._channel._scope is self and self._interrupt is None:
            self._interrupt = cancel
            self._cs.cancel()

    def __enter__(self) -> None:
        ch = self._channel
        if ch._scope is not None:
            raise RuntimeError("a scope of this channel is already active; use one per region")
        self._cs.__enter__()
        ch._scope = self
        ch.turn_state = "started"
        if ch._subscribers:
            ch.publish(_TURN_STARTED)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        ch = self._channel
        ch._scope = None
        suppressed = self._cs.__exit__(exc_type, exc, tb)
        cancel = self._interrupt
        if cancel is not None and self._cs.cancelled_caught:
            ch.turn_state = "cancelled"
            if ch._subscribers:
                ch.publish(TurnCancelled(cancel=cancel))
            raise AgentInterrupted(cancel) from None
        ch.turn_state = "ended"
        if ch._subscribers:
            ch.publish(_TURN_ENDED)
        return bool(suppressed)


class _NullScope:
    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> Literal[False]:
        return False


_NULL_SCOPE = _NullScope()


class AgentRef:
    """A producer's handle on one execution: send it items, interrupt it, watch it.

    It cannot drain, enter a scope or see the consumer's state. ``post`` and
    ``interrupt`` may be called from any thread or event loop; subscriber
    callbacks run in the consumer's task.
    """

    __slots__ = ("_channel", "interrupt", "post")

    post: Callable[[ChannelItem], None]
    """Queue a cooperative item; raises :class:`ChannelClosed` once the execution ended."""
    interrupt: Callable[..., None]
    """``interrupt(cancel=None)``: stop the work in progress (between regions: deliver it)."""

    def __init__(self, channel: AgentChannel) -> None:
        self._channel = channel
        # The channel's own bound methods: a producer's post costs one call, not two.
        self.post = channel.post
        self.interrupt = channel.interrupt

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback`` with every event from now on; returns an unsubscribe function."""
        return self._channel._subscribe(callback)

    def mark_live(self) -> Callable[[], None]:
        """Declare an operator surface attached (see ``is_live``); returns the release."""
        ch = self._channel
        ch._live += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                ch._live -= 1

        return release

    @property
    def turn_state(self) -> TurnState:
        """The execution's last scope transition, read at the moment of asking."""
        return self._channel.turn_state

    @property
    def closed(self) -> bool:
        """True once the execution has finished."""
        return self._channel._closed


class _InertChannel(AgentChannel):
    """What :func:`agent_channel` returns outside any execution: accepts and ignores."""

    __slots__ = ()

    def __init__(self) -> None:  # no loop needed: nothing ever waits or wakes
        self._queue = deque()
        self._scope = None
        self._reachable = False
        self._subscribers = ()
        self._waiter = None
        self._owner = None
        self._closed = False
        self._live = 0

    # One instance serves every caller outside an execution: it keeps no state.
    approver = property(lambda self: None, lambda self, value: None)  # type: ignore[assignment]
    stop_reason = property(lambda self: None, lambda self, value: None)  # type: ignore[assignment]
    turn_state = property(lambda self: "idle", lambda self, value: None)  # type: ignore[assignment]

    def post(self, item: ChannelItem) -> None:
        return None

    def interrupt(self, cancel: Cancel | None = None) -> None:
        return None

    def drain(self) -> list[ChannelItem]:
        return []

    async def receive(self) -> list[ChannelItem]:
        raise RuntimeError("no execution is open here: nothing can ever arrive on this channel")

    def scope(self) -> _NullScope:
        return _NULL_SCOPE

    def publish(self, event: ExecutionEvent) -> None:
        return None

    def _subscribe(self, callback: Subscriber) -> Callable[[], None]:
        return lambda: None


_INERT = _InertChannel()
_current: ContextVar[AgentChannel] = ContextVar("agent_channel", default=_INERT)


def agent_channel() -> AgentChannel:
    """The current execution's channel; an inert one outside any execution."""
    return _current.get()


@asynccontextmanager
async def open_channel(*, approver: Approver | None = None) -> AsyncGenerator[AgentChannel, None]:
    """Start an execution: a fresh channel, ambient for the block.

    Tasks started inside the block inherit it (contextvars are copied at task
    creation). A runtime that starts a detached child execution calls
    ``open_channel()`` again inside the child's task, so the child gets its own.
    On exit the channel closes and publishes :class:`ExecutionFinished`.
    """
    channel = AgentChannel(approver=approver)
    token = _current.set(channel)
    error: BaseException | None = None
    try:
        yield channel
    except BaseException as e:
        error = e
        raise
    finally:
        _current.reset(token)
        channel._close(error)
