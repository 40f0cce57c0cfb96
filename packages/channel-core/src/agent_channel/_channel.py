# pyright: reportPrivateUsage=false
# (the scope, the ref and the channel are one unit split for their different audiences)
"""The channel: one per execution, many producers, one consumer.

Hot paths are written for their cost: ``post`` is an append and a check,
``drain`` a length test when nothing is queued, and ``scope`` on a channel
nobody holds a ref to is a shared no-op (no producer exists who could
interrupt it, so no cancel scope is needed).
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from types import TracebackType
from typing import TYPE_CHECKING, Literal

import anyio

from ._errors import AgentInterrupted, ChannelClosed, ChannelFull, NotOwner, describe
from ._items import Cancel, ChannelItem
from ._loop import LoopHandle
from ._regions import NullRegion, Region
from ._snapshot import ExecutionSnapshot

if TYPE_CHECKING:  # the event models are imported where the first event is built
    from ._events import ExecutionEvent, StopReason, TurnEnded, TurnStarted, TurnState
    from ._messages import ChatMessage, ToolCall
    from ._questions import Resolver
    from ._store import Journal, JsonObject, Restored
    from ._supervisor import ChildControl, Supervisor

_isa = type.__instancecheck__
"""``isinstance`` for the hot paths: a pydantic class's own goes through the (slower) ABC check."""

MAX_QUEUED = 10_000
"""Undrained items a channel holds (Cancels counted apart) unless ``open_channel`` says
otherwise: past it ``post`` raises :class:`ChannelFull` and an interrupt adds nothing."""

# Field-less events are immutable: one shared instance each, built when first published.
_turn_started_event: TurnStarted | None = None
_turn_ended_event: TurnEnded | None = None
_turn_cancelled_event: TurnEnded | None = None  # TurnEnded(error="cancelled")


def _turn_started() -> TurnStarted:
    global _turn_started_event
    from ._events import TurnStarted

    _turn_started_event = TurnStarted()
    return _turn_started_event


def _turn_ended() -> TurnEnded:
    global _turn_ended_event
    from ._events import TurnEnded

    _turn_ended_event = TurnEnded()
    return _turn_ended_event


Subscriber = Callable[["ExecutionEvent"], None]
"""An event callback. It runs synchronously in the consumer's task: keep it quick."""

Approver = Callable[["ToolCall"], Awaitable[bool]]
"""Decides whether a tool call may run: given by whoever opens the channel, or routed
by a producer (:meth:`AgentRef.route_approvals`)."""


