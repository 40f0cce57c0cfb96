"""agent_channel: talk to a running agent.

Every execution gets a channel. Producers hold an :class:`AgentRef` and
``post`` cooperative items (folded in at the consumer's next boundary) or
``interrupt`` (which stops the bound :meth:`AgentChannel.scope`). The consumer
loop is the only writer of its conversation; it publishes events that
producers subscribe to.
"""

# Every name loads its module when first asked for (PEP 562), so ``import agent_channel``
# defines no pydantic model: a program pays for the parts it uses, when it uses them.
# The imports below are for type checkers and IDEs only; ``__all__`` is the public API.

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._channel import (
        AgentChannel,
        AgentRef,
        Approver,
        Subscriber,
        agent_channel,
        open_channel,
    )
    from ._consume import Folded, cancelled_result, fold, repair, wait_for_message
    from ._content import (
        Content,
        ContentImage,
        ContentReasoning,
        ContentResource,
        ContentResourceLink,
        ContentText,
        content_text,
    )
    from ._conversation import Conversation, ModelCall, ToolRun
    from ._errors import AgentInterrupted, ChannelClosed, ChannelFull, NotOwner
    from ._events import (
        AwaitingInput,
        ExecutionEvent,
        ExecutionFinished,
        ItemsDrained,
        MessageAppended,
        ModelCallFinished,
        ModelCallStarted,
        ModelDelta,
        StopReason,
        ToolCallFinished,
        ToolCallStarted,
        ToolKind,
        TurnCancelled,
        TurnEnded,
        TurnStarted,
        TurnState,
        Usage,
    )
    from ._frozen import thaw
    from ._items import AnyItem, Cancel, CancelReason, ChannelItem, UserMessage, parse_item
    from ._messages import (
        ChatMessage,
        ChatMessageAssistant,
        ChatMessageSystem,
        ChatMessageTool,
        ChatMessageUser,
        ToolCall,
        new_id,
    )
    from ._regions import NullRegion, Region
    from ._snapshot import ExecutionSnapshot

__version__ = "0.2.0"

__all__ = [
    "AgentChannel",
    "AgentInterrupted",
    "AgentRef",
    "AnyItem",
    "Approver",
    "AwaitingInput",
    "Cancel",
    "CancelReason",
    "ChannelClosed",
    "ChannelFull",
    "ChannelItem",
    "ChatMessage",
    "ChatMessageAssistant",
    "ChatMessageSystem",
    "ChatMessageTool",
    "ChatMessageUser",
    "Content",
    "ContentImage",
    "ContentReasoning",
    "ContentResource",
    "ContentResourceLink",
    "ContentText",
    "Conversation",
    "ExecutionEvent",
    "ExecutionFinished",
    "ExecutionSnapshot",
    "Folded",
    "ItemsDrained",
    "MessageAppended",
    "ModelCall",
    "ModelCallFinished",
    "ModelCallStarted",
    "ModelDelta",
    "NotOwner",
    "NullRegion",
    "Region",
    "StopReason",
    "Subscriber",
    "ToolCall",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolKind",
    "ToolRun",
    "TurnCancelled",
    "TurnEnded",
    "TurnStarted",
    "TurnState",
    "Usage",
    "UserMessage",
    "agent_channel",
    "cancelled_result",
    "content_text",
    "fold",
    "new_id",
    "open_channel",
    "parse_item",
    "repair",
    "thaw",
    "wait_for_message",
]

_MODULES: dict[str, tuple[str, ...]] = {
    "_channel": (
        "AgentChannel",
        "AgentRef",
        "Approver",
        "Subscriber",
        "agent_channel",
        "open_channel",
    ),
    "_consume": ("Folded", "cancelled_result", "fold", "repair", "wait_for_message"),
    "_content": (
        "Content",
        "ContentImage",
        "ContentReasoning",
        "ContentResource",
        "ContentResourceLink",
        "ContentText",
        "content_text",
    ),
    "_conversation": ("Conversation", "ModelCall", "ToolRun"),
    "_errors": ("AgentInterrupted", "ChannelClosed", "ChannelFull", "NotOwner"),
    "_events": (
        "AwaitingInput",
        "ExecutionEvent",
        "ExecutionFinished",
        "ItemsDrained",
        "MessageAppended",
        "ModelCallFinished",
        "ModelCallStarted",
        "ModelDelta",
        "StopReason",
        "ToolCallFinished",
        "ToolCallStarted",
        "ToolKind",
        "TurnCancelled",
        "TurnEnded",
        "TurnStarted",
        "TurnState",
        "Usage",
    ),
    "_frozen": ("thaw",),
    "_items": ("AnyItem", "Cancel", "CancelReason", "ChannelItem", "UserMessage", "parse_item"),
    "_messages": (
        "ChatMessage",
        "ChatMessageAssistant",
        "ChatMessageSystem",
        "ChatMessageTool",
        "ChatMessageUser",
        "ToolCall",
        "new_id",
    ),
    "_regions": ("NullRegion", "Region"),
    "_snapshot": ("ExecutionSnapshot",),
}
_HOME = {name: module for module, names in _MODULES.items() for name in names}


if not TYPE_CHECKING:  # hidden from type checkers, so a misspelt name is still an error

    def __getattr__(name: str) -> object:
        module = _HOME.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        globals()[name] = value  # later lookups find it directly
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
