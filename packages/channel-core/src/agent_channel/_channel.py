"""The channel: one per execution, many producers, one consumer.

:class:`AgentChannel` is the consumer's object: the core's queue and scope
(:class:`~agent_channel._core.ChannelCore`) and what an execution is asked less often than
once a turn: producer handles, subscriptions, regions, the shared conversation, the
approver and durability. What is built on the channel (children, questions, adapters)
keeps its own state in execution variables (``agent_channel.lowlevel``), never in slots
here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from ._core import MAX_QUEUED, ChannelCore, isa, kind_of
from ._errors import ChannelClosed
from ._items import Cancel, ChannelItem
from ._ref import AgentRef
from ._regions import NullRegion, Region
from ._snapshot import ExecutionSnapshot
from ._vars import APPROVALS, SECTIONS

if TYPE_CHECKING:
    from ._abc import Approver, Subscriber
    from ._loop import LoopHandle
    from ._messages import ChatMessage
    from ._store import Journal, JsonObject, Restored


class AgentChannel(ChannelCore):
    """The consumer's side of one execution's channel.

    Get the current one with :func:`agent_channel`; a runtime creates one per
    execution with :func:`open_channel`. Producers never hold this object:
    they hold the :class:`AgentRef` that :meth:`ref` returns.
    """

    __slots__ = ("_approver", "_committed", "_live", "_regions", "_shared", "_vars")

    def __init__(
        self,
        *,
        approver: Approver | None = None,
        max_queued: int = MAX_QUEUED,
        journal: Journal | None = None,
        loop: LoopHandle | None = None,
    ) -> None:
        """See :func:`open_channel`. ``loop``: one another channel captured
        (``lowlevel.loop_of``), for a channel on the same loop: capturing it costs more than
        the rest of a channel."""
        super().__init__(max_queued, loop)
        self._approver = approver
        self._live = 0
        self._regions: dict[str, Region] = {}
        self._shared: list[ChatMessage] | None = None
        self._committed = 0  # messages of the shared conversation the journal has
        self._vars: dict[object, object] = {}  # execution variables (lowlevel.ExecutionVar)
        if journal is not None:
            self._open_journal(journal)

    def withdraw(self, item_id: str) -> bool:
        """Take back a queued item no drain has taken yet; ``True`` if it was still queued.

        Atomic with :meth:`drain`: the item is either withdrawn or delivered, never both.
        Safe from any thread.
        """
        if not isinstance(item_id, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"withdraw() takes an item id (str), not {kind_of(item_id)}")
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

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback`` with every event from now on; returns an unsubscribe function."""
        self._subscribers = (*self._subscribers, callback)

        def unsubscribe() -> None:
            self._subscribers = tuple(s for s in self._subscribers if s is not callback)

        return unsubscribe

    def watch(self, callback: Subscriber) -> tuple[ExecutionSnapshot, Callable[[], None]]:
        """The execution's state now, and ``callback`` for every event after it (see
        :meth:`AgentRef.watch`); also the unsubscribe function."""
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
        with self._lock:
            queued = tuple(i for i in self._queue if not isa(Cancel, i))
        shared = self._shared
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
        return snapshot, self.subscribe(callback)

    def messages(self) -> tuple[ChatMessage, ...]:
        """The shared conversation as of now (``()`` if none is shared). Safe from any thread."""
        shared = self._shared
        # Slice first: tuple(list) reads the item array before allocating, and a GC run
        # in that allocation can let the loop's thread append (and move the array).
        # A slice allocates first, then reads; the list only grows, so it is a prefix.
        return tuple(shared[:]) if shared else ()

    def cancel_region(self, key: str) -> bool:
        """Stop the active region ``key`` alone; ``True`` if it was active and not stopped."""
        if not isinstance(key, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"cancel_region() takes a key (str), not {kind_of(key)}")
        with self._lock:
            region = self._regions.get(key)
            if region is None or region.cancelled:
                return False
            region.cancelled = True
        self._call_on_loop(region.stop)
        return True

    def mark_live(self) -> Callable[[], None]:
        """Declare an operator surface attached (see ``is_live``); returns the release."""
        self._live += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._live -= 1

        return release

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
        return APPROVALS.current(self) or self._approver

    @approver.setter
    def approver(self, approver: Approver | None) -> None:
        self._approver = approver

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

    @property
    def shares(self) -> bool:
        """True once a conversation is shared (:meth:`share`)."""
        return self._shared is not None

    def region(self, key: str) -> Region | NullRegion:
        """A region a producer can stop alone: ``with channel.region(key) as r: ...``.

        :meth:`AgentRef.cancel_region` with the same key stops the body and nothing
        else: the cancellation ends at the ``with``, and ``r.cancelled`` says it
        happened. While nobody holds a ref the region is a shared-cost no-op, as
        :meth:`scope` is. Two active regions may not share a key (``ValueError``).
        """
        if not isinstance(key, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"region() takes a key (str), not {kind_of(key)}")
        if not self._reachable:
            return NullRegion(key)
        return Region(key, self._regions, self._lock, self._loop)

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
        needs to go on, e.g. turns taken) and the sections of what is built on the channel
        (``lowlevel.add_section``: the children registry). Without a journal it does
        nothing. The shared conversation must only grow (:meth:`share`). The ids of drained
        items are kept until this call takes them: a durable consumer checkpoints at each
        boundary, so they are bounded by what one boundary drains.
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
        sections = {name: write() for name, write in SECTIONS.get(self, {}).items()}
        journal.commit(shared[start:], taken, state, start=start, sections=sections or None)
        self._committed = len(shared)

    def _post_reserved(self, item: ChannelItem) -> None:
        """:meth:`post` past ``max_queued``, for items bounded elsewhere that must not be
        lost (``lowlevel.post_reserved``)."""
        settle = None
        with self._lock:
            if self._closed:
                raise ChannelClosed(f"execution finished; {item.type} {item.id} not delivered")
            if self._journal is not None:
                settle = self._journal.posted(item)
            self._queue.append(item)
        if settle is not None:
            settle()
        waiter = self._waiter
        if waiter is not None:
            self._call_on_loop(waiter.set)

    def _open_journal(self, journal: Journal) -> None:
        self._journal = journal
        restored = journal.restored()
        if restored is not None:
            self._queue.extend(restored.pending)
            self._committed = -len(restored.messages)  # checked at the first checkpoint
            if restored.sections:
                from ._sections import restore_sections

                restore_sections(self, restored)
        before = journal.on_failure

        def failed(reason: str) -> None:  # D7: published once, on the channel's loop
            if before is not None:
                before(reason)
            from ._events import StoreFailed

            event = StoreFailed(reason=reason)
            self._call_on_loop(lambda: self.publish(event))

        journal.on_failure = failed


def _adopted(shared: list[ChatMessage], restored: Restored | None) -> bool:
    """True when ``shared`` starts with the restored conversation (the consumer went on)."""
    old = restored.messages if restored is not None else ()
    return len(shared) >= len(old) and all(a.id == b.id for a, b in zip(shared, old, strict=False))


def _nothing() -> None:
    return None
