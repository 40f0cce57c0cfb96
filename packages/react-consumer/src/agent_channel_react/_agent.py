"""The agent protocol: an async callable over an :class:`AgentState`."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ._state import AgentState


@runtime_checkable
class Agent(Protocol):
    """Anything that takes a state and returns the state it leaves behind.

    Agents find their channel ambiently (``agent_channel()``), so the protocol
    has no room for it and a plain async function is an agent.
    """

    async def __call__(self, state: AgentState, /) -> AgentState: ...
