"""The producer's handle on an execution: post, interrupt, watch; never drain.

:class:`AgentRef` only narrows the channel to what a producer may do: every call is
the channel's own public one. It satisfies :class:`~agent_channel.abc.ExecutionRef`, as
a runtime's ref to an execution elsewhere does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ._errors import UnknownChild
from ._vars import APPROVALS, QUESTIONS, ExecutionVar

if TYPE_CHECKING:
    from ._abc import Approver, Children, Resolver, SteerReceipt, Subscriber
    from ._channel import AgentChannel
    from ._content import Content
    from ._events import ChildInfo, TurnState
    from ._items import Cancel, ChannelItem
    from ._messages import ChatMessage
    from ._snapshot import ExecutionSnapshot


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

        Raises:
            ChannelClosed: the execution finished.
            ChannelFull: the channel's limit of undrained items waits.
            TypeError: ``item`` is not a :class:`ChannelItem`.
        """
        self._channel.post(item)

    def interrupt(self, cancel: Cancel | None = None) -> None:
        """Stop the work in progress; between regions, stop the next one as it starts.

        Raises:
            TypeError: ``cancel`` is not a :class:`Cancel`.
        """
        self._channel.interrupt(cancel)

    def withdraw(self, item_id: str) -> bool:
        """Take back a queued item no boundary has taken yet; ``True`` if it was withdrawn."""
        return self._channel.withdraw(item_id)

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback`` with every event from now on; returns an unsubscribe function."""
        return self._channel.subscribe(callback)

    def watch(self, callback: Subscriber) -> tuple[ExecutionSnapshot, Callable[[], None]]:
        """The execution's state now, and ``callback`` for every event after it.

        Atomic: no event is missed and none the snapshot reflects comes again, so a
        producer that joins late (an operator attaching) can rebuild the whole picture.
        On the execution's own thread it returns at once; from another thread it runs
        on the execution's loop and blocks this thread until then. Also returns the
        unsubscribe function.
        """
        return self._channel.watch(callback)

    def messages(self) -> tuple[ChatMessage, ...]:
        """The conversation the consumer shares, as of now (``()`` if it shares none).

        Safe from any thread. Always the top-level loop's own conversation: nested
        executions have channels of their own.
        """
        return self._channel.messages()

    def cancel_region(self, key: str) -> bool:
        """Stop the consumer's active region ``key`` alone (see :meth:`AgentChannel.region`).

        ``True`` if one was active and not stopped already; the consumer then treats it
        as stopped. Safe from any thread.
        """
        return self._channel.cancel_region(key)

    def route_approvals(self, approver: Approver) -> Callable[[], None]:
        """Answer this execution's approval requests with ``approver`` until released.

        For a producer that did not open the execution and decides who answers (an
        attach server picks a client). The last one routed wins; the returned release
        restores the one before.
        """
        return APPROVALS.add(self._channel, approver)

    def route_questions(self, resolver: Resolver) -> Callable[[], None]:
        """Answer the questions of this execution and of its children with ``resolver``
        until released (see :func:`ask_user`). The last one routed wins; the returned
        release restores the one before."""
        return QUESTIONS.add(self._channel, resolver)

    def mark_live(self) -> Callable[[], None]:
        """Declare an operator surface attached (see ``is_live``); returns the release."""
        return self._channel.mark_live()

    @property
    def turn_state(self) -> TurnState:
        """The execution's last scope transition, read at the moment of asking."""
        return self._channel.turn_state

    @property
    def children(self) -> Children:
        """The execution's children, for an operator: list, read, steer, stop (by id).

        Goes through the execution's supervisor (``open_supervisor``); a producer never
        gets a child's ref. Safe from any thread.
        """
        return CHILDREN.get(self._channel, NO_CHILDREN)

    @property
    def closed(self) -> bool:
        """True once the execution has finished."""
        return self._channel.closed


class _NoChildren:
    """The children of an execution that has no supervisor: none."""

    __slots__ = ()

    def list(self) -> tuple[ChildInfo, ...]:
        return ()

    def info(self, child_id: str) -> ChildInfo:
        raise _unknown(child_id)

    def result(self, child_id: str) -> str:
        raise _unknown(child_id)

    def messages(self, child_id: str, tail: int | None = None) -> tuple[ChatMessage, ...]:
        raise _unknown(child_id)

    def steer(self, child_id: str, content: str | tuple[Content, ...]) -> SteerReceipt:
        raise _unknown(child_id)

    def stop(self, child_id: str, reason: str = "stopped by the operator") -> bool:
        raise _unknown(child_id)


def _unknown(child_id: str) -> UnknownChild:
    return UnknownChild(f"no child with id {child_id!r} in this execution")


NO_CHILDREN: Children = _NoChildren()
CHILDREN: ExecutionVar[Children] = ExecutionVar("children")
"""What ``AgentRef.children`` answers with: a supervisor sets it while it is open."""
