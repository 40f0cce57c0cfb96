"""What a supervisor keeps per child: its limits, its steers and its registry row.

Nothing here runs a child (``_lifecycle.py`` does). A :class:`Child` record is changed
only under its supervisor's lock; a :class:`Steering` is the steerer's receipt, resolved
exactly once.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import anyio

from agent_channel import ChannelClosed, ChannelFull, ChildInfo, Steer, ToolCall
from agent_channel.lowlevel import bounded, own_approver, trusted

if TYPE_CHECKING:
    from agent_channel import (
        AgentChannel,
        AgentRef,
        ChatMessage,
        ChildEnd,
        ChildStatus,
        ExecutionEvent,
        LimitName,
        Usage,
    )
    from agent_channel.lowlevel import CancelScopeLike

    from ._lifecycle import SupervisorCore

ChildBody = Callable[[str], Awaitable["str | None"]]
"""A child's work: called with its input, in its own task, with its own channel ambient
(:func:`agent_channel` inside is the child's, never the parent's). What it returns is the
child's result (``None`` reads as ``""``)."""

UNREAD = "the child ended before reading it"
"""Why a steer was not delivered when its child ended first."""

SteerOutcome = Literal["pending", "delivered", "undelivered"]
"""Where a steer stands: not yet known, drained by the child, or never read (the child ended
first, or its channel was full)."""


@dataclass(frozen=True, slots=True)
class ChildLimits:
    """Per-child limits, each enforced in the child; exceeding one ends it with status ``limit``.

    ``turns``: scopes the child may enter (a ReAct loop enters one per turn); the next one
    ends it. ``tokens``: ``total_tokens`` its :class:`ModelCallFinished` events may report,
    summed (a consumer that reports no usage is not limited). ``seconds``: wall time from its
    start. ``None`` means no limit.
    """

    turns: int | None = None
    tokens: int | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        for name in ("turns", "tokens"):
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value < 1):
                raise ValueError(f"{name} must be an int of at least 1 (or None), not {value!r}")
        s = self.seconds
        if s is not None and (
            type(s) not in (int, float) or not s > 0 or math.isinf(s)  # bool is not a time
        ):
            raise ValueError(f"seconds must be a positive number (or None), not {s!r}")


NO_LIMITS = ChildLimits()


class ChildToolCall(ToolCall):
    """A child's tool call as its top level's approver is asked it (K9): it names the child.

    ``id`` is ``<child id>/<call id>``, unique in the top level's execution (a child's call
    ids may repeat its parent's); ``call_id`` is the id in the child's own conversation. A
    grandchild's call comes up as it is: it names the grandchild.
    """

    child_id: str
    child_name: str
    call_id: str


class ChildApprover:
    """The approver a supervisor routes onto a child's channel (K9).

    Asks the approver the child's own code set (if any), then the parent's, read at each
    call so a route a producer adds later holds too: a child's call needs every approval its
    parent's would, and the question reaching the top names the child. One object, not a
    closure: a child is spawned often, and each closure is several objects for the GC.
    """

    __slots__ = ("_child", "_parent", "own")

    def __init__(self, parent: AgentChannel, child: Child) -> None:
        self._parent, self._child = parent, child
        self.own: AgentChannel  # the child's channel, set as soon as it exists

    async def __call__(self, call: ToolCall) -> bool:
        mine = own_approver(self.own)  # the child's own code's, not this one
        if mine is not None and not await mine(call):
            return False
        above = self._parent.approver
        if above is None:
            return True
        if not isinstance(call, ChildToolCall):
            child = self._child
            call = ChildToolCall(
                id=f"{child.id}/{call.id}",
                name=call.name,
                arguments=call.arguments,
                child_id=child.id,
                child_name=child.name,
                call_id=call.id,
            )
        return await above(call)


