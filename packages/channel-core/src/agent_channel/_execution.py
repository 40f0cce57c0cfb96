"""Where an execution begins and ends: the ambient channel, ``open_channel``, and the
inert channel code sees outside any execution."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from types import TracebackType
from typing import TYPE_CHECKING

from ._channel import AgentChannel
from ._core import MAX_QUEUED, kind_of
from ._items import Cancel, ChannelItem
from ._regions import NullRegion
from ._scope import NULL_SCOPE, NullScope
from ._snapshot import ExecutionSnapshot

if TYPE_CHECKING:
    import threading

    from ._abc import Approver, Subscriber
    from ._events import ExecutionEvent
    from ._messages import ChatMessage
    from ._store import Journal


class InertChannel(AgentChannel):
    """What :func:`agent_channel` returns outside any execution: accepts and ignores.

    One instance serves every caller in the process, so nothing may stick to it:
    every attribute a caller could change reads back as its default.
    """

    __slots__ = ()

    def __init__(self) -> None:  # no loop needed: nothing ever waits or wakes
        import threading

        self._queue = deque()
        self._lock: threading.Lock = threading.Lock()
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
    _cs = property(lambda self: None, lambda self, value: None)  # type: ignore[assignment]
    _claimed = property(lambda self: None, lambda self, value: None)  # type: ignore[assignment]
    _journal = property(lambda self: None, lambda self, value: None)  # type: ignore[assignment]
    _vars = property(lambda self: {}, lambda self, value: None)  # type: ignore[assignment]
    _awaiting = property(lambda self: None, lambda self, value: None)  # type: ignore[assignment]

    def post(self, item: ChannelItem) -> None:
        if not isinstance(item, ChannelItem):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"post() takes a ChannelItem such as UserMessage, not {kind_of(item)}")

    def interrupt(self, cancel: Cancel | None = None) -> None:
        if cancel is not None and not isinstance(cancel, Cancel):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"interrupt() takes a Cancel (or nothing), not {kind_of(cancel)}")

    def withdraw(self, item_id: str) -> bool:
        return False

    def drain(self) -> list[ChannelItem]:
        return []

    async def receive(self, *, awaiting: object = None) -> list[ChannelItem]:
        raise RuntimeError("no execution is open here: nothing can ever arrive on this channel")

    def scope(self) -> NullScope:
        return NULL_SCOPE

    def share(self, messages: list[ChatMessage]) -> None:
        return None

    def region(self, key: str) -> NullRegion:
        return NullRegion(key)

    def publish(self, event: ExecutionEvent) -> None:
        return None

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        return _nothing

    def watch(self, callback: Subscriber) -> tuple[ExecutionSnapshot, Callable[[], None]]:
        return ExecutionSnapshot(messages=(), turn_state="idle", seq=0, closed=False), _nothing

    def cancel_region(self, key: str) -> bool:
        return False

    def mark_live(self) -> Callable[[], None]:
        return _nothing


def _nothing() -> None:
    return None


INERT = InertChannel()
_current: ContextVar[AgentChannel] = ContextVar("agent_channel", default=INERT)


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

    With a ``journal`` (from a :class:`~agent_channel.abc.Store`) the execution is
    durable: what producers post is written before ``post`` returns, each
    :meth:`AgentChannel.checkpoint` commits a boundary, the end is recorded, and a journal
    of an execution whose process died has its queued items queued again here and the
    rest in :attr:`AgentChannel.restored`. An outer cancellation (a server shutting down)
    records no end: the execution is restored when its server starts again.
    """
    channel = AgentChannel(approver=approver, max_queued=max_queued, journal=journal)
    with Execution(channel):
        yield channel


class Execution:
    """What :func:`open_channel` does around its block, as a plain context manager: the
    channel ambient inside, closed on the way out (with the error that ended it). A
    supervisor enters one in each child's task, where an async generator would cost more
    (``lowlevel.Execution``)."""

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
        self._channel._close(exc)  # pyright: ignore[reportPrivateUsage] (its one closer)