class AgentChannel:
    """The consumer's side of one execution's channel.

    Get the current one with :func:`agent_channel`; a runtime creates one per
    execution with :func:`open_channel`. Producers never hold this object:
    they hold the :class:`AgentRef` that :meth:`ref` returns.
    """

    __slots__ = (
        "__weakref__",
        "_approver",
        "_awaiting",
        "_cancels",
        "_claimed",
        "_closed",
        "_committed",
        "_journal",
        "_live",
        "_lock",
        "_loop",
        "_max_queued",
        "_owner",
        "_queue",
        "_reachable",
        "_regions",
        "_routed",
        "_scope",
        "_seq",
        "_shared",
        "_subscribers",
        "_supervisor",
        "_taken",
        "_task",
        "_thread",
        "_waiter",
        "stop_reason",
        "turn_state",
    )

    def __init__(self, *, approver: Approver | None = None, max_queued: int = MAX_QUEUED) -> None:
        if type(max_queued) is not int or max_queued < 1:
            raise ValueError(f"max_queued must be an int of at least 1, not {max_queued!r}")
        self._init(approver, max_queued, LoopHandle())

    @classmethod
    def _on_loop(cls, loop: LoopHandle) -> AgentChannel:
        """A channel on a loop another channel captured already (a child's, on its parent's
        loop): capturing it again costs more than the rest of the channel."""
        channel = cls.__new__(cls)
        channel._init(None, MAX_QUEUED, loop)
        return channel

    def _init(self, approver: Approver | None, max_queued: int, loop: LoopHandle) -> None:
        self._max_queued = max_queued
        self._queue: deque[ChannelItem] = deque()
        self._lock = threading.Lock()  # every change to the queue, so withdraw/close are atomic
        self._cancels = 0  # Cancels in the queue (changed under the lock)
        self._claimed: Cancel | None = None  # the Cancel stopping the bound scope: not withdrawable
        self._scope: _Scope | None = None
        self._reachable = False
        self._subscribers: tuple[Subscriber, ...] = ()
        self._waiter: anyio.Event | None = None
        self._owner: object | None = None
        self._closed = False
        self._live = 0
        self._loop = loop
        self._task = loop.current_task
        self._thread = threading.get_ident()
        self._approver = approver
        self._routed: tuple[Approver, ...] = ()
        self._regions: dict[str, Region] = {}
        self._shared: list[ChatMessage] | None = None
        self._seq = 0  # events published
        self._supervisor: Supervisor | None = None  # set by open_supervisor() for its lifetime
        self._journal: Journal | None = None  # set by open_channel(journal=...)
        self._taken: list[str] = []  # ids drained since the last checkpoint (with a journal)
        self._committed = 0  # messages of the shared conversation the journal has
        self.stop_reason: StopReason | None = None
        """The consumer's last word on why it stopped; reported in :class:`ExecutionFinished`."""
        self.turn_state: TurnState = "idle"
        """The last scope transition."""
        self._awaiting: StopReason | None = None  # parked by wait_for_message, and why

    # -- producer side (reached through AgentRef) -------------------------------------

    def post(self, item: ChannelItem) -> None:
        """Queue ``item`` for the consumer's next :meth:`drain`. Safe from any thread.

        Raises :class:`ChannelClosed` once the execution finished: an item is either
        refused here or reaches the consumer or ``ExecutionFinished.undelivered``. Raises
        :class:`ChannelFull` while ``max_queued`` items wait undrained (a Cancel past that
        many waiting Cancels is dropped instead: those already stop the turn).
        """
        if not _isa(ChannelItem, item):
            raise TypeError(f"post() takes a ChannelItem such as UserMessage, not {_kind(item)}")
        lock = self._lock
        lock.acquire()  # not `with`: measurably slower on this path
        try:
            if self._closed:
                raise ChannelClosed(f"execution finished; {item.type} {item.id} not delivered")
            if _isa(Cancel, item):
                if self._cancels >= self._max_queued:
                    return
                self._cancels += 1
            elif len(self._queue) - self._cancels >= self._max_queued:
                raise ChannelFull(
                    f"{self._max_queued} items already wait undrained (the channel's limit); "
                    f"{item.type} {item.id} not queued"
                )
            elif self._journal is not None:  # written before it is queued (write-ahead)
                self._journal.posted(item)
            self._queue.append(item)
        finally:
            lock.release()
        waiter = self._waiter
        if waiter is not None:
            self._call_on_loop(waiter.set)

    def interrupt(self, cancel: Cancel | None = None) -> None:
        """Queue ``cancel`` and stop the bound scope, if any. Safe from any thread.

        With no scope bound the cancel waits: the next :meth:`scope` entered raises at
        once, unless a :meth:`drain` takes it first. On a finished execution there is
        nothing to stop and it does nothing; with ``max_queued`` Cancels already waiting,
        neither (they stop the turn).
        """
        if cancel is None:
            cancel = Cancel()
        elif not _isa(Cancel, cancel):
            raise TypeError(f"interrupt() takes a Cancel (or nothing), not {_kind(cancel)}")
        on_loop = threading.get_ident() == self._thread
        lock = self._lock
        lock.acquire()
        try:
            if self._closed or self._cancels >= self._max_queued:
                return
            self._queue.append(cancel)
            self._cancels += 1
            scope = self._scope
            # On the loop's thread the bound scope cannot change meanwhile, so claim the
            # Cancel for it right here, where no withdraw can take it in between.
            claimed = on_loop and scope is not None and scope._claim(cancel)
        finally:
            lock.release()
        if claimed:
            scope._stop()  # pyright: ignore[reportOptionalMemberAccess]
        elif scope is not None and not on_loop:
            self._call_on_loop(lambda: scope.interrupt(cancel))
        waiter = self._waiter
        if waiter is not None:
            self._call_on_loop(waiter.set)

    def withdraw(self, item_id: str) -> bool:
        """Take back a queued item no drain has taken yet; ``True`` if it was still queued.

        Atomic with :meth:`drain`: the item is either withdrawn or delivered, never both.
        Safe from any thread.
        """
        if not isinstance(item_id, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"withdraw() takes an item id (str), not {_kind(item_id)}")
        with self._lock:
            q = self._queue
            for i, item in enumerate(q):
                if item.id == item_id and item is not self._claimed:
                    # Count first: receive() reads the two without the lock, and must never
                    # see "only Cancels queued" while a message waits (it would park on it).
                    if isinstance(item, Cancel):
                        self._cancels -= 1
                    elif self._journal is not None:
                        self._journal.withdrawn(item_id)
                    del q[i]
                    return True
        return False

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

    @property
    def approver(self) -> Approver | None:
        """Asked before each tool call when set: the one a producer routes here last, else
        the opener's (see :data:`Approver`). Read it at each call: it can change."""
        routed = self._routed
        return routed[-1] if routed else self._approver

    @approver.setter
    def approver(self, approver: Approver | None) -> None:
        self._approver = approver

    # -- consumer side -----------------------------------------------------------------

    def share(self, messages: list[ChatMessage]) -> None:
        """Make ``messages`` the conversation producers read (:meth:`AgentRef.messages`).

        Pass the loop's own list and keep changing that list in place; append a message
        and publish its :class:`MessageAppended` with no ``await`` between, so
        :meth:`AgentRef.watch` sees each message exactly once. One list per channel:
        a nested execution has a channel of its own, and a fork of the conversation
        cannot take the top-level one's place (another list raises ``RuntimeError``).
        """
        if self._shared is None:
            self._shared = messages
        elif self._shared is not messages:
            raise RuntimeError("this channel already shares a conversation; it shares one only")

    def region(self, key: str) -> Region | NullRegion:
        """A region a producer can stop alone: ``with channel.region(key) as r: ...``.

        :meth:`AgentRef.cancel_region` with the same key stops the body and nothing
        else: the cancellation ends at the ``with``, and ``r.cancelled`` says it
        happened. While nobody holds a ref the region is a shared-cost no-op, as
        :meth:`scope` is. Two active regions may not share a key (``ValueError``).
        """
        if not isinstance(key, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"region() takes a key (str), not {_kind(key)}")
        if not self._reachable:
            return NullRegion(key)
        return Region(self, key)

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
        scope = self._scope  # set and cleared by this task only
        if scope is None:
            items, cancels = self._take()
        else:
            items, cancels = self._take_in_scope(scope), 0
        if not items:  # withdrawn meanwhile
            return items
        if self._subscribers:
            from ._events import ItemsDrained

            self.publish(ItemsDrained(items=tuple(items)))
        if cancels:
            self._turn_cancelled(next(i for i in reversed(items) if isinstance(i, Cancel)))
        return items

    async def receive(self) -> list[ChannelItem]:
        """Wait until an item other than a Cancel is queued, then take every queued item.

        This is the parked wait: there is no turn to stop, so a :class:`Cancel` that
        arrives meanwhile is dropped (it does not end the wait and is never returned).
        """
        if self._owner is not self._task():
            self._claim()
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
                    from ._events import ItemsDrained

                    self.publish(ItemsDrained(items=tuple(items)))
                return items

    def scope(self) -> _Scope | _NullScope:
        """An interruptible region: ``with channel.scope(): ...``.

        Raises :class:`AgentInterrupted` on exit when, and only when, this
        channel's :meth:`interrupt` cancelled it. A scope entered while nobody
        holds a ref is a no-op: a ref taken during it cannot stop it, and that
        interrupt is delivered at the next boundary instead.
        """
        if self._owner is not self._task():
            self._claim()
        if not self._reachable and not self._cancels:
            return _NULL_SCOPE
        return _Scope(self)

    @property
    def durable(self) -> bool:
        """True when the execution writes to a store (``open_channel(journal=...)``): a
        consumer builds the state it passes to :meth:`checkpoint` only then."""
        return self._journal is not None

    @property
    def restored(self) -> Restored | None:
        """What this execution had when its process ended, if it was opened again from a
        store (``open_channel(journal=...)``): its conversation and the state its consumer
        last passed to :meth:`checkpoint`. A consumer that can go on starts from them; one
        that does not look starts over (its first checkpoint rewrites the conversation).
        The items it had queued are queued again already."""
        journal = self._journal
        return None if journal is None else journal.restored()

    def checkpoint(self, state: JsonObject | None = None) -> None:
        """A boundary: write down what a restart needs to go on from here, in one go.

        The messages the shared conversation gained since the last checkpoint, the items
        drained since then (so each is delivered exactly once across a crash: call this
        after appending what they folded into), ``state`` (plain JSON: what the consumer
        needs to go on, e.g. turns taken) and the children registry. Without a journal it
        does nothing. The shared conversation must only grow (:meth:`share`). The ids of
        drained items are kept until this call takes them: a durable consumer checkpoints
        at each boundary, so they are bounded by what one boundary drains.
        """
        journal = self._journal
        if journal is None:
            return
        if self._owner is not self._task():
            self._claim()
        shared = self._shared if self._shared is not None else []
        start = self._committed
        if start < 0:  # the first checkpoint after a restore: did the consumer adopt it?
            start = -start if _adopted(shared, journal.restored()) else 0
        elif start > len(shared):
            start = 0  # not the conversation written so far: write it whole
        with self._lock:
            taken, self._taken = self._taken, []
        sup = self._supervisor
        if sup is None:
            journal.commit(shared[start:], taken, state, start=start)
        else:
            from ._codec import children_json

            sections = {"children": children_json(sup.children())}
            journal.commit(shared[start:], taken, state, start=start, sections=sections)
        self._committed = len(shared)

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
                self._taken.extend(i.id for i in items if not _isa(Cancel, i))
        finally:
            lock.release()
        return items, cancels

    def _take_in_scope(self, scope: _Scope) -> list[ChannelItem]:
        """Every queued item but the Cancels, which stay queued for the bound ``scope``.

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
            items = [i for i in q if not _isa(Cancel, i)]
            kept = [i for i in q if _isa(Cancel, i)]
            q.clear()
            q.extend(kept)
            if self._journal is not None:
                self._taken.extend(i.id for i in items)
            claimed = bool(kept) and scope._claim(kept[0])  # pyright: ignore[reportArgumentType]
        finally:
            lock.release()
        if claimed:
            scope._stop()
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

    def _subscribe(self, callback: Subscriber) -> Callable[[], None]:
        self._subscribers = (*self._subscribers, callback)

        def unsubscribe() -> None:
            self._subscribers = tuple(s for s in self._subscribers if s is not callback)

        return unsubscribe

    def _watch(self, callback: Subscriber) -> tuple[ExecutionSnapshot, Callable[[], None]]:
        if threading.get_ident() == self._thread:
            return self._watch_here(callback)
        # Another thread: run it on the consumer's loop, between two of its steps, so no
        # message or event can fall between the snapshot and the subscription.
        done = threading.Event()
        taken = threading.Lock()  # whoever takes it (the loop, or this thread) watches
        box: list[tuple[ExecutionSnapshot, Callable[[], None]]] = []

        def run() -> None:
            if taken.acquire(blocking=False):
                box.append(self._watch_here(callback))
                done.set()

        try:
            self._loop.call_soon_threadsafe(run)
        except RuntimeError:  # the loop is gone, so the execution is over: nothing can race
            run()
        while not done.wait(0.05):
            if self._closed:  # over: the state is final, and the loop may never run us
                run()
        return box[0]

    def _watch_here(self, callback: Subscriber) -> tuple[ExecutionSnapshot, Callable[[], None]]:
        shared = self._shared
        with self._lock:
            queued = tuple(i for i in self._queue if not _isa(Cancel, i))
        snapshot = ExecutionSnapshot(
            messages=tuple(shared) if shared else (),
            turn_state=self.turn_state,
            seq=self._seq,
            closed=self._closed,
            queued=queued,
            awaiting=self._awaiting,
        )
        if self._closed:
            return snapshot, _nothing
        return snapshot, self._subscribe(callback)

    def _cancel_region(self, key: str) -> bool:
        if not isinstance(key, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"cancel_region() takes a key (str), not {_kind(key)}")
        with self._lock:
            region = self._regions.get(key)
            if region is None or region.cancelled:
                return False
            region.cancelled = True
        self._call_on_loop(region._stop)
        return True

    def _post_unbounded(self, item: ChannelItem) -> None:
        """:meth:`post` past ``max_queued``: for items bounded elsewhere (one Announce per
        child, and a supervisor has at most ``max_total`` children), which must not be lost."""
        with self._lock:
            if self._closed:
                raise ChannelClosed(f"execution finished; {item.type} {item.id} not delivered")
            if self._journal is not None:
                self._journal.posted(item)
            self._queue.append(item)
        waiter = self._waiter
        if waiter is not None:
            self._call_on_loop(waiter.set)

    def _route_approvals(self, approver: Approver) -> Callable[[], None]:
        if not callable(approver):
            raise TypeError(f"route_approvals() takes an async callable, not {_kind(approver)}")
        with self._lock:
            self._routed = (*self._routed, approver)
        released = False

        def release() -> None:
            nonlocal released
            with self._lock:
                if released:
                    return
                released = True
                routed = list(self._routed)
                del routed[len(routed) - 1 - routed[::-1].index(approver)]
                self._routed = tuple(routed)

        return release

    def _close(self, error: BaseException | None) -> None:
        with self._lock:
            self._closed = True
            undelivered = tuple(self._queue)
            self._queue.clear()
            self._cancels = 0
        if isinstance(error, anyio.get_cancelled_exc_class()) and self.stop_reason is None:
            self.stop_reason = "cancelled"
        message = None if error is None or self.stop_reason == "cancelled" else describe(error)
        journal = self._journal
        if journal is not None and not isinstance(error, anyio.get_cancelled_exc_class()):
            journal.finish("ended", self.stop_reason, message)
        if self._subscribers:
            from ._events import ExecutionFinished

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
        # Runs on the consumer's loop, handed over from another thread. A scope that has
        # already exited ignores it: the Cancel stays queued and is delivered at the next
        # boundary. One withdrawn before this ran stops nothing; once this ran it can no
        # longer be withdrawn.
        ch = self._channel
        lock = ch._lock
        lock.acquire()
        try:
            claimed = any(item is cancel for item in ch._queue) and self._claim(cancel)
        finally:
            lock.release()
        if claimed:
            self._stop()

    def _claim(self, cancel: Cancel) -> bool:
        """Under the channel's lock, on the loop: make ``cancel`` the one stopping this scope."""
        ch = self._channel
        if ch._scope is not self or self._interrupt is not None:
            return False
        ch._claimed = self._interrupt = cancel
        return True

    def _stop(self) -> None:
        # Directly, not from a loop callback: a callback runs a loop step later, and the
        # consumer may leave the scope at the checkpoint it is resuming from instead of
        # being stopped there. The loop's cancel skips anyio naming the calling task.
        self._channel._loop.cancel(self._cs)

    def __enter__(self) -> None:
        ch = self._channel
        if ch._scope is not None:
            raise RuntimeError("a scope of this channel is already active; use one per region")
        # Bind first, then look for a queued stop: an interrupt() racing in from another
        # thread queues its Cancel before it reads the binding, so one of the two sees it.
        ch._scope = self
        if ch._cancels:
            pending = ch._take_cancel()
            if pending is not None:  # a stop that arrived since the last boundary
                ch._scope = None
                ch._turn_cancelled(pending)
                raise AgentInterrupted(pending)
        self._cs.__enter__()
        ch.turn_state = "started"
        if ch._subscribers:
            ch.publish(_turn_started_event or _turn_started())

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
            # Still claimed until taken, so no withdraw can report it taken back while
            # this exception delivers it; taken, no drain delivers it again.
            ch._take_cancel(cancel)
            ch._claimed = None
            ch._turn_cancelled(cancel)
            raise AgentInterrupted(cancel) from None
        ch._claimed = None  # not delivered: queued for the next boundary, withdrawable again
        ch.turn_state = "ended"
        if ch._subscribers:
            ch.publish(
                (_turn_ended_event or _turn_ended())
                if exc is None or suppressed
                else _ended_by(exc)
            )
        return bool(suppressed)


