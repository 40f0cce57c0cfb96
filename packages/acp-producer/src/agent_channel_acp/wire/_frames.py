"""The shapes of the JSON the producer and its clients exchange beside the ACP schema.

``TypedDict``s for the ``_agent_channel/*`` extension requests, their answers and
notifications (docs/acp-behaviour.md A19-A26), for the JSON-RPC frames the verbs' small
client (:mod:`._rpc`) builds and reads, and for the few ``session/update`` payloads the
stream builds itself instead of through the SDK's schema (the hot ones: text chunks, a
tool call's end). The stream builds these shapes and the verbs read them: one definition
keeps the two sides in agreement. Types only: no ``acp`` and no pydantic here, so the
verbs, which import this, still start without the SDK.

A frame read off the wire is cast to its shape once its outer object is checked: the shapes
say what our server sends, and readers still use ``.get`` for the keys an older server
may leave out (``NotRequired``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NotRequired, TypeAlias, TypedDict

JsonValue: TypeAlias = "str | int | float | bool | list[JsonValue] | dict[str, JsonValue] | None"
JsonObject: TypeAlias = "dict[str, JsonValue]"

# -- JSON-RPC 2.0 ------------------------------------------------------------------------


class ErrorBody(TypedDict):
    code: int
    message: str
    data: NotRequired[JsonValue]


class Frame(TypedDict, total=False):
    """Any JSON-RPC frame as read: a request, a notification or an answer."""

    jsonrpc: str
    id: int | str | None
    method: str
    params: JsonObject
    result: JsonValue
    error: ErrorBody


class ErrorFrame(TypedDict):
    """An error answer as a listener writes it before any protocol code runs."""

    jsonrpc: Literal["2.0"]
    id: int | str | None
    error: ErrorBody


class Outgoing(TypedDict, total=False):
    """A frame the verbs' client writes (``jsonrpc`` is added on the way out)."""

    id: int | str | None
    method: str
    params: Mapping[str, object]


# -- discovery records -------------------------------------------------------------------


class UnixTransport(TypedDict):
    kind: Literal["unix"]
    path: str


class TcpTransport(TypedDict):
    kind: Literal["tcp"]
    host: str
    port: int
    token: NotRequired[str]


class WsTransport(TypedDict):
    """A WebSocket listener (``serve --ws``): its ``ws://`` or ``wss://`` url, and the token."""

    kind: Literal["ws"]
    url: str
    token: NotRequired[str]
    cafile: NotRequired[str]
    """A client's own: the CA file to trust for ``wss://`` (never in a record)."""


Transport: TypeAlias = UnixTransport | TcpTransport | WsTransport
"""Where a server listens, as its discovery record says (or a ``--server`` url names)."""


class RecordFile(TypedDict):
    """A discovery record's file (``_discovery.Record.to_json``)."""

    version: int
    pid: int
    pid_start: int | None
    started_at: float
    transport: Transport
    executions: list[Recorded]
    ws: NotRequired[WsTransport]


class Recorded(TypedDict, total=False):
    """What a discovery record keeps of each execution (clients ask the server the rest)."""

    id: str
    title: str
    status: str


# -- _agent_channel/list (A24) -----------------------------------------------------------


class RunningToolCall(TypedDict):
    id: str
    title: str
    kind: str


class PendingQuestion(TypedDict):
    """The model's oldest question waiting for an answer (Q4; the ``answer`` verb answers it)."""

    id: str
    text: str
    choices: list[str]
    childId: str | None


class PendingApproval(TypedDict):
    """A tool call waiting for an operator's approval (A20, K9): an entry of ``list``."""

    toolCallId: str
    title: str
    childId: NotRequired[str]
    """The child (or grandchild) whose call it is; absent for the execution's own."""


class Execution(TypedDict):
    """One execution a server holds: an entry of ``list``, of discovery records, of the
    picker's ``_meta``."""

    id: str
    title: str
    status: str
    turnState: str
    messageCount: int
    pendingApproval: str | None
    """The oldest tool call waiting for an operator's approval (readers test it for truth)."""
    pendingApprovals: NotRequired[list[PendingApproval]]
    """Every tool call waiting for an operator's approval, the execution's and its
    children's, oldest first."""
    queued: int
    drivable: bool
    clients: int
    started: float
    runningToolCalls: NotRequired[list[RunningToolCall]]
    children: NotRequired[list[ChildEntry]]
    pendingQuestion: NotRequired[PendingQuestion]
    restored: NotRequired[float]
    """When a server restarted on its store restored it (``time.time()``)."""


class ServerAbout(TypedDict):
    """The server itself, in a ``list`` answer: what a client reaching it over a network
    cannot read from a discovery record of its own."""

    pid: int
    """Its process id, on its own host."""
    startedAt: float
    """When it started serving (``time.time()``; its discovery record's ``started_at``)."""
    store: str | None
    """The store file that keeps its executions (an absolute path on its host), or None."""


class ListResult(TypedDict):
    executions: list[Execution]
    server: NotRequired[ServerAbout]
    """Absent from a server older than it."""


# -- _agent_channel/messages (A19) -------------------------------------------------------


class MessagesParams(TypedDict):
    sessionId: str
    childId: NotRequired[str]
    all: NotRequired[bool]
    tail: NotRequired[int]
    full: NotRequired[bool]


