"""stdio's hub and binding: the shared stream machinery, with what only stdio does.

Exists so the stream has one implementation: stdio's session is one :class:`~._hub.Hub`
and one :class:`~._binding.Binding`, like an attach client's, and the differences are
two subclasses chosen at construction instead of ``if`` branches in the shared code:

- the hub hands each item over at once (one session: no loop step to share), shows a
  user message only when the client did not send it itself, no system
  messages, and none of attach mode's extension notifications (turn state, queue, the
  cancelled model call's marker, ``session_ended``); its replay ring keeps nothing
  (``session/load`` replays the conversation, S13); each event then goes to the
  session's prompt bookkeeping, after its updates were handed over;
- the binding has no bind preamble, takes items one by one (the pipe checked before each
  frame), and a client that falls behind is not dropped: what waits is shed
  with a notice, a finished card keeps its final state, and a card shed before its
  update is sent again in small (S14).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Protocol
from uuid import uuid4

from acp import RequestError
from acp.schema import PermissionOption, ToolCallUpdate
from acp.utils import serialize_params
from agent_channel import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    ExecutionEvent,
    ExecutionFinished,
    ModelCallFinished,
)
from agent_channel.abc import ExecutionRef

from ...stream import _mapping as m
from ...stream._binding import Binding, Frames, Mark, amount
from ...stream._fanout import Direct
from ...stream._hub import Hub
from ...stream._items import Live, Target
from ...stream._outbox import Shed
from ...wire._transport import noting_ids

log = logging.getLogger("agent_channel_acp")

_FINAL = ("completed", "failed")


class Prompts(Protocol):
    """What a stdio hub tells the session that owns it."""

    def echo(self, message: ChatMessageUser) -> bool:
        """Whether a user message shows (the client's own prompts do not)."""
        ...

    def observe(self, ev: ExecutionEvent) -> None:
        """An event, after the hub handed over its updates (the prompts' bookkeeping)."""
        ...


class StdioHub(Hub):
    """The hub of one stdio session (see the module docstring)."""

    fanout = Direct

    def __init__(
        self,
        prompts: Prompts,
        session_id: str,
        ref: ExecutionRef,
        *,
        approve: bool,
        context_window: int | None,
    ) -> None:
        self._prompts = prompts  # before the hub starts watching
        super().__init__(
            session_id, ref, title="", replay=0, approve=approve, context_window=context_window
        )

    def _on_event(self, ev: ExecutionEvent) -> None:
        super()._on_event(ev)
        self._prompts.observe(ev)

    restored: frozenset[str] = frozenset()
    """The ids of a restored conversation's messages (``stdio --store``): the consumer
    announces them as it adopts them, but the client gets them from ``session/load``'s
    replay (S13), once, or not at all from ``session/resume``."""

    def shown(self, messages: Sequence[ChatMessage]) -> None:
        """A restored conversation's open calls: their cards are the client's already."""
        self._cards.shown(messages)

    def _show_input(self, msg: ChatMessageUser | ChatMessageSystem) -> None:
        if msg.id in self.restored:
            return
        if isinstance(msg, ChatMessageUser) and self._prompts.echo(msg):
            for chunk in m.user_chunks(msg):
                self._emit(Live(None, serialize_params(chunk), len(msg.text)))

    def _whole(self, msg: ChatMessageAssistant) -> None:
        if msg.id not in self.restored:
            super()._whole(msg)

    def _model_cancelled(self, ev: ModelCallFinished) -> None:
        pass  # the prompt's answer says it

    def _turn(self, state: str) -> None:
        self.turn_state = state

    def _queue_changed(self) -> None:
        pass  # the client's prompts are its queue

    def _finish(self, ev: ExecutionFinished) -> None:
        if self.finished is not None:
            return
        self.finished = ev
        self.parked = None
        self._release()
        self.ended.set()


class StdioBinding(Binding):
    """The binding of one stdio session (see the module docstring)."""

    @property
    def alive(self) -> bool:
        return True  # the one driver: a request that fails is a rejection (S10)

    def _preamble(self, hub: Target, replay: list[dict[str, Any]] | None, snapshot: Live) -> None:
        pass  # the client started the execution itself

    def replay(self, updates: list[dict[str, Any]]) -> None:
        """``session/load``: the conversation's updates, after what was handed over."""
        for update in updates:
            if update.get("sessionUpdate") == "tool_call":
                self._owed.discard(update["toolCallId"])
            self.live(Live(None, update, keep=True))

    async def ask_permission(
        self, request: ToolCallUpdate, options: list[PermissionOption]
    ) -> object | None:
        """The client's answer; a request that fails counts as a rejection (S10)."""
        await self.flush()  # the card (and the narration) first
        ids: list[object] = []
        try:
            resp = await noting_ids(
                self.peer.request_permission(self.wire_id, request, options), ids
            )
        except asyncio.CancelledError:  # a cancel abandons it (S10): the client is told
            self.withdraw_requests(ids)
            raise
        except (RequestError, ConnectionError, ValueError) as e:
            log.warning("session %s: permission request failed (%s); rejecting", self.wire_id, e)
            return False
        return getattr(resp, "outcome", None)

    def _overflowed(self) -> None:
        pass  # shed, and keep the client (S14)

    def _on_shed(self, entry: Live | Mark | Frames) -> Live | Mark | Frames | None:
        """What stays of a dropped entry: the final state of a card the client has; a
        dropped card is owed (its next update brings a minimal one first)."""
        if type(entry) is not Live or entry.method is not None:
            return None
        update = entry.payload
        kind = update.get("sessionUpdate")
        tool_call_id = update.get("toolCallId")
        status = update.get("status")
        if not isinstance(tool_call_id, str):
            return None
        if kind == "tool_call":
            self._owed.add(tool_call_id)
        elif kind == "tool_call_update" and status in _FINAL and tool_call_id not in self._owed:
            small = m.tool_end_json(tool_call_id, status, None)
            return Live(None, small, 0, True)
        return None

    def _shed_frames(self, entry: Shed) -> list[bytes]:
        note = (
            f"[agent-channel: {amount(entry.size)} of updates were not sent: the client "
            "stopped reading. session/load replays the conversation.]"
        )
        return [self._frame(Live(None, m.chunk_json("text", note, f"shed-{uuid4().hex[:12]}")))]
