"""The model interface every adapter implements, scripted and real alike."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent_channel import ChatMessage, ChatMessageAssistant, StopReason, Usage
from pydantic import BaseModel, ConfigDict


class ToolInfo(BaseModel):
    """What a model is told about a tool: its name, description and JSON schema."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class GenerateConfig:
    """Per-call generation settings; adapters ignore what they cannot honour."""

    max_tokens: int | None = None
    temperature: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict[str, Any])
    """Passed through to the provider as extra request fields."""


class ModelOutput(BaseModel):
    """One model call's result."""

    model_config = ConfigDict(frozen=True)

    message: ChatMessageAssistant
    stop_reason: StopReason = "end_turn"
    usage: Usage | None = None


class Stream:
    """Where an adapter sends partial output while it generates.

    The loop creates one per call; ``message_id`` is the id the final
    assistant message must carry, so streamed deltas and the message that
    lands in the conversation can be matched.
    """

    __slots__ = ("_reasoning", "_text", "message_id")

    def __init__(
        self,
        message_id: str,
        text: Callable[[str], None] | None = None,
        reasoning: Callable[[str], None] | None = None,
    ) -> None:
        self.message_id = message_id
        self._text = text
        self._reasoning = reasoning

    def text(self, delta: str) -> None:
        """Report a piece of answer text."""
        if self._text is not None and delta:
            self._text(delta)

    def reasoning(self, delta: str) -> None:
        """Report a piece of reasoning."""
        if self._reasoning is not None and delta:
            self._reasoning(delta)


class Model(Protocol):
    """A chat model.

    ``generate`` returns the whole assistant message when the call is done;
    partial text goes to ``stream`` as it arrives. A cancelled call must
    release what it holds (an HTTP response, say) and let the cancellation
    propagate: the loop keeps nothing from it.

    A model that keeps a position of its own (a scripted one) may also define
    ``resume(calls: int, messages: Sequence[ChatMessage]) -> None``: the react loop calls
    it once when it restores a durable run after a crash (D4), with the run's count of
    model calls so far and its conversation.
    """

    @property
    def name(self) -> str | None: ...

    async def generate(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolInfo],
        config: GenerateConfig,
        stream: Stream,
    ) -> ModelOutput: ...