def _report_failure(channel: AgentChannel, journal: Journal) -> None:
    """D7: a store that stops taking writes is published (once), on the channel's loop."""
    before = journal.on_failure

    def failed(reason: str) -> None:
        if before is not None:
            before(reason)
        from ._events import StoreFailed

        event = StoreFailed(reason=reason)
        channel._call_on_loop(lambda: channel.publish(event))

    journal.on_failure = failed


def _announce_lost(channel: AgentChannel, journal: Journal, restored: Restored) -> None:
    """D6: children running when the process died cannot go on; their parent hears so.

    A child whose end was announced after the last checkpoint keeps that announcement,
    but "its parent ended" (what a server shutting down tells) becomes "lost". The
    announcements are written (as any post is) before the registry is cleared, so a
    second crash in between announces a child twice rather than never.
    """
    from ._items import Announce

    running = {c.id: c for c in restored.children if c.status != "ended"}
    if not running:
        return
    queue = channel._queue
    for item in list(queue):
        if isinstance(item, Announce) and item.child_id in running:
            if item.status == "parent_ended":
                queue.remove(item)
                journal.withdrawn(item.id)
            else:
                del running[item.child_id]
    for c in running.values():
        lost = Announce(child_id=c.id, name=c.name, status="lost", reason="its server restarted")
        journal.posted(lost)
        queue.append(lost)
    journal.commit((), (), None, start=len(restored.messages), sections={"children": "[]"})


