"""The agent's state: plain data that can be saved and restored.

It never holds the channel: the channel is ambient (``agent_channel()``) and
ephemeral, so a state can be serialised at any boundary.
"""

from __future__ import annotations

from typing import Literal

from agent_channel import ChatMessage, ChatMessageAssistant, StopReason, Usage
from pydantic import BaseModel, Field

EndReason = Literal[
    "submitted",
    "answered",
    "attempts",
    "max_turns",
    "max_turn_requests",
    "message_limit",
    "token_limit",
]
"""Why a run ended: an answer was submitted or given, or a limit stopped it."""


class AgentOutput(BaseModel):
    """What a run produced."""

    message: ChatMessageAssistant | None = None
    """The last assistant message."""
    completion: str = ""
    """The answer: the submitted one, else the last assistant text."""
    stop_reason: StopReason | None = None
    """The last stop reason, in the core's vocabulary."""
    usage: Usage = Field(default_factory=Usage)
    """Token usage summed over every model call of the run."""
    end: EndReason | None = None
    """Why the run ended (``None`` while it runs)."""
    detail: str = ""
    """A sentence saying the same for people (which limit, at what value)."""


class AgentState(BaseModel):
    """A conversation and its output; the only thing an agent reads and writes."""

    messages: list[ChatMessage] = Field(default_factory=list[ChatMessage])
    output: AgentOutput = Field(default_factory=AgentOutput)


class RunProgress(BaseModel):
    """What a durable run checkpoints besides its conversation (D3), as plain JSON.

    Written at each boundary by the react loop (``AgentChannel.checkpoint``) and read back
    when the run is restored (D4); internal, versioned by ``react``.
    """

    react: Literal[1] = 1
    turns: int = 0
    """Model calls in the run (``max_turns`` counts them across restarts)."""
    requests: int = 0
    """Model calls since the last user message (``max_turn_requests``)."""
    submitted: int = 0
    """Answers submitted (``attempts``)."""
    parked: StopReason | None = None
    """Why the run was waiting for an operator message at this boundary, if it was."""
    message: str | None = None
    """The id of :attr:`AgentOutput.message` in the conversation (not stored twice)."""
    output: AgentOutput = Field(default_factory=AgentOutput)
    """The output so far (usage summed, the end once there is one), without its message."""
