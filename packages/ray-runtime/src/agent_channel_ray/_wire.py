"""What crosses between a host actor and a ref: results and errors in serialised form.

An exception raised inside an actor method reaches the caller as a ``RayTaskError``; a
producer written against the local ``AgentRef`` catches ``ChannelClosed``, ``ChannelFull``,
``TypeError``. So the actor never raises the channel's own errors: it returns them as an
:class:`Outcome`, and the ref raises the core's exception again, of the same type, with the
same message. Events and snapshots are pydantic models and frozen dataclasses: they pickle
as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_channel.abc import SteerReceipt

from agent_channel import (
    ChannelClosed,
    ChannelFull,
    ExecutionEvent,
    NotOwner,
    SpawnRefused,
    UnknownChild,
)

# The errors a local ref raises, by name: only these come back as themselves.
_ERRORS: dict[str, type[Exception]] = {
    cls.__name__: cls
    for cls in (
        ChannelClosed,
        ChannelFull,
        NotOwner,
        SpawnRefused,
        UnknownChild,
        TypeError,
        ValueError,
        LookupError,
        KeyError,
    )
}


@dataclass(frozen=True, slots=True)
class SteerState:
    """A steer's receipt as it stood when the host made it: what ``RayChildren.steer``
    returns (its outcome, once known, arrives as the parent's ``ChildSteered`` event)."""

    id: str
    child_id: str
    outcome: str
    seq: int | None = None
    reason: str | None = None

    @classmethod
    def of(cls, receipt: SteerReceipt) -> SteerState:
        return cls(receipt.id, receipt.child_id, receipt.outcome, receipt.seq, receipt.reason)


@dataclass(frozen=True, slots=True)
class Outcome:
    """A method's return value, or the error a local ref would have raised."""

    value: Any = None
    error: str | None = None
    """The error's class name (one of the channel's), or ``None``."""
    message: str = ""

    def unwrap(self) -> Any:
        """The value; raises the core's own error if the call failed."""
        if self.error is None:
            return self.value
        cls = _ERRORS.get(self.error, RuntimeError)
        raise cls(self.message)


def call(fn: Callable[..., Any], *args: Any) -> Outcome:
    """Run ``fn`` on the actor; the channel's errors become an :class:`Outcome`."""
    try:
        return Outcome(value=fn(*args))
    except tuple(_ERRORS.values()) as exc:
        return failure(exc)


def failure(exc: BaseException) -> Outcome:
    """``exc`` as an :class:`Outcome`: one of the channel's errors as itself, any other as a
    ``RuntimeError`` naming its type."""
    name = type(exc).__name__
    if name in _ERRORS:
        return Outcome(error=name, message=str(exc))
    return Outcome(error="RuntimeError", message=f"{name}: {exc}")


@dataclass(frozen=True, slots=True)
class Batch:
    """Events after a sequence number, as a watcher polls them (see ``ExecutionHost.events``).

    ``lost`` is true when the host's bounded log no longer holds the first one asked for: the
    watcher fell too far behind and must take a fresh snapshot. ``epoch``: the host actor's
    incarnation (new at each restart: its numbers start again, the watcher resyncs).
    """

    events: tuple[tuple[int, ExecutionEvent], ...]
    closed: bool
    lost: bool = False
    epoch: str = ""


@dataclass(frozen=True, slots=True)
class Record:
    """One execution as the registry lists it."""

    execution_id: str
    title: str
    status: str
    """``running`` or ``ended``."""
    reason: str | None = None
    """How it ended: ``finished``, ``cancelled``, or why its actor died."""
    parent: str | None = None


@dataclass(frozen=True, slots=True)
class Requests:
    """The approvals or questions a route has parked, as its follower polls them (see
    ``ExecutionHost.requests``): all of them, each ``(id, request)``, at ``version``.

    A request the follower runs that is no longer listed was withdrawn (the asking turn was
    interrupted, or answered); ``done``: the route ended, nothing more will be parked.
    """

    version: int
    pending: tuple[tuple[str, Any], ...]
    done: bool