def _adopted(shared: list[ChatMessage], restored: Restored | None) -> bool:
    """True when ``shared`` starts with the restored conversation (the consumer went on)."""
    old = restored.messages if restored is not None else ()
    return len(shared) >= len(old) and all(a.id == b.id for a, b in zip(shared, old, strict=False))


def _ended_by(exc: BaseException) -> TurnEnded:
    global _turn_cancelled_event
    from ._events import TurnEnded

    if isinstance(exc, anyio.get_cancelled_exc_class()):
        if _turn_cancelled_event is None:  # immutable, so shared, as TurnEnded() is
            _turn_cancelled_event = TurnEnded(error="cancelled")
        return _turn_cancelled_event
    return TurnEnded(error=describe(exc))


def _nothing() -> None:
    return None


def _kind(value: object) -> str:
    return f"{type(value).__name__} {value!r}"[:80]


def _task_name(task: object) -> str:
    name = getattr(task, "get_name", None)
    name = name() if callable(name) else getattr(task, "name", None)
    return f"task {name!r}" if isinstance(name, str) else "another task"


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

    __slots__ = ("_channel",)

    def __init__(self, channel: AgentChannel) -> None:
        self._channel = channel

    def post(self, item: ChannelItem) -> None:
        """Queue a cooperative item for the consumer's next boundary.

        Raises :class:`ChannelClosed` once the execution finished, :class:`ChannelFull`
        while the channel's limit of undrained items waits, and :class:`TypeError` for
        anything but a :class:`ChannelItem`.
        """
        self._channel.post(item)

    def interrupt(self, cancel: Cancel | None = None) -> None:
        """Stop the work in progress; between regions, stop the next one as it starts.

        Raises :class:`TypeError` for anything but a :class:`Cancel`.
        """
        self._channel.interrupt(cancel)

    def withdraw(self, item_id: str) -> bool:
        """Take back a queued item no boundary has taken yet; ``True`` if it was withdrawn."""
        return self._channel.withdraw(item_id)

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback`` with every event from now on; returns an unsubscribe function."""
        return self._channel._subscribe(callback)

    def watch(self, callback: Subscriber) -> tuple[ExecutionSnapshot, Callable[[], None]]:
        """The execution's state now, and ``callback`` for every event after it.

        Atomic: no event is missed and none the snapshot reflects comes again, so a
        producer that joins late (an operator attaching) can rebuild the whole picture.
        On the execution's own thread it returns at once; from another thread it runs
        on the execution's loop and blocks this thread until then. Also returns the
        unsubscribe function.
        """
        return self._channel._watch(callback)

    def messages(self) -> tuple[ChatMessage, ...]:
        """The conversation the consumer shares, as of now (``()`` if it shares none).

        Safe from any thread. Always the top-level loop's own conversation: nested
        executions have channels of their own.
        """
        shared = self._channel._shared
        # Slice first: tuple(list) reads the item array before allocating, and a GC run
        # in that allocation can let the loop's thread append (and move the array).
        # A slice allocates first, then reads; the list only grows, so it is a prefix.
        return tuple(shared[:]) if shared else ()

    def cancel_region(self, key: str) -> bool:
        """Stop the consumer's active region ``key`` alone (see :meth:`AgentChannel.region`).

        ``True`` if one was active and not stopped already; the consumer then treats it
        as stopped. Safe from any thread.
        """
        return self._channel._cancel_region(key)

    def route_approvals(self, approver: Approver) -> Callable[[], None]:
        """Answer this execution's approval requests with ``approver`` until released.

        For a producer that did not open the execution and decides who answers (an
        attach server picks a client). The last one routed wins; the returned release
        restores the one before.
        """
        return self._channel._route_approvals(approver)

    def route_questions(self, resolver: Resolver) -> Callable[[], None]:
        """Answer the questions of this execution and of its children with ``resolver``
        until released (see :func:`ask_user`). The last one routed wins; the returned
        release restores the one before."""
        from ._questions import route

        return route(self._channel, resolver)

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
    def children(self) -> ChildControl:
        """The execution's children, for an operator: list, read, steer, stop (by id).

        Goes through the execution's supervisor (``open_supervisor``); a producer never
        gets a child's ref. Safe from any thread.
        """
        from ._supervisor import ChildControl

        return ChildControl(self._channel)

    @property
    def closed(self) -> bool:
        """True once the execution has finished."""
        return self._channel._closed


class _InertChannel(AgentChannel):
    """What :func:`agent_channel` returns outside any execution: accepts and ignores.

    One instance serves every caller in the process, so nothing may stick to it:
    every attribute a caller could change reads back as its default.
    """

    __slots__ = ()

    def __init__(self) -> None:  # no loop needed: nothing ever waits or wakes
        self._queue = deque()
        self._lock = threading.Lock()
        self._subscribers = ()
        self._waiter = None
        self._owner = None
        self._closed = False

    approver = property(lambda self: None, lambda self, value: None)  # type: ignore[assignment]
    _shared = property(lambda self: None, lambda self, value: None)  # type: ignore[assignment]
    _seq = property(lambda self: 0, lambda self, value: None)  # type: ignore[assignment]
    stop_reason = property(lambda self: None, lambda self, value: None)  # type: ignore[assignment]
    turn_state = property(lambda self: "idle", lambda self, value: None)  # type: ignore[assignment]
    _live = property(lambda self: 0, lambda self, value: None)  # type: ignore[assignment]
    _reachable = property(lambda self: False, lambda self, value: None)  # type: ignore[assignment]
    _cancels = property(lambda self: 0, lambda self, value: None)  # type: ignore[assignment]
    _scope = property(lambda self: None, lambda self, value: None)  # type: ignore[assignment]
    _claimed = property(lambda self: None, lambda self, value: None)  # type: ignore[assignment]
    _supervisor = property(lambda self: None, lambda self, value: None)  # type: ignore[assignment]
    _journal = property(lambda self: None, lambda self, value: None)  # type: ignore[assignment]

    def post(self, item: ChannelItem) -> None:
        if not isinstance(item, ChannelItem):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"post() takes a ChannelItem such as UserMessage, not {_kind(item)}")

    def interrupt(self, cancel: Cancel | None = None) -> None:
        if cancel is not None and not isinstance(cancel, Cancel):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"interrupt() takes a Cancel (or nothing), not {_kind(cancel)}")

    def withdraw(self, item_id: str) -> bool:
        return False

    def drain(self) -> list[ChannelItem]:
        return []

    async def receive(self) -> list[ChannelItem]:
        raise RuntimeError("no execution is open here: nothing can ever arrive on this channel")

    def scope(self) -> _NullScope:
        return _NULL_SCOPE

    def share(self, messages: list[ChatMessage]) -> None:
        return None

    def region(self, key: str) -> NullRegion:
        return NullRegion(key)

    def publish(self, event: ExecutionEvent) -> None:
        return None

    def _subscribe(self, callback: Subscriber) -> Callable[[], None]:
        return _nothing

    def _watch(self, callback: Subscriber) -> tuple[ExecutionSnapshot, Callable[[], None]]:
        return ExecutionSnapshot(messages=(), turn_state="idle", seq=0, closed=False), _nothing

    def _cancel_region(self, key: str) -> bool:
        return False

    def _route_approvals(self, approver: Approver) -> Callable[[], None]:
        return _nothing


_INERT = _InertChannel()
_current: ContextVar[AgentChannel] = ContextVar("agent_channel", default=_INERT)


def agent_channel() -> AgentChannel:
    """The current execution's channel; an inert one outside any execution."""
    return _current.get()


