"""agent_channel: talk to a running agent.

Every execution gets a channel. Producers hold an :class:`AgentRef` and
``post`` cooperative items (folded in at the consumer's next boundary) or
``interrupt`` (which stops the bound :meth:`AgentChannel.scope`). The consumer
loop is the only writer of its conversation; it publishes events that
producers subscribe to.
"""

# The public names are listed once: the block below, which type checkers and IDEs read. At
# run time every name loads its module when first asked for (PEP 562), so ``import
# agent_channel`` defines no pydantic model: a program pays for the parts it uses, when it uses
# them. The run-time table, ``__all__`` and ``__dir__`` come from the block
# (scripts/gen_names.py; tests/test_public_names.py fails while they differ).

from __future__ import annotations

import importlib
from types import FunctionType
from typing import TYPE_CHECKING

__version__ = "0.2.0"

if TYPE_CHECKING:
    from ._abc import Approver as Approver
    from ._abc import Resolver as Resolver
    from ._abc import Subscriber as Subscriber
    from ._channel import AgentChannel as AgentChannel
    from ._consume import Folded as Folded
    from ._consume import cancelled_result as cancelled_result
    from ._consume import fold as fold
    from ._consume import repair as repair
    from ._consume import wait_for_message as wait_for_message
    from ._content import Content as Content
    from ._content import ContentImage as ContentImage
    from ._content import ContentReasoning as ContentReasoning
    from ._content import ContentResource as ContentResource
    from ._content import ContentResourceLink as ContentResourceLink
    from ._content import ContentText as ContentText
    from ._content import content_text as content_text
    from ._conversation import Conversation as Conversation
    from ._conversation import ModelCall as ModelCall
    from ._conversation import ToolRun as ToolRun
    from ._errors import AgentInterrupted as AgentInterrupted
    from ._errors import ChannelClosed as ChannelClosed
    from ._errors import ChannelFull as ChannelFull
    from ._errors import NotOwner as NotOwner
    from ._errors import SpawnRefused as SpawnRefused
    from ._errors import UnknownChild as UnknownChild
    from ._events import AwaitingInput as AwaitingInput
    from ._events import ChildEnded as ChildEnded
    from ._events import ChildInfo as ChildInfo
    from ._events import ChildStarted as ChildStarted
    from ._events import ChildStatus as ChildStatus
    from ._events import ChildSteered as ChildSteered
    from ._events import ChildUpdated as ChildUpdated
    from ._events import ExecutionEvent as ExecutionEvent
    from ._events import ExecutionFinished as ExecutionFinished
    from ._events import ItemsDrained as ItemsDrained
    from ._events import MessageAppended as MessageAppended
    from ._events import ModelCallFinished as ModelCallFinished
    from ._events import ModelCallStarted as ModelCallStarted
    from ._events import ModelDelta as ModelDelta
    from ._events import StopReason as StopReason
    from ._events import StoreFailed as StoreFailed
    from ._events import ToolCallFinished as ToolCallFinished
    from ._events import ToolCallStarted as ToolCallStarted
    from ._events import ToolKind as ToolKind
    from ._events import TurnCancelled as TurnCancelled
    from ._events import TurnEnded as TurnEnded
    from ._events import TurnStarted as TurnStarted
    from ._events import TurnState as TurnState
    from ._events import Usage as Usage
    from ._execution import agent_channel as agent_channel
    from ._execution import open_channel as open_channel
    from ._frozen import thaw as thaw
    from ._items import Announce as Announce
    from ._items import AnyItem as AnyItem
    from ._items import Cancel as Cancel
    from ._items import CancelReason as CancelReason
    from ._items import ChannelItem as ChannelItem
    from ._items import ChildEnd as ChildEnd
    from ._items import LimitName as LimitName
    from ._items import Steer as Steer
    from ._items import UserMessage as UserMessage
    from ._items import parse_item as parse_item
    from ._loading import load_spec as load_spec
    from ._messages import ChatMessage as ChatMessage
    from ._messages import ChatMessageAssistant as ChatMessageAssistant
    from ._messages import ChatMessageSystem as ChatMessageSystem
    from ._messages import ChatMessageTool as ChatMessageTool
    from ._messages import ChatMessageUser as ChatMessageUser
    from ._messages import ToolCall as ToolCall
    from ._messages import new_id as new_id
    from ._ref import AgentRef as AgentRef
    from ._regions import NullRegion as NullRegion
    from ._regions import Region as Region
    from ._snapshot import ExecutionSnapshot as ExecutionSnapshot
    from ._store import ExecutionStatus as ExecutionStatus
    from ._store import Journal as Journal
    from ._store import Restored as Restored
    from ._store import Store as Store
    from ._store import StoreBusy as StoreBusy
    from ._store import StoredExecution as StoredExecution
    from ._store import StoreError as StoreError
    from ._stores import open_store as open_store
    from .children import ChildBody as ChildBody
    from .children import ChildControl as ChildControl
    from .children import ChildLimits as ChildLimits
    from .children import ChildToolCall as ChildToolCall
    from .children import Steering as Steering
    from .children import SteerOutcome as SteerOutcome
    from .children import Supervisor as Supervisor
    from .children import agent_supervisor as agent_supervisor
    from .children import open_supervisor as open_supervisor
    from .questions import Answer as Answer
    from .questions import Question as Question
    from .questions import QuestionField as QuestionField
    from .questions import ask_user as ask_user
