"""The consumer facade: turning drained items into conversation edits.

A loop drains at its boundaries and calls :func:`fold`; after an interrupt it
calls :func:`repair` so the next model call sees a well-formed conversation
(:func:`cancelled_result` after one tool call a producer stopped alone), and
:func:`wait_for_message` to park until the operator says what to do next.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ._channel import AgentChannel
from ._content import Content, ContentText
from ._events import AwaitingInput, StopReason
from ._items import Announce, Cancel, CancelReason, ChannelItem, Steer, UserMessage
from ._messages import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageTool,
    ChatMessageUser,
    ToolCall,
)

_REPAIR_TEXT: dict[CancelReason, str] = {
    "user_cancel": "Tool call cancelled by the operator.",
    "limit": "Tool call cancelled by a limit.",
    "system": "Tool call cancelled by the system.",
}


@dataclass(frozen=True, slots=True)
class Folded:
    """What a batch of drained items means for the conversation."""

    messages: list[ChatMessageUser] = field(default_factory=list[ChatMessageUser])
    """User messages to append, consecutive ones from one source already joined."""
    cancel: Cancel | None = None
    """The last Cancel in the batch, if any."""
    other: list[ChannelItem] = field(default_factory=list[ChannelItem])
    """Items of types this facade does not know (added by other packages)."""


def fold(items: Iterable[ChannelItem]) -> Folded:
    """Coalesce runs of messages from one source into one user message (blank line between).

    Cancels do not break a run: they are control, not conversation. A :class:`Steer` reads
    as a message from its ``source`` (``"parent"``, ``"operator"``), an :class:`Announce`
    as one from ``"child"`` naming the child, how it ended and its result.
    """
    runs: list[list[UserMessage]] = []
    cancel: Cancel | None = None
    other: list[ChannelItem] = []
    for item in items:
        if isinstance(item, UserMessage):
            message = item
        elif isinstance(item, Cancel):
            cancel = item
            continue
        elif isinstance(item, Steer):
            message = UserMessage(item.content, id=item.id, source=item.source)
        elif isinstance(item, Announce):
            message = UserMessage(item.text, id=item.id, source="child")
        else:
            other.append(item)
            continue
        if runs and runs[-1][0].source == message.source:
            runs[-1].append(message)
        else:
            runs.append([message])
    return Folded([_join(run) for run in runs], cancel, other)


def _join(run: list[UserMessage]) -> ChatMessageUser:
    first = run[0]
    if len(run) == 1:
        return ChatMessageUser(id=first.id, content=first.content, source=first.source)
    if all(isinstance(m.content, str) for m in run):
        content: str | tuple[Content, ...] = "\n\n".join(m.text for m in run)
    else:
        parts: list[Content] = []
        for i, m in enumerate(run):
            if i:
                parts.append(ContentText(text="\n\n"))
            parts.extend(m.parts)
        content = _merge_text(parts)
    return ChatMessageUser(id=first.id, content=content, source=first.source)


def _merge_text(parts: list[Content]) -> tuple[Content, ...]:
    merged: list[Content] = []
    for p in parts:
        prev = merged[-1] if merged else None
        if isinstance(p, ContentText) and isinstance(prev, ContentText):
            merged[-1] = ContentText(text=prev.text + p.text)
        else:
            merged.append(p)
    return tuple(merged)


def repair(
    messages: Sequence[ChatMessage], reason: CancelReason = "user_cancel"
) -> list[ChatMessageTool]:
    """Synthetic results for every tool call of the conversation left without one.

    Append them so the next model call is well-formed after an interrupt: each call then
    has exactly one result. The calls an interrupt leaves open are the last assistant
    message's; one of an earlier message was left open by the body (a call stopped alone
    in its region, without :func:`cancelled_result` appended). That is answered here too,
    after the later messages, and warned of: a :class:`RuntimeWarning` attributed to the
    line that called ``repair``, which Python's default filter shows once per such line, on
    stderr (``logging.captureWarnings(True)`` sends it to the ``py.warnings`` logger; ``-W
    error::RuntimeWarning`` makes it an error in a test suite).
    """
    answered = {m.tool_call_id for m in messages if isinstance(m, ChatMessageTool)}
    last = max(
        (i for i, m in enumerate(messages) if isinstance(m, ChatMessageAssistant)), default=-1
    )
    out: list[ChatMessageTool] = []
    earlier = False
    for i, m in enumerate(messages):
        if not isinstance(m, ChatMessageAssistant):
            continue
        for call in m.tool_calls:
            if call.id in answered:
                continue
            answered.add(call.id)  # one result, even for an id given twice
            out.append(
                ChatMessageTool(
                    tool_call_id=call.id,
                    function=call.name,
                    content=_REPAIR_TEXT[reason],
                    error="cancelled",
                )
            )
            earlier = earlier or i != last
    if earlier:
        warnings.warn(_UNANSWERED, RuntimeWarning, stacklevel=2)
    return out


_UNANSWERED = (
    "repair() answered a tool call left without a result before the last model step: a body "
    "that stops a call in its region must append cancelled_result(call) then (the model was "
    "called with the call unanswered)"
)
"""One text, so Python's default filter shows it once per place that calls repair."""


def cancelled_result(call: ToolCall) -> ChatMessageTool:
    """The result of ``call`` after a producer stopped it alone: append it, the turn goes on.

    Run a tool inside ``with channel.region(call.id) as region:`` and an operator can stop
    that one call (:meth:`AgentRef.cancel_region`, an editor's "cancel this tool"). The
    stop ends the region's body, so the call is left without a result; when
    ``region.cancelled`` is true, append this one so the next model call is well formed
    and the model reads why.
    """
    return ChatMessageTool(
        tool_call_id=call.id,
        function=call.name,
        content=_REPAIR_TEXT["user_cancel"],
        error="cancelled",
    )


async def wait_for_message(channel: AgentChannel, stop_reason: StopReason = "end_turn") -> Folded:
    """Park until a message (or an unknown item) arrives; a Cancel meanwhile does not end it.

    Publishes :class:`AwaitingInput` first, so producers know the agent is idle
    and why it stopped.
    """
    if channel.observed:
        channel.publish(AwaitingInput(stop_reason=stop_reason))
    # receive() drops Cancels (no turn to stop); `awaiting` is for a late watcher's snapshot,
    # set in this same step as the event, so no watcher sees one without the other
    return fold(await channel.receive(awaiting=stop_reason))
