"""What an execution's channel writes down so the execution outlives its process.

Two small interfaces: a :class:`Store` keeps many executions; each execution writes
through its own :class:`Journal`. The channel calls the journal (write-ahead of what
producers post, the boundary's commit, the end); the consumer decides when a boundary
is (:meth:`AgentChannel.checkpoint`); the producer owns each execution's ``meta`` (how to
start it again, what to show). The SQLite store is a distribution of its own
(``agent-channel-sqlite``); :class:`agent_channel.testing.MemoryStore` is the reference
implementation, and :mod:`agent_channel.testing` has the conformance suite another database
runs to show it implements these two protocols (``docs/durability.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from ._events import ChildInfo
    from ._items import ChannelItem
    from ._messages import ChatMessage

ExecutionStatus = Literal["running", "ended", "closed"]
"""A stored execution's state: it may go on (``running``: a restart restores it), it
finished on its own (``ended``), or an operator closed it (``closed``)."""

JsonObject = Mapping[str, object]
"""Plain JSON data: what ``meta`` and a consumer's state are made of."""


class StoreError(RuntimeError):
    """The store cannot be used: corrupt, from a newer schema, in use by another live
    server, or unwritable. The message is one line a person can act on."""


class StoreBusy(StoreError):
    """What was asked for (the store, or one execution of a shared store) is held by
    another live process. Not a fault: it can be asked again once that process ends, and a
    server tells its client so apart from a store that failed."""


@dataclass(frozen=True, slots=True)
class Restored:
    """What a journal had when its execution was opened again after its process ended.

    The channel re-queues ``pending`` itself; a consumer that can go on reads the rest
    (:attr:`AgentChannel.restored`): its conversation as it was at the last commit, the
    state it last committed, and the children its registry had then.
    """

    messages: tuple[ChatMessage, ...] = ()
    state: JsonObject | None = None
    pending: tuple[ChannelItem, ...] = ()
    sections: Mapping[str, str] = field(default_factory=dict[str, str])
    """The named sections last committed (see :meth:`Journal.commit`), each its JSON text."""
    wait: bool = False
    """The operator asked to restore and wait: go on only at their next message."""

    @property
    def children(self) -> tuple[ChildInfo, ...]:
        """The children registry as last committed (section ``agent_channel.children``)."""
        from ._codec import children

        return tuple(children(self.sections.get("agent_channel.children")))


@dataclass(frozen=True, slots=True)
class StoredExecution:
    """One execution's row, as :meth:`Store.executions` lists it."""

    id: str
    status: ExecutionStatus
    meta: JsonObject = field(default_factory=dict[str, object])
    created: float = 0.0
    updated: float = 0.0
    """When it last wrote (a post, a commit, its end): ``time.time()``."""
    restored: float | None = None
    """When a server last restored it after a restart, if ever."""
    messages: int = 0
    """Messages its conversation had at its last commit."""
    stop_reason: str | None = None
    error: str | None = None


class Journal(Protocol):
    """One execution's writes. The channel calls it under its own lock, from any thread:
    an implementation keeps each call one transaction and never raises for a failed
    write (it records :attr:`failure` and goes on in memory: the agent must not die of
    a full disk)."""

    on_failure: Callable[[str], object] | None
    """Told the reason once, when writing stops (from the thread whose write failed); the
    channel sets it to publish :class:`~agent_channel.StoreFailed`."""

    @property
    def id(self) -> str: ...

    @property
    def failure(self) -> str | None:
        """Why writing stopped, once it has (then every later call writes nothing)."""
        ...

    def restored(self) -> Restored | None:
        """What the execution had, when it was opened again; ``None`` for a new one."""
        ...

    def posted(self, item: ChannelItem) -> Callable[[], object] | None:
        """``item`` is queued: written before ``post`` returns (write-ahead).

        Called under the channel's lock, so writes keep the queue's order. A store that
        makes a write durable later (an fsync shared by many writes) returns the wait for
        it: the channel calls it once it has released its lock, before ``post`` returns,
        so no one else waits for this post's disk."""
        ...

    def withdrawn(self, item_id: str) -> None:
        """A queued item was taken back before any drain took it."""
        ...

    def commit(
        self,
        messages: Sequence[ChatMessage],
        taken: Sequence[str],
        state: JsonObject | None,
        *,
        start: int,
        sections: Mapping[str, str] | None = None,
    ) -> None:
        """A boundary, in one transaction: ``messages`` appended to the conversation from
        index ``start`` (``start`` 0 rewrites it), the drained items ``taken`` (by id),
        the consumer's ``state`` (``None`` keeps the stored one), and named ``sections``:
        each a JSON text kept as it is and handed back in :attr:`Restored.sections` (what
        is built on the channel writes its own, e.g. ``agent_channel.children``); a section
        not given keeps its stored text."""
        ...

    def finish(self, status: ExecutionStatus, stop_reason: str | None, error: str | None) -> None:
        """The execution is over: it is never restored; its pending items are dropped."""
        ...


class Store(Protocol):
    """Many executions' journals, and the list a producer shows and restores from."""

    def journal(
        self, execution_id: str, meta: JsonObject | None = None, *, wait: bool = False
    ) -> Journal:
        """The journal of ``execution_id``: a new execution with ``meta``, or one found in
        the store (then :meth:`Journal.restored` has what it had, with ``wait`` in it, and
        ``meta`` replaces the stored one when given). :class:`StoreError` for one that
        finished."""
        ...

    def executions(self, status: ExecutionStatus | None = None) -> list[StoredExecution]:
        """Every stored execution (or those with ``status``), newest first."""
        ...

    def get(self, execution_id: str) -> StoredExecution | None: ...

    def messages(self, execution_id: str) -> tuple[ChatMessage, ...]:
        """A stored execution's conversation as of its last commit."""
        ...

    def close_execution(self, execution_id: str) -> None:
        """An operator closed it: never restored, kept (listed) until pruned."""
        ...

    def close(self) -> None:
        """Release the store (and its lock on the file)."""
        ...
