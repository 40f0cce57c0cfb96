"""The kernel's core: one execution's queue, its bound scope and its events.

Everything a turn touches is here, as slots of one object, because one lock and one
owner task guard them together and a turn is counted in nanoseconds: ``post`` is an
append and a check, ``drain`` a length test when nothing is queued, and ``scope`` on a
channel nobody holds a ref to is a shared no-op (no producer exists who could interrupt
it). The bound scope is the channel itself, so a turn allocates no scope object.
:class:`~agent_channel.AgentChannel` adds what is asked per execution, not per turn.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING

import anyio

from ._errors import AgentInterrupted, ChannelClosed, ChannelFull, NotOwner, describe
from ._items import Cancel, ChannelItem
from ._loop import LoopHandle
from ._scope import NULL_SCOPE, NullScope, ended_by, items_drained, turn_started

if TYPE_CHECKING:  # the event models are imported where the first event is built
    from typing import Self

    from ._abc import Subscriber
    from ._events import ExecutionEvent, StopReason, TurnState
    from ._loop import CancelScopeLike
    from ._store import Journal

isa = type.__instancecheck__
"""``isinstance`` for the hot paths: a pydantic class's own goes through the (slower) ABC check."""

MAX_QUEUED = 10_000
"""Undrained items a channel holds (Cancels counted apart) unless ``open_channel`` says
otherwise: past it ``post`` raises :class:`ChannelFull` and an interrupt adds nothing."""


