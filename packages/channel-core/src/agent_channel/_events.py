"""What an execution publishes: the event vocabulary producers render.

Events are frozen pydantic models. The consumer publishes them through its
channel; producers receive them through :meth:`AgentRef.subscribe`. Nothing
here names a particular consumer or producer.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._frozen import FrozenJsonObject
from ._items import AnyItem, Cancel, ChildEnd, LimitName
from ._messages import ChatMessage, ChatMessageAssistant

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]
"""Why a stretch of work stopped; the same words ACP uses, none of them ACP-specific."""

TurnState = Literal["idle", "started", "ended", "cancelled"]
"""The execution's last turn transition, always the one its last turn event announced.

``idle``: no turn yet; ``started``: a scope was entered (:class:`TurnStarted`);
``ended``: a scope exited without an interrupt (:class:`TurnEnded`); ``cancelled``:
this channel's interrupt stopped a scope, stopped one as it was entered, or was
taken by a ``drain()`` at a boundary (:class:`TurnCancelled`).
"""


class Usage(BaseModel):
    """Token counts of one model call (or a sum of several)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    reasoning_tokens: int | None = None

    def __add__(self, other: Usage) -> Usage:
        r = (
            None
            if self.reasoning_tokens is None and other.reasoning_tokens is None
            else (self.reasoning_tokens or 0) + (other.reasoning_tokens or 0)
        )
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            reasoning_tokens=r,
        )


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class TurnStarted(_Event):
    """A scope was entered: interruptible work began."""

    type: Literal["turn_started"] = "turn_started"


class TurnEnded(_Event):
    """A scope exited without being interrupted.

    ``error`` is ``None`` when it exited normally; otherwise it names what left it
    (``"ValueError: ..."``, or ``"cancelled"`` for outer cancellation such as a deadline).
    """

    type: Literal["turn_ended"] = "turn_ended"
    error: str | None = None


class TurnCancelled(_Event):
    """A scope was stopped by this channel's interrupt."""

    type: Literal["turn_cancelled"] = "turn_cancelled"
    cancel: Cancel


class ItemsDrained(_Event):
    """The consumer took these items off the queue (they reached it)."""

    type: Literal["items_drained"] = "items_drained"
    items: tuple[AnyItem, ...]


class MessageAppended(_Event):
    """A message became part of the conversation, at ``index``."""

    type: Literal["message_appended"] = "message_appended"
    message: ChatMessage
    index: int


class ModelCallStarted(_Event):
    """A model call began."""

    type: Literal["model_call_started"] = "model_call_started"
    call_id: str
    model: str | None = None


class ModelDelta(_Event):
    """A streamed piece of a model call's output; ``message_id`` is stable per message."""

    type: Literal["model_delta"] = "model_delta"
    call_id: str
    message_id: str
    kind: Literal["text", "reasoning"]
    text: str


class ModelCallFinished(_Event):
    """A model call ended; ``cancelled`` calls carry no message (nothing partial is kept)."""

    type: Literal["model_call_finished"] = "model_call_finished"
    call_id: str
    message: ChatMessageAssistant | None = None
    stop_reason: StopReason | None = None
    usage: Usage | None = None
    cancelled: bool = False
    error: str | None = None


ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]


class ToolCallStarted(_Event):
    """A tool call is about to run."""

    type: Literal["tool_call_started"] = "tool_call_started"
    tool_call_id: str
    name: str
    arguments: FrozenJsonObject
    title: str | None = None
    kind: ToolKind = "other"


class ToolCallFinished(_Event):
    """A tool call ended: ``completed``, ``failed`` (an error) or ``cancelled``."""

    type: Literal["tool_call_finished"] = "tool_call_finished"
    tool_call_id: str
    name: str
    status: Literal["completed", "failed", "cancelled"]
    content: str = ""
    error: str | None = None


class AwaitingInput(_Event):
    """The consumer parked until a message arrives; ``stop_reason`` says why it stopped."""

    type: Literal["awaiting_input"] = "awaiting_input"
    stop_reason: StopReason = "end_turn"


class StoreFailed(_Event):
    """The execution's store stopped taking its writes (a full disk, a broken file): it goes
    on in memory and will not survive a restart. Published once (see ``docs/durability.md``)."""

    type: Literal["store_failed"] = "store_failed"
    reason: str


class ExecutionFinished(_Event):
    """The execution ended; ``undelivered`` lists items nobody drained."""

    type: Literal["execution_finished"] = "execution_finished"
    stop_reason: StopReason | None = None
    undelivered: tuple[AnyItem, ...] = ()
    error: str | None = None


ChildStatus = Literal["running", "waiting", "ended"]
"""A child's state: at work, parked waiting for input (it published :class:`AwaitingInput`),
or over (then :attr:`ChildInfo.end` says how)."""


class ChildInfo(BaseModel):
    """One child execution as its supervisor knows it: a registry row, and what child events
    carry. Frozen: a snapshot of the moment it was taken."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    id: str
    name: str
    parent_id: str | None = None
    """The child that spawned this one; ``None`` when the top-level execution did."""
    depth: int = 1
    """Levels below the top-level execution: its children are at 1."""
    input: str = ""
    """The input it was given (bounded, as ``result`` is)."""
    status: ChildStatus = "running"
    end: ChildEnd | None = None
    reason: str | None = None
    """Why it was killed, what it raised, or the limit it reached."""
    limit: LimitName | None = None
    result: str | None = None
    """Its result, bounded; :meth:`Supervisor.result` has all of it."""
    omitted: int = 0
    """Characters of the result not carried here."""
    turns: int = 0
    """Scopes it entered (:class:`TurnStarted` events): a ReAct loop enters one per turn."""
    usage: Usage = Field(default_factory=Usage)
    """Tokens its model calls reported (:class:`ModelCallFinished` ``usage``), summed."""
    started: float = 0.0
    """When it was spawned (``time.time()``)."""
    last_activity: float = 0.0
    """When it last published an event (``time.time()``)."""


class ChildStarted(_Event):
    """This execution spawned a child (or a descendant did: see ``child.parent_id``)."""

    type: Literal["child_started"] = "child_started"
    child: ChildInfo


class ChildUpdated(_Event):
    """A child's progress: its status, turn count or usage changed."""

    type: Literal["child_updated"] = "child_updated"
    child: ChildInfo


class ChildSteered(_Event):
    """A steer for a child was queued, then delivered (drained by the child) or undelivered.

    ``seq`` is the number of the child's :class:`ItemsDrained` event that carried it (a
    child's events are counted from 0, as :attr:`ExecutionSnapshot.seq` counts them).
    """

    type: Literal["child_steered"] = "child_steered"
    child_id: str
    steer_id: str
    source: str
    outcome: Literal["queued", "delivered", "undelivered"]
    seq: int | None = None
    reason: str | None = None


class ChildEnded(_Event):
    """A child ended; ``child.end`` says how. Its :class:`Announce` went to this channel."""

    type: Literal["child_ended"] = "child_ended"
    child: ChildInfo


ExecutionEvent = Annotated[
    TurnStarted
    | TurnEnded
    | TurnCancelled
    | ItemsDrained
    | MessageAppended
    | ModelCallStarted
    | ModelDelta
    | ModelCallFinished
    | ToolCallStarted
    | ToolCallFinished
    | AwaitingInput
    | ExecutionFinished
    | StoreFailed
    | ChildStarted
    | ChildUpdated
    | ChildSteered
    | ChildEnded,
    Field(discriminator="type"),
]
"""Any event an execution publishes."""