@asynccontextmanager
async def open_channel(
    *,
    approver: Approver | None = None,
    max_queued: int = MAX_QUEUED,
    journal: Journal | None = None,
) -> AsyncGenerator[AgentChannel, None]:
    """Start an execution: a fresh channel, ambient for the block.

    Tasks started inside the block inherit it (contextvars are copied at task
    creation). A runtime that starts a detached child execution calls
    ``open_channel()`` again inside the child's task, so the child gets its own.
    On exit the channel closes and publishes :class:`ExecutionFinished`. At most
    ``max_queued`` items wait undrained (see :meth:`AgentChannel.post`).

    With a ``journal`` (from a :class:`~agent_channel.Store`) the execution is durable:
    what producers post is written before ``post`` returns, each
    :meth:`AgentChannel.checkpoint` commits a boundary, the end is recorded, and a journal
    of an execution whose process died has its queued items queued again here and the
    rest in :attr:`AgentChannel.restored`. An outer cancellation (a server shutting down)
    records no end: the execution is restored when its server starts again.
    """
    channel = AgentChannel(approver=approver, max_queued=max_queued)
    if journal is not None:
        channel._journal = journal
        _report_failure(channel, journal)
        restored = journal.restored()
        if restored is not None:
            channel._queue.extend(restored.pending)
            channel._committed = -len(restored.messages)  # checked at the first checkpoint
            _announce_lost(channel, journal, restored)
    with _Execution(channel):
        yield channel


class _Execution:
    """What :func:`open_channel` does around its block, as a plain context manager: the
    channel ambient inside, closed on the way out (with the error that ended it). A
    supervisor enters one in each child's task, where an async generator would cost more."""

    __slots__ = ("_channel", "_token")

    def __init__(self, channel: AgentChannel) -> None:
        self._channel = channel

    def __enter__(self) -> AgentChannel:
        self._token = _current.set(self._channel)
        return self._channel

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        _current.reset(self._token)
        self._channel._close(exc)
