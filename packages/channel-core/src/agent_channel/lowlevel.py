"""The seam: what runtimes, stores and extensions build on, beyond the public API.

An agent author never needs this module. Children, questions, stores and framework
adapters are built on it (and on the public names) alone: they reach nothing private of
the core. What is here is as stable and documented as the public API, but it exposes how
an execution works inside: per-execution variables (:class:`ExecutionVar`), the parent
link a request climbs by (:func:`link`, :func:`top`), the routes that decide who answers
(:class:`Route`, :data:`APPROVALS`, :data:`QUESTIONS`), checkpoint sections, the
execution's loop (:func:`call_on_loop`, :func:`loop_of`) and reserved posting.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from ._adapter_loop import CANCELLED_TEXT, RESTARTED_TEXT, AdapterLoop
from ._adapters import GROUP as ADAPTERS
from ._adapters import NotAnAgent, adapted, as_body, as_factory, load_agent
from ._channel import AgentChannel
from ._codec import items as decode_items
from ._codec import messages as decode_messages
from ._core import MAX_QUEUED
from ._errors import describe
from ._execution import INERT, Execution
from ._items import RESULT_CHARS, bounded
from ._loop import CancelScopeLike, EventLike, LoopHandle
from ._ref import CHILDREN
from ._sections import RestoreHook, add_section, on_restore
from ._trusted import trusted
from ._vars import APPROVALS, QUESTIONS, ExecutionVar, Link, Route

if TYPE_CHECKING:
    from ._abc import Approver, Resolver, Subscriber
    from ._items import ChannelItem
    from ._ref import AgentRef
    from ._store import Journal

__all__ = [
    "ADAPTERS",
    "APPROVALS",
    "CANCELLED_TEXT",
    "CHILDREN",
    "MAX_QUEUED",
    "QUESTIONS",
    "RESTARTED_TEXT",
    "RESULT_CHARS",
    "AdapterLoop",
    "CancelScopeLike",
    "EventLike",
    "Execution",
    "ExecutionVar",
    "Link",
    "LoopHandle",
    "NotAnAgent",
    "RestoreHook",
    "Route",
    "adapted",
    "add_section",
    "approver_of",
    "as_body",
    "as_factory",
    "bounded",
    "call_on_loop",
    "decode_items",
    "decode_messages",
    "describe",
    "is_inert",
    "journal_of",
    "link",
    "link_of",
    "load_agent",
    "loop_of",
    "nest",
    "on_loop_thread",
    "on_restore",
    "own_approver",
    "post_reserved",
    "published",
    "resolver_of",
    "top",
    "trusted",
    "unnest",
]

_LINK: ExecutionVar[Link | None] = ExecutionVar("link")
# A NamedTuple's own __new__ checks its arity by keyword: this is one a spawn pays.
_new_link: Callable[[type[Link], tuple[AgentChannel, str, str]], Link] = tuple.__new__  # pyright: ignore[reportAssignmentType, reportUnknownMemberType, reportUnknownVariableType]


def is_inert(channel: AgentChannel) -> bool:
    """True for the channel :func:`~agent_channel.agent_channel` returns outside any execution."""
    return channel is INERT


def loop_of(channel: AgentChannel) -> LoopHandle:
    """The event loop the execution runs on, as its channel captured it: pass it to
    ``AgentChannel(loop=...)`` for another channel on it, or use its cancel scopes and events."""
    return channel._loop  # pyright: ignore[reportPrivateUsage]


def on_loop_thread(channel: AgentChannel) -> bool:
    """True on the thread of the execution's event loop."""
    return threading.get_ident() == channel._thread  # pyright: ignore[reportPrivateUsage]


def call_on_loop(channel: AgentChannel, fn: Callable[[], object]) -> None:
    """Run ``fn`` on the execution's loop: at once on its thread, else soon (never blocks);
    nothing once the loop has finished."""
    channel._call_on_loop(fn)  # pyright: ignore[reportPrivateUsage]


