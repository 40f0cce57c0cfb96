"""The interfaces an execution is reached through, in one place (``agent_channel.abc``).

What a producer holds (:class:`ExecutionRef`, satisfied by :class:`AgentRef` and by any
runtime's own ref, such as one that reaches an execution in another process), what
answers an execution's requests (:data:`Approver`, :data:`Resolver`) and what watches it
(:data:`Subscriber`). The store's interfaces live beside their data in ``_store``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ._content import Content
    from ._events import ChildInfo, ExecutionEvent, TurnState
    from ._items import Cancel, ChannelItem
    from ._messages import ChatMessage, ToolCall
    from ._snapshot import ExecutionSnapshot
    from .questions import Answer, Question

Subscriber = Callable[["ExecutionEvent"], None]
"""An event callback. It runs synchronously in the consumer's task: keep it quick."""

Approver = Callable[["ToolCall"], Awaitable[bool]]
"""Decides whether a tool call may run: given by whoever opens the channel, or routed
by a producer (:meth:`AgentRef.route_approvals`)."""

Resolver = Callable[["Question"], Awaitable["Answer"]]
"""Answers questions: routed onto a top-level execution by a producer
(:meth:`AgentRef.route_questions`). Awaited in the asking turn; it may be cancelled there."""


class SteerReceipt(Protocol):
    """Where one steer of a child stands (``ChildControl.steer``'s answer)."""

    @property
    def id(self) -> str: ...

    @property
    def child_id(self) -> str: ...

    @property
    def outcome(self) -> str:
        """``pending``, ``delivered`` or ``undelivered``."""
        ...

    @property
    def seq(self) -> int | None: ...

    @property
    def reason(self) -> str | None: ...


class Children(Protocol):
    """An operator's reach into an execution's children, by id (``ExecutionRef.children``).

    Every call raises :class:`~agent_channel.UnknownChild` for an id the execution's tree
    does not hold.
    """

    def list(self) -> tuple[ChildInfo, ...]:
        """Every child below the execution, each followed by its own children."""
        ...

    def info(self, child_id: str) -> ChildInfo: ...

    def result(self, child_id: str) -> str: ...

    def messages(self, child_id: str, tail: int | None = None) -> tuple[ChatMessage, ...]: ...

    def steer(self, child_id: str, content: str | tuple[Content, ...]) -> SteerReceipt: ...

    def stop(self, child_id: str, reason: str = "stopped by the operator") -> bool: ...


class ExecutionRef(Protocol):
    """What a producer holds of one execution, wherever it runs (see :class:`AgentRef`)."""

    def post(self, item: ChannelItem) -> None: ...

    def interrupt(self, cancel: Cancel | None = None) -> None: ...

    def withdraw(self, item_id: str) -> bool: ...

    def subscribe(self, callback: Subscriber) -> Callable[[], None]: ...

    def watch(self, callback: Subscriber) -> tuple[ExecutionSnapshot, Callable[[], None]]: ...

    def messages(self) -> tuple[ChatMessage, ...]: ...

    def cancel_region(self, key: str) -> bool: ...

    def route_approvals(self, approver: Approver) -> Callable[[], None]: ...

    def route_questions(self, resolver: Resolver) -> Callable[[], None]: ...

    def mark_live(self) -> Callable[[], None]: ...

    @property
    def turn_state(self) -> TurnState: ...

    @property
    def children(self) -> Children: ...

    @property
    def closed(self) -> bool: ...