class Steering:
    """The receipt of one steer: its outcome, known exactly once.

    ``outcome`` starts ``pending`` and becomes ``delivered`` (the child drained the
    :class:`Steer`; ``seq`` is the number of the child's :class:`ItemsDrained` event that
    carried it) or ``undelivered`` (``reason`` says why). Readable from any thread;
    :meth:`wait` belongs to the execution's event loop.
    """

    __slots__ = (
        "_call_on_loop",
        "_event",
        "_lock",
        "child_id",
        "outcome",
        "reason",
        "seq",
        "steer",
    )

    def __init__(
        self, steer: Steer, child_id: str, call_on_loop: Callable[[Callable[[], object]], None]
    ) -> None:
        self.steer = steer
        """The item posted into the child's channel."""
        self.child_id = child_id
        self.outcome: SteerOutcome = "pending"
        self.seq: int | None = None
        self.reason: str | None = None
        self._lock = threading.Lock()
        self._event: anyio.Event | None = None
        self._call_on_loop = call_on_loop

    @property
    def id(self) -> str:
        """The steer's item id."""
        return self.steer.id

    async def wait(self) -> Steering:
        """Until the outcome is known; returns this receipt. On the execution's loop only."""
        with self._lock:
            if self.outcome != "pending":
                return self
            if self._event is None:
                self._event = anyio.Event()
            event = self._event
        await event.wait()
        return self

    def _resolve(self, seq: int | None, reason: str | None) -> bool:
        """Delivered (with ``seq``) or undelivered (with ``reason``); ``False`` if known already."""
        with self._lock:
            if self.outcome != "pending":
                return False
            self.seq, self.reason = seq, reason
            self.outcome = "delivered" if reason is None else "undelivered"
            event = self._event
        if event is not None:
            self._call_on_loop(event.set)
        return True

    def __repr__(self) -> str:
        return f"Steering(id={self.id!r}, child_id={self.child_id!r}, outcome={self.outcome!r})"


class Child:
    """One child's record in its supervisor (changed under the supervisor's lock).

    What only its run needs (its body, its cancel scope, its channel) is dropped when it
    ends: the supervisor keeps ``max_total`` records, each as small as its row.
    """

    __slots__ = (
        "announce_id",
        "below",
        "body",
        "cause",
        "depth",
        "end",
        "final",
        "id",
        "input",
        "last_activity",
        "limit",
        "limits",
        "name",
        "parent_id",
        "pending",
        "reason",
        "ref",
        "result",
        "scope",
        "started",
        "status",
        "steers",
        "sub",
        "turns",
        "usage",
    )

    def __init__(
        self,
        id: str,
        name: str,
        body: ChildBody,
        input: str,
        limits: ChildLimits,
        *,
        depth: int,
        parent_id: str | None,
        started: float,
        usage: Usage,
        scope: CancelScopeLike,
    ) -> None:
        self.id = id
        self.name = name
        self.body: ChildBody | None = body  # until it ends
        self.input = input
        self.limits = limits
        self.depth = depth
        self.parent_id = parent_id
        self.started = self.last_activity = started
        self.usage = usage
        self.scope: CancelScopeLike | None = scope  # kill, a limit, the parent's end cancel it
        self.status: ChildStatus = "running"
        self.turns = 0
        self.cause: tuple[ChildEnd, str | None, LimitName | None] | None = None
        """Set before the scope is cancelled: how the end will be reported."""
        self.end: ChildEnd | None = None
        self.reason: str | None = None
        self.limit: LimitName | None = None
        self.result: str | None = None
        self.announce_id: str | None = None
        self.ref: AgentRef | None = None  # the child's channel, while it is open
        self.final: tuple[ChatMessage, ...] = ()  # its conversation as it ended
        self.steers: dict[str, Steering] = {}  # by steer id: those not resolved yet
        self.pending: tuple[Steering, ...] = ()  # steered before its channel opened (rare)
        self.sub: SupervisorCore | None = None  # the child's own supervisor, while it runs
        self.below: tuple[ChildInfo, ...] = ()  # its descendants as they were when it ended

    def info(self) -> ChildInfo:
        """The registry row as of now (built from the record's own values: not validated)."""
        result, omitted = bounded(self.result) if self.result is not None else (None, 0)
        return trusted(
            ChildInfo,
            {
                "id": self.id,
                "name": self.name,
                "parent_id": self.parent_id,
                "depth": self.depth,
                "input": bounded(self.input)[0],
                "status": self.status,
                "end": self.end,
                "reason": self.reason,
                "limit": self.limit,
                "result": result,
                "omitted": omitted,
                "turns": self.turns,
                "usage": self.usage,
                "started": self.started,
                "last_activity": self.last_activity,
            },
        )


class Watcher:
    """The supervisor's subscription to one child's channel: one object, not a closure
    (a child is spawned often, and each closure is several objects for the GC)."""

    __slots__ = ("_child", "_on_event", "channel")

    def __init__(
        self, on_event: Callable[[Child, AgentChannel, ExecutionEvent], None], child: Child
    ) -> None:
        self._on_event, self._child = on_event, child
        self.channel: AgentChannel  # the child's, set as soon as it exists

    def __call__(self, event: ExecutionEvent) -> None:
        self._on_event(self._child, self.channel, event)


def post_steer(child: Child, steering: Steering) -> str | None:
    """Under the supervisor's lock: post the steer; why it was not queued, if it was not."""
    ref = child.ref
    assert ref is not None
    try:
        ref.post(steering.steer)
    except ChannelClosed:
        why = UNREAD
    except ChannelFull:
        why = "the child's channel was full (it is not reaching its boundaries)"
    else:
        return None
    child.steers.pop(steering.id, None)
    return why
