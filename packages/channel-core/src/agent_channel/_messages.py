"""Chat message shapes that consumers write and producers read.

Messages are frozen and their sequences are tuples: a producer that receives a
message in an event holds a snapshot it cannot change under the consumer.
"""

from __future__ import annotations

from os import urandom
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._content import Content, content_text
from ._frozen import FrozenJsonObject, freeze


def new_id() -> str:
    """A short random identifier: 16 hex digits from the OS's random source.

    As random as ``uuid4().hex[:16]`` was (64 bits, not 60: no version digit), without
    building a UUID, at a quarter of the cost: every item and message gets one.
    """
    return urandom(8).hex()


_NO_ARGUMENTS = freeze({})
"""Defaults are never validated, so the empty default is frozen here (shared: it is read-only)."""


class ToolCall(BaseModel):
    """A model's request to run a tool."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    id: str
    name: str
    arguments: FrozenJsonObject = Field(default_factory=lambda: _NO_ARGUMENTS)


class _Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    id: str = Field(default_factory=new_id)
    content: str | tuple[Content, ...] = ""

    @property
    def text(self) -> str:
        """The message's plain text."""
        return content_text(self.content)


class ChatMessageSystem(_Message):
    """Instructions for the model."""

    role: Literal["system"] = "system"


class ChatMessageUser(_Message):
    """A user turn; ``source`` says who wrote it (``"operator"``, ``"task"`` ...)."""

    role: Literal["user"] = "user"
    source: str | None = None


class ChatMessageAssistant(_Message):
    """A model turn, with the tool calls it asked for."""

    role: Literal["assistant"] = "assistant"
    tool_calls: tuple[ToolCall, ...] = ()
    model: str | None = None


class ChatMessageTool(_Message):
    """The result of one tool call; ``error`` is set when the call failed or was cancelled."""

    role: Literal["tool"] = "tool"
    tool_call_id: str
    function: str | None = None
    error: str | None = None


ChatMessage = Annotated[
    ChatMessageSystem | ChatMessageUser | ChatMessageAssistant | ChatMessageTool,
    Field(discriminator="role"),
]
"""Any chat message."""