def post_reserved(channel: AgentChannel, item: ChannelItem) -> None:
    """Post past the channel's ``max_queued``: for items bounded by their sender (one
    announcement per child, and a supervisor's children are capped), which must not be
    lost. Written ahead to the journal as any post. Raises ``ChannelClosed`` once the
    execution finished."""
    channel._post_reserved(item)  # pyright: ignore[reportPrivateUsage]


def published(channel: AgentChannel) -> int:
    """Events published so far: inside a subscriber, the current event's number plus one."""
    return channel._seq  # pyright: ignore[reportPrivateUsage]


def journal_of(channel: AgentChannel) -> Journal | None:
    """The journal a durable execution writes to (``open_channel(journal=...)``)."""
    return channel._journal  # pyright: ignore[reportPrivateUsage]


def own_approver(channel: AgentChannel) -> Approver | None:
    """The approver the execution's opener (or its own code) set, whatever is routed above it."""
    return channel._approver  # pyright: ignore[reportPrivateUsage]


def link(channel: AgentChannel, parent: AgentChannel, id: str, name: str) -> None:
    """Place the execution of ``channel`` below ``parent``'s, as ``id`` (``name``): its
    questions climb to the top through this link."""
    _LINK.set(channel, _new_link(Link, (parent, id, name)))


def nest(
    parent: AgentChannel, id: str, name: str, watch: Subscriber, approver: Approver
) -> AgentChannel:
    """A channel for an execution below ``parent``'s (a child): on its loop, linked as
    ``id`` (``name``), ``watch`` its first subscriber and ``approver`` routed over its own.

    What a child's spawn pays, in one go (each step alone costs a closure or a lock);
    :func:`unnest` takes ``watch`` and ``approver`` off again.
    """
    channel = AgentChannel(loop=parent._loop)  # pyright: ignore[reportPrivateUsage]
    channel._subscribers = (watch,)  # pyright: ignore[reportPrivateUsage] (a fresh channel)
    channel._vars[_LINK] = _new_link(Link, (parent, id, name))  # pyright: ignore[reportPrivateUsage]
    channel._vars[APPROVALS] = (approver,)  # pyright: ignore[reportPrivateUsage]
    return channel


def unnest(channel: AgentChannel, watch: Subscriber, approver: Approver) -> None:
    """The nested execution's body and children are over: ``watch`` is subscribed no more
    and ``approver`` routed no more (both refer to the channel, which refers to them: left
    in place, that cycle would keep the channel, its task and its context for the GC)."""
    subscribers = channel._subscribers  # pyright: ignore[reportPrivateUsage]
    channel._subscribers = (  # pyright: ignore[reportPrivateUsage]
        () if subscribers == (watch,) else tuple(s for s in subscribers if s is not watch)
    )
    with channel._lock:  # pyright: ignore[reportPrivateUsage]
        routes = channel._vars  # pyright: ignore[reportPrivateUsage]
        routed: tuple[Approver, ...] = routes.get(APPROVALS, ())  # pyright: ignore[reportAssignmentType]
        routes[APPROVALS] = (
            () if routed == (approver,) else tuple(r for r in routed if r is not approver)
        )


def link_of(channel: AgentChannel) -> Link | None:
    """The execution's place below another (``None`` at the top)."""
    return _LINK.get(channel, None)


def top(channel: AgentChannel) -> AgentChannel:
    """The top-level execution above ``channel`` (itself when it is the top)."""
    link = _LINK.get(channel, None)
    while link is not None:
        channel = link.parent
        link = _LINK.get(channel, None)
    return channel


def approver_of(ref: AgentRef) -> Approver | None:
    """Who answers the execution's approvals now (a route, else the opener's approver)."""
    return ref._channel.approver  # pyright: ignore[reportPrivateUsage]


def resolver_of(ref: AgentRef) -> Resolver | None:
    """Who answers the execution's questions now: its top level's last routed resolver."""
    return QUESTIONS.current(top(ref._channel))  # pyright: ignore[reportPrivateUsage]