class ChannelCore:
    """The queue, the bound scope and the events of one execution (see the module)."""

    __slots__ = (
        "__weakref__",
        "_awaiting",
        "_cancels",
        "_claimed",
        "_closed",
        "_cs",
        "_journal",
        "_lock",
        "_loop",
        "_max_queued",
        "_owner",
        "_queue",
        "_reachable",
        "_seq",
        "_subscribers",
        "_taken",
        "_task",
        "_thread",
        "_waiter",
        "stop_reason",
        "turn_state",
    )

    def __init__(self, max_queued: int = MAX_QUEUED, loop: LoopHandle | None = None) -> None:
        if type(max_queued) is not int or max_queued < 1:
            raise ValueError(f"max_queued must be an int of at least 1, not {max_queued!r}")
        loop = LoopHandle() if loop is None else loop
        self._max_queued = max_queued
        self._queue: deque[ChannelItem] = deque()
        self._lock = threading.Lock()  # every change to the queue, so withdraw/close are atomic
        self._cancels = 0  # Cancels in the queue (changed under the lock)
        self._claimed: Cancel | None = None  # the Cancel stopping the bound scope: not withdrawable
        self._cs: CancelScopeLike | None = None  # the bound scope's cancel scope, while entered
        self._reachable = False  # a ref was taken: scopes can be interrupted
        self._subscribers: tuple[Subscriber, ...] = ()
        self._waiter: anyio.Event | None = None
        self._owner: object | None = None
        self._closed = False
        self._loop = loop
        self._task = loop.current_task
        self._thread = threading.get_ident()
        self._seq = 0  # events published
        self._journal: Journal | None = None  # set by open_channel(journal=...)
        self._taken: list[str] = []  # ids drained since the last checkpoint (with a journal)
        self.stop_reason: StopReason | None = None
        """The consumer's last word on why it stopped; reported in :class:`ExecutionFinished`."""
        self.turn_state: TurnState = "idle"
        """The last scope transition."""
        self._awaiting: StopReason | None = None  # parked in receive(), and why

    # -- producers (through AgentRef), from any thread ----------------------------------

    def post(self, item: ChannelItem) -> None:
        """Queue ``item`` for the consumer's next :meth:`drain`. Safe from any thread.

        Raises:
            ChannelClosed: the execution finished; an item is either refused here or
                reaches the consumer or ``ExecutionFinished.undelivered``.
            ChannelFull: ``max_queued`` items wait undrained (a Cancel past that many
                waiting Cancels is dropped instead: those already stop the turn).
            TypeError: ``item`` is not a :class:`ChannelItem`.
        """
        if not isa(ChannelItem, item):
            raise TypeError(f"post() takes a ChannelItem such as UserMessage, not {kind_of(item)}")
        settle = None
        lock = self._lock
        lock.acquire()  # not `with`: measurably slower on this path
        try:
            if self._closed:
                raise ChannelClosed(f"execution finished; {item.type} {item.id} not delivered")
            if isa(Cancel, item):
                if self._cancels >= self._max_queued:
                    return
                self._cancels += 1
            elif len(self._queue) - self._cancels >= self._max_queued:
                raise ChannelFull(
                    f"{self._max_queued} items already wait undrained (the channel's limit); "
                    f"{item.type} {item.id} not queued"
                )
            elif self._journal is not None:  # written before it is queued (write-ahead)
                settle = self._journal.posted(item)
            self._queue.append(item)
        finally:
            lock.release()
        if settle is not None:  # durable before it returns, with the channel free meanwhile
            settle()
        waiter = self._waiter
        if waiter is not None:
            self._call_on_loop(waiter.set)

    def interrupt(self, cancel: Cancel | None = None) -> None:
        """Queue ``cancel`` and stop the bound scope, if any. Safe from any thread.

        With no scope bound the cancel waits: the next :meth:`scope` entered raises at
        once, unless a :meth:`drain` takes it first. On a finished execution there is
        nothing to stop and it does nothing; with ``max_queued`` Cancels already waiting,
        neither (they stop the turn).

        Raises:
            TypeError: ``cancel`` is not a :class:`Cancel`.
        """
        if cancel is None:
            cancel = Cancel()
        elif not isa(Cancel, cancel):
            raise TypeError(f"interrupt() takes a Cancel (or nothing), not {kind_of(cancel)}")
        on_loop = threading.get_ident() == self._thread
        lock = self._lock
        lock.acquire()
        try:
            if self._closed or self._cancels >= self._max_queued:
                return
            self._queue.append(cancel)
            self._cancels += 1
            cs = self._cs
            # On the loop's thread the bound scope cannot change meanwhile, so claim the
            # Cancel for it right here, where no withdraw can take it in between.
            claimed = on_loop and cs is not None and self._claim_for(cs, cancel)
        finally:
            lock.release()
        if claimed:
            self._loop.cancel(cs)  # pyright: ignore[reportArgumentType] (claimed: bound)
        elif cs is not None and not on_loop:
            self._call_on_loop(lambda: self._hand_over(cs, cancel))
        waiter = self._waiter
        if waiter is not None:
            self._call_on_loop(waiter.set)

    # -- the consumer, in its one task -------------------------------------------------

    def drain(self) -> list[ChannelItem]:
        """Take every queued item, oldest first. Never blocks.

        Taking a :class:`Cancel` here is the boundary honouring it: ``turn_state``
        becomes ``cancelled`` and :class:`TurnCancelled` is published (after
        :class:`ItemsDrained`), so the consumer stops as if a scope had been stopped.
        Inside a bound :meth:`scope` a drain takes the other items and leaves a Cancel to
        the scope, which it stops: there the interrupt always arrives as
        :class:`AgentInterrupted`, once.
        """
        if self._owner is not self._task():
            self._claim()
        if not self._queue:
            return []
        cs = self._cs  # set and cleared by this task only
        if cs is None:
            items, cancels = self._take()
        else:
            items, cancels = self._take_in_scope(cs), 0
        if not items:  # withdrawn meanwhile
            return items
        if self._subscribers:
            self._drained(items)
        if cancels:
            self._turn_cancelled(next(i for i in reversed(items) if isinstance(i, Cancel)))
        return items

    async def receive(self, *, awaiting: StopReason | None = None) -> list[ChannelItem]:
        """Wait until an item other than a Cancel is queued, then take every queued item.

        This is the parked wait: there is no turn to stop, so a :class:`Cancel` that
        arrives meanwhile is dropped (it does not end the wait and is never returned).
        ``awaiting`` says why the consumer parks, for a watcher joining meanwhile
        (:attr:`ExecutionSnapshot.awaiting`).
        """
        if self._owner is not self._task():
            self._claim()
        if awaiting is not None:
            self._awaiting = awaiting
        while True:
            if len(self._queue) == self._cancels:  # nothing but Cancels (or nothing)
                waiter = self._waiter = anyio.Event()
                try:
                    if len(self._queue) == self._cancels:  # posted before the waiter was visible
                        await waiter.wait()
                finally:
                    self._waiter = None
            items, cancels = self._take()
            if cancels:
                items = [i for i in items if not isinstance(i, Cancel)]
            if items:
                self._awaiting = None
                if self._subscribers:
                    self._drained(items)
                return items

    def scope(self) -> Self | NullScope:
        """An interruptible region: ``with channel.scope(): ...``.

        Raises :class:`AgentInterrupted` on exit when, and only when, this
        channel's :meth:`interrupt` cancelled it. A scope entered while nobody
        holds a ref is a no-op: a ref taken during it cannot stop it, and that
        interrupt is delivered at the next boundary instead. (The bound scope is the
        channel itself: one per channel at a time, so it costs no object per turn.)
        """
        if self._owner is not self._task():
            self._claim()
        if not self._reachable and not self._cancels:
            return NULL_SCOPE
        return self

    def __enter__(self) -> None:
        if self._cs is not None:
            raise RuntimeError("a scope of this channel is already active; use one per region")
        # Bind first, then look for a queued stop: an interrupt() racing in from another
        # thread queues its Cancel before it reads the binding, so one of the two sees it.
        cs = self._cs = self._loop.cancel_scope()
        if self._cancels:
            pending = self._take_cancel()
            if pending is not None:  # a stop that arrived since the last boundary
                self._cs = None
                self._turn_cancelled(pending)
                raise AgentInterrupted(pending)
        cs.__enter__()
        self.turn_state = "started"
        if self._subscribers:
            self.publish(turn_started())

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        cs = self._cs
        assert cs is not None, "the scope was not entered"
        self._cs = None
        suppressed = cs.__exit__(exc_type, exc, tb)
        cancel = self._claimed
        if cancel is not None and cs.cancelled_caught:
            # Still claimed until taken, so no withdraw can report it taken back while
            # this exception delivers it; taken, no drain delivers it again.
            self._take_cancel(cancel)
            self._claimed = None
            self._turn_cancelled(cancel)
            raise AgentInterrupted(cancel) from None
        self._claimed = None  # not delivered: queued for the next boundary, withdrawable again
        self.turn_state = "ended"
        if self._subscribers:
            self.publish(ended_by(None if suppressed else exc))
        return bool(suppressed)

    @property
    def observed(self) -> bool:
        """True when someone subscribed: build events only then."""
        return bool(self._subscribers)

    def publish(self, event: ExecutionEvent) -> None:
        """Hand ``event`` to every subscriber. A failing subscriber is logged, not raised."""
        self._seq += 1
        for callback in self._subscribers:
            try:
                callback(event)
            except Exception:
                import logging  # imported when first needed

                logging.getLogger("agent_channel").exception("event subscriber %r failed", callback)

    # -- internals ---------------------------------------------------------------------

    def _drained(self, items: list[ChannelItem]) -> None:
        self.publish(items_drained(items))

    def _turn_cancelled(self, cancel: Cancel) -> None:
        self.turn_state = "cancelled"
        if self._subscribers:
            from ._events import TurnCancelled

            self.publish(TurnCancelled(cancel=cancel))

    def _take(self) -> tuple[list[ChannelItem], int]:
        """Every queued item and how many of them are Cancels, atomically."""
        lock = self._lock
        lock.acquire()
        try:
            q = self._queue
            items = [q.popleft()] if len(q) == 1 else list(q)
            q.clear()
            cancels, self._cancels = self._cancels, 0
            if self._journal is not None:
                self._taken.extend(i.id for i in items if not isa(Cancel, i))
        finally:
            lock.release()
        return items, cancels

    def _take_in_scope(self, cs: CancelScopeLike) -> list[ChannelItem]:
        """Every queued item but the Cancels, which stay queued for the bound scope ``cs``.

        The oldest becomes the scope's if none is yet, and stops it: whichever runs first,
        this drain or the hand-over of an interrupt from another thread, the Cancel is
        delivered once, by the scope's exception (never also by this drain).
        """
        lock = self._lock
        lock.acquire()
        try:
            q = self._queue
            if not self._cancels:  # decided under the lock: a thread may be queueing one
                items = [q.popleft()] if len(q) == 1 else list(q)
                q.clear()
                if self._journal is not None:
                    self._taken.extend(i.id for i in items)
                return items
            items = [i for i in q if not isa(Cancel, i)]
            kept = [i for i in q if isa(Cancel, i)]
            q.clear()
            q.extend(kept)
            if self._journal is not None:
                self._taken.extend(i.id for i in items)
            claimed = bool(kept) and self._claim_for(cs, kept[0])  # pyright: ignore[reportArgumentType]
        finally:
            lock.release()
        if claimed:
            self._loop.cancel(cs)
        return items

    def _take_cancel(self, cancel: Cancel | None = None) -> Cancel | None:
        """Remove ``cancel`` (or else the oldest queued Cancel) from the queue."""
        lock = self._lock
        lock.acquire()
        try:
            for i, item in enumerate(self._queue):
                if (item is cancel) if cancel is not None else isinstance(item, Cancel):
                    del self._queue[i]
                    self._cancels -= 1
                    return item  # pyright: ignore[reportReturnType] (it is that Cancel)
        finally:
            lock.release()
        return None

    def _claim_for(self, cs: CancelScopeLike, cancel: Cancel) -> bool:
        """Under the lock, on the loop: make ``cancel`` the one stopping the bound scope
        ``cs`` (``False`` if ``cs`` is no longer bound, or has its Cancel already)."""
        if self._cs is not cs or self._claimed is not None:
            return False
        self._claimed = cancel
        return True

    def _hand_over(self, cs: CancelScopeLike, cancel: Cancel) -> None:
        # Runs on the consumer's loop, handed over from another thread. A scope that has
        # exited since ignores it: the Cancel stays queued and is delivered at the next
        # boundary. One withdrawn before this ran stops nothing; once this ran it can no
        # longer be withdrawn.
        lock = self._lock
        lock.acquire()
        try:
            claimed = any(item is cancel for item in self._queue) and self._claim_for(cs, cancel)
        finally:
            lock.release()
        if claimed:
            # Directly, not from a loop callback: a callback runs a loop step later, and
            # the consumer may leave the scope at the checkpoint it is resuming from instead
            # of being stopped there. The loop's cancel skips anyio naming the calling task.
            self._loop.cancel(cs)

    def _claim(self) -> None:
        task = self._task()
        if self._owner is None:
            self._owner = task
            return
        raise NotOwner(
            "only the task that consumes this channel may drain it, wait on it or enter its "
            f"scope: it belongs to {_task_name(self._owner)}, not {_task_name(task)}"
        )

    def _call_on_loop(self, fn: Callable[[], object]) -> None:
        if threading.get_ident() == self._thread:
            fn()
            return
        with contextlib.suppress(RuntimeError):  # the loop finished: nothing left to wake or stop
            self._loop.call_soon_threadsafe(fn)

    def _close(self, error: BaseException | None) -> None:
        with self._lock:
            self._closed = True
            undelivered = tuple(self._queue)
            self._queue.clear()
            self._cancels = 0
        cancelled = isinstance(error, anyio.get_cancelled_exc_class())
        if cancelled and self.stop_reason is None:
            self.stop_reason = "cancelled"
        message = None if error is None or self.stop_reason == "cancelled" else describe(error)
        journal = self._journal
        if journal is not None and not cancelled:
            journal.finish("ended", self.stop_reason, message)
        if self._subscribers:
            from ._events import ExecutionFinished

            self.publish(
                ExecutionFinished(
                    stop_reason=self.stop_reason, undelivered=undelivered, error=message
                )
            )
        self._subscribers = ()


def kind_of(value: object) -> str:
    return f"{type(value).__name__} {value!r}"[:80]


def _task_name(task: object) -> str:
    name = getattr(task, "get_name", None)
    name = name() if callable(name) else getattr(task, "name", None)
    return f"task {name!r}" if isinstance(name, str) else "another task"
