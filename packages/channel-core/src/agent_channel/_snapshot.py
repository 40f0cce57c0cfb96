"""What a late subscriber starts from: the execution's state at one instant."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._events import StopReason, TurnState
    from ._items import ChannelItem
    from ._messages import ChatMessage


@dataclass(frozen=True, slots=True)
class ExecutionSnapshot:
    """The state :meth:`AgentRef.watch` hands over with its subscription.

    Taken atomically with the subscription: every event published after it reaches
    the callback, and none that it already reflects.
    """

    messages: tuple[ChatMessage, ...]
    """The conversation the consumer shares (see :meth:`AgentChannel.share`), oldest first."""
    turn_state: TurnState
    """The last scope transition."""
    seq: int
    """Events published before this instant: the callback's first event is number ``seq``."""
    closed: bool
    """The execution had finished: no event will follow."""
    queued: tuple[ChannelItem, ...] = ()
    """The items waiting for a drain (Cancels left out): those a producer did not post
    itself, such as an execution's restored from a store, are here to show."""
    awaiting: StopReason | None = None
    """The consumer is parked in :func:`wait_for_message`, and why it stopped (what the
    :class:`AwaitingInput` a subscriber joining now has missed said); ``None`` otherwise."""