class MessageSummary(TypedDict):
    """A message as ``messages`` gives it without ``full`` (with it: the whole message)."""

    id: str
    role: str
    text: str
    toolCalls: NotRequired[list[str]]
    toolCallIds: NotRequired[list[str]]
    source: NotRequired[str]
    toolCallId: NotRequired[str]


class MessagesResult(TypedDict):
    as_of: str
    sessionId: str
    childId: NotRequired[str]
    status: str
    count: int
    messages: list[JsonObject]


# -- the operator queue (A25) ------------------------------------------------------------


class Queued(TypedDict):
    """A message waiting for the agent to read it."""

    id: str
    text: str
    client: str
    time: float


class SessionParams(TypedDict):
    """``queue`` and ``cancel_turn`` take the session alone."""

    sessionId: str


class QueueResult(TypedDict):
    sessionId: str
    messages: list[Queued]


class WithdrawParams(TypedDict):
    sessionId: str
    messageId: str


class WithdrawResult(TypedDict):
    withdrawn: bool


# -- cancelling and ending (A22, A23) -----------------------------------------------------


class CancelToolCallParams(TypedDict):
    sessionId: str
    toolCallId: str


NotCancelled: TypeAlias = Literal["not_in_region", "cancelling", "finished", "unknown", "gone"]


class CancelResult(TypedDict):
    """The answer of ``cancel_tool_call`` (reason: a :data:`NotCancelled`) and of
    ``cancel_turn`` (reason: the execution's status)."""

    cancelled: bool
    reason: NotRequired[str]


class EndParams(TypedDict):
    sessionId: str
    reason: NotRequired[str]


class EndResult(TypedDict):
    pass


# -- children (K11, K12) -------------------------------------------------------------------


class ChildEntry(TypedDict):
    """One child below an execution, as its supervisor last reported it (``children``, the
    list's ``children``, a child card's ``_meta``). Tree order: each child is followed by
    its own (``parentId`` and ``depth`` place it)."""

    id: str
    name: str
    parentId: str | None
    depth: int
    status: str
    """``running``, ``waiting`` (for input) or ``ended``."""
    end: str | None
    """How it ended: ``completed``, ``failed``, ``killed``, ``limit``, ``parent_ended``."""
    reason: str | None
    result: str | None
    turns: int
    tokens: int
    started: float
    lastActivity: float


class ChildrenParams(TypedDict):
    sessionId: str


class ChildrenResult(TypedDict):
    sessionId: str
    children: list[ChildEntry]


class SteerChildParams(TypedDict):
    sessionId: str
    childId: str
    text: str


SteerOutcome: TypeAlias = Literal["pending", "delivered", "undelivered"]


class SteerChildResult(TypedDict):
    """``pending`` when the child had not read it yet when the answer went (its card and
    the ``children`` notification tell the rest)."""

    steerId: str
    outcome: SteerOutcome
    seq: NotRequired[int]
    reason: NotRequired[str]


class StopChildParams(TypedDict):
    sessionId: str
    childId: str
    reason: NotRequired[str]


class StopChildResult(TypedDict):
    """``stopped`` false: it had ended (or was ending) already; ``status`` says how it stands."""

    stopped: bool
    status: str


DebugCounts: TypeAlias = dict[str, int]
"""``_agent_channel/debug`` (with ``AGENT_CHANNEL_ACP_DEBUG=1``): live counts by name."""

# -- notifications (each also carries ``sessionId``) -------------------------------------


class TurnStateNote(TypedDict):
    sessionId: NotRequired[str]
    state: str


class QueueNote(TypedDict):
    sessionId: NotRequired[str]
    messages: list[Queued]


class Undelivered(TypedDict):
    """A message the agent never read (A17): told, never dropped silently."""

    id: str
    text: str
    source: str | None
    client: NotRequired[str]
    time: NotRequired[float]


class SessionEndedNote(TypedDict):
    sessionId: NotRequired[str]
    stopReason: str | None
    undelivered: list[Undelivered]
    error: NotRequired[str]


class ChildrenNote(TypedDict):
    sessionId: NotRequired[str]
    children: list[ChildEntry]


class DroppedNote(TypedDict):
    sessionId: NotRequired[str]
    reason: str


# -- session/update payloads built without the SDK's schema ------------------------------


class TextBlock(TypedDict):
    type: Literal["text"]
    text: str


class ChunkUpdate(TypedDict):
    """An ``agent_message_chunk`` or ``agent_thought_chunk``: streamed text."""

    sessionUpdate: Literal["agent_message_chunk", "agent_thought_chunk"]
    content: TextBlock
    messageId: str
    _meta: NotRequired[dict[str, object]]


class ToolContent(TypedDict):
    type: Literal["content"]
    content: TextBlock


class ToolCallEnd(TypedDict):
    """The ``tool_call_update`` that ends a call (ACP has no ``cancelled`` status)."""

    sessionUpdate: Literal["tool_call_update"]
    toolCallId: str
    status: Literal["completed", "failed"]
    content: NotRequired[list[ToolContent]]


class UsageUpdate(TypedDict):
    sessionUpdate: Literal["usage_update"]
    used: int
    size: int


class SessionInfoUpdate(TypedDict):
    sessionUpdate: Literal["session_info_update"]
    title: str
