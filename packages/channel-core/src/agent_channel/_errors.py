"""The core's exceptions."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only named here: importing an error defines no model
    from ._items import Cancel


class AgentInterrupted(Exception):
    """Raised out of :meth:`AgentChannel.scope` when this channel's interrupt stopped it.

    Only the channel's own :meth:`~AgentChannel.interrupt` produces it: a
    deadline, a task group shutting down or Ctrl-C propagates as the
    cancellation it is.
    """

    def __init__(self, cancel: Cancel) -> None:
        super().__init__(f"interrupted ({cancel.reason})")
        self.cancel = cancel


class ChannelClosed(RuntimeError):
    """The execution behind this channel has finished; the item was not delivered."""


class ChannelFull(RuntimeError):
    """The channel already holds its limit of undrained items; this one was not queued.

    The consumer is not reaching its boundaries (a long tool call, a stuck model): the
    producer keeps the item and may retry after the next drain, or tell its client.
    """


class NotOwner(RuntimeError):
    """A consumer-side call came from a task that does not own the channel."""


class SpawnRefused(RuntimeError):
    """A supervisor would not start the child: a cap, the depth limit, or the execution ending.

    Raised at once, never after a wait; the message says which limit, in words a model can
    act on.
    """


class UnknownChild(LookupError):
    """No child of this execution (or below it) has that id."""


def describe(exc: BaseException) -> str:
    """How an event names the exception that ended a turn or a call: ``"ValueError: ..."``."""
    return f"{type(exc).__name__}: {exc}"