else:  # hidden from type checkers, so a misspelt name is still an error
    # <names> written by scripts/gen_names.py from the block above: edit that, then run it
    _HOME = {
        "Approver": "_abc",
        "Resolver": "_abc",
        "Subscriber": "_abc",
        "AgentChannel": "_channel",
        "Folded": "_consume",
        "cancelled_result": "_consume",
        "fold": "_consume",
        "repair": "_consume",
        "wait_for_message": "_consume",
        "Content": "_content",
        "ContentImage": "_content",
        "ContentReasoning": "_content",
        "ContentResource": "_content",
        "ContentResourceLink": "_content",
        "ContentText": "_content",
        "content_text": "_content",
        "Conversation": "_conversation",
        "ModelCall": "_conversation",
        "ToolRun": "_conversation",
        "AgentInterrupted": "_errors",
        "ChannelClosed": "_errors",
        "ChannelFull": "_errors",
        "NotOwner": "_errors",
        "SpawnRefused": "_errors",
        "UnknownChild": "_errors",
        "AwaitingInput": "_events",
        "ChildEnded": "_events",
        "ChildInfo": "_events",
        "ChildStarted": "_events",
        "ChildStatus": "_events",
        "ChildSteered": "_events",
        "ChildUpdated": "_events",
        "ExecutionEvent": "_events",
        "ExecutionFinished": "_events",
        "ItemsDrained": "_events",
        "MessageAppended": "_events",
        "ModelCallFinished": "_events",
        "ModelCallStarted": "_events",
        "ModelDelta": "_events",
        "StopReason": "_events",
        "StoreFailed": "_events",
        "ToolCallFinished": "_events",
        "ToolCallStarted": "_events",
        "ToolKind": "_events",
        "TurnCancelled": "_events",
        "TurnEnded": "_events",
        "TurnStarted": "_events",
        "TurnState": "_events",
        "Usage": "_events",
        "agent_channel": "_execution",
        "open_channel": "_execution",
        "thaw": "_frozen",
        "Announce": "_items",
        "AnyItem": "_items",
        "Cancel": "_items",
        "CancelReason": "_items",
        "ChannelItem": "_items",
        "ChildEnd": "_items",
        "LimitName": "_items",
        "Steer": "_items",
        "UserMessage": "_items",
        "parse_item": "_items",
        "load_spec": "_loading",
        "ChatMessage": "_messages",
        "ChatMessageAssistant": "_messages",
        "ChatMessageSystem": "_messages",
        "ChatMessageTool": "_messages",
        "ChatMessageUser": "_messages",
        "ToolCall": "_messages",
        "new_id": "_messages",
        "AgentRef": "_ref",
        "NullRegion": "_regions",
        "Region": "_regions",
        "ExecutionSnapshot": "_snapshot",
        "ExecutionStatus": "_store",
        "Journal": "_store",
        "Restored": "_store",
        "Store": "_store",
        "StoreBusy": "_store",
        "StoredExecution": "_store",
        "StoreError": "_store",
        "open_store": "_stores",
        "ChildBody": "children",
        "ChildControl": "children",
        "ChildLimits": "children",
        "ChildToolCall": "children",
        "Steering": "children",
        "SteerOutcome": "children",
        "Supervisor": "children",
        "agent_supervisor": "children",
        "open_supervisor": "children",
        "Answer": "questions",
        "Question": "questions",
        "QuestionField": "questions",
        "ask_user": "questions",
    }
    # </names>
    __all__ = sorted(_HOME)

    def __getattr__(name: str) -> object:
        module = _HOME.get(name)
        if module is None:
            if name in _DEPRECATED:
                return _moved(name)
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        loaded = importlib.import_module(f"{__name__}.{module}")
        here = globals()
        for public, home in _HOME.items():  # the module's other public names too, at once
            if home == module:
                value = getattr(loaded, public)
                # Reprs, help() and pickles say agent_channel.AgentRef, wherever it lives; but
                # not for a class with annotations: typing.get_type_hints reads them there.
                if value.__module__.startswith(loaded.__name__) and (
                    isinstance(value, FunctionType)
                    or (isinstance(value, type) and "__annotations__" not in vars(value))
                ):
                    value.__module__ = __name__
                here[public] = value  # later lookups find it directly
        return here[name]

    # Names that moved to another distribution: they still work, for one minor version
    # (until 0.3), with a DeprecationWarning naming the new import; never in __all__. The
    # distribution is imported by name, so the core holds no import of it.
    _DEPRECATED = {
        "SqliteStore": "agent_channel_sqlite",
        "default_store_path": "agent_channel_sqlite",
    }
    _INSTALL = {  # spelled out: tests/test_install_hints.py checks each command
        "agent_channel_sqlite": "agent-channel-sqlite: `pip install ./packages/channel-core"
        " ./packages/store-sqlite` at the root of a clone (once published, `pip install"
        " agent-channel-sqlite`)",
    }

    def _moved(name: str) -> object:
        import warnings

        home = _DEPRECATED[name]
        warnings.warn(
            f"agent_channel.{name} moved to its own distribution: use `from {home} import"
            f" {name}` (the old name goes in agent-channel-core 0.3)",
            DeprecationWarning,
            stacklevel=3,
        )
        try:
            loaded = importlib.import_module(home)
        except ImportError as e:
            if e.name != home:  # installed, and broken: its own error says more
                raise
            raise ImportError(
                f"agent_channel.{name} moved to {_INSTALL[home]}; then `from {home} import {name}`",
                name=home,
            ) from e
        return getattr(loaded, name)

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
