"""The link's pieces on the SDK's client side: a reader that folds the stream, the handler.

Kept apart from :mod:`._link` (the connection's life: find, bind, reconnect, requests) because
they are what the SDK calls: the reader under its line loop, the handler for requests.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Protocol

from acp import RequestError
from acp.schema import (
    AcceptElicitationResponse,
    AgentMessageChunk,
    AgentPlanContentUpdate,
    AgentPlanRemovedUpdate,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AllowedOutcome,
    AvailableCommandsUpdate,
    CancelElicitationResponse,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    DeclineElicitationResponse,
    DeniedOutcome,
    PermissionOption,
    RequestPermissionResponse,
    SessionInfoUpdate,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    UsageUpdate,
    UserMessageChunk,
)
from pydantic import BaseModel

if TYPE_CHECKING:
    from collections.abc import Sized

    from typing_extensions import Buffer

    from ...wire._frames import JsonObject
    from ._link import Link

QUESTION_ID = "agent_channel.questionId"
"""An ``elicitation/create`` request's ``_meta`` key naming the model's question."""
READ_SLICE = 0.005
"""Seconds the link may read the socket without letting the console's loop run."""

if TYPE_CHECKING:

    class _Separator(Buffer, Sized, Protocol):
        """What ``StreamReader.readuntil`` takes (typeshed's private ``_ReaduntilBuffer``)."""


SessionUpdate = (
    UserMessageChunk
    | AgentMessageChunk
    | AgentThoughtChunk
    | ToolCallStart
    | ToolCallProgress
    | AgentPlanUpdate
    | AgentPlanContentUpdate
    | AgentPlanRemovedUpdate
    | AvailableCommandsUpdate
    | CurrentModeUpdate
    | ConfigOptionUpdate
    | SessionInfoUpdate
    | UsageUpdate
)
"""What the SDK's ``Client.session_update`` takes (the link folds the stream before it)."""


def dump(model: ToolCallUpdate | PermissionOption) -> JsonObject:
    """An SDK model as the JSON the wire carries (camelCase, no nulls)."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


class Reader(asyncio.StreamReader):
    """The link's socket reader: folds the stream itself and lets the event loop run.

    The SDK reads a line at a time and never yields while the buffer holds one, so a fast
    stream starved the console's screen (two frames a second under 5,000 chunks a
    second); and for each notification it validates a model and starts a task, which cost
    more than the fold. So ``session/update`` and ``_agent_channel/*`` notifications are
    folded here, in wire order, straight from their JSON, and only the rest (responses,
    requests) goes on to the SDK. After :data:`READ_SLICE` of reading the loop runs."""

    def __init__(self, link: Link) -> None:
        super().__init__(limit=1 << 24)
        self._link = link
        self._since = 0.0

    async def _turn(self) -> None:
        if (now := time.monotonic()) - self._since >= READ_SLICE:
            self._since = now
            await asyncio.sleep(0)

    async def readuntil(self, separator: _Separator = b"\n") -> bytes:
        while True:
            await self._turn()
            line = await super().readuntil(separator)
            if not self._link.fold(line):
                return line

    async def readexactly(self, n: int) -> bytes:
        await self._turn()
        return await super().readexactly(n)

    @property
    def backlog(self) -> int:
        """Bytes received and not folded yet."""
        return len(self._buffer)  # pyright: ignore[reportAttributeAccessIssue, reportUnknownArgumentType, reportUnknownMemberType]


class Handler:
    """The client side's handler: permission requests to the UI (the stream is folded by
    :class:`Reader` before the SDK sees it)."""

    def __init__(self, link: Link) -> None:
        self._link = link

    async def session_update(
        self, session_id: str, update: SessionUpdate, **kwargs: object
    ) -> None:
        return None

    async def ext_notification(self, method: str, params: dict[str, object]) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, object]) -> dict[str, object]:
        raise RequestError.method_not_found(f"_{method}")

    async def create_elicitation(
        self, message: str, mode: object, **kwargs: object
    ) -> AcceptElicitationResponse | DeclineElicitationResponse | CancelElicitationResponse:
        """The model's question as a form (Q2): shown until the operator answers it."""
        found: BaseModel | None = getattr(mode, "requested_schema", None)
        schema: JsonObject = (
            found.model_dump(mode="json", by_alias=True, exclude_none=True) if found else {}
        )
        question_id = str(kwargs.get(QUESTION_ID) or "")
        action, content = await self._link.form(question_id, message, schema)
        if action == "accept":
            return AcceptElicitationResponse(action="accept", content=content)
        if action == "decline":
            return DeclineElicitationResponse(action="decline")
        return CancelElicitationResponse(action="cancel")

    async def complete_elicitation(self, elicitation_id: str, **kwargs: object) -> None:
        return None  # folded by the reader (the link drops the question)

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: object,
    ) -> RequestPermissionResponse:
        option_id = await self._link.approval(tool_call, options)
        if option_id is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=option_id)
        )
