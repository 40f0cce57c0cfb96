"""The operator queue of one execution: messages posted and not yet folded in (A7, A25, A17).

Exists so an operator can see and edit what the agent has not read yet, and so nothing
posted is dropped silently: what is still queued when the execution ends is reported
with who sent it and when. Bounded (:data:`QUEUE_LIMIT`): every change is sent to every
client as the whole list.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agent_channel import ChannelFull, ChannelItem, Content, UserMessage
from agent_channel.abc import ExecutionRef

from ..wire import _frames as f

Call = Callable[..., Awaitable[Any]]
"""Makes one call on the ref (``Hub.call``)."""

QUEUE_LIMIT = 256
"""Operator messages one execution holds unread in attach mode (every queue update lists
them all); a prompt past it is refused with a reason."""
QUEUE_TEXT = 2000
"""Characters of a queued message's text that ``_agent_channel/queue`` shows."""


@dataclass(slots=True)
class Queued:
    """An operator message posted and not yet folded in (A25)."""

    id: str
    text: str
    client: str
    posted: float

    def as_json(self) -> f.Queued:
        return {"id": self.id, "text": self.text, "client": self.client, "time": self.posted}


class OperatorQueue:
    """The operator messages of one execution that no boundary has folded in yet."""

    __slots__ = ("_call", "_ref", "items")

    def __init__(self, ref: ExecutionRef, call: Call) -> None:
        self._ref = ref
        self._call = call
        """How the ref is called (the hub's: on a worker thread for a remote ref)."""
        self.items: OrderedDict[str, Queued] = OrderedDict()

    def __len__(self) -> int:
        return len(self.items)

    async def post(self, content: str | tuple[Content, ...], text: str, client: str) -> str:
        """Post an operator message; its id. Raises ``ChannelClosed`` when the execution
        ended, ``ChannelFull`` while ``QUEUE_LIMIT`` messages (or the channel's own) wait."""
        if len(self.items) >= QUEUE_LIMIT:
            raise ChannelFull(f"{QUEUE_LIMIT} operator messages already wait unread")
        item = UserMessage(content, source="operator", sender=client)
        self.items[item.id] = Queued(item.id, text[:QUEUE_TEXT], client, time.time())
        try:
            await self._call(self._ref.post, item)
        except Exception:
            self.items.pop(item.id, None)
            raise
        return item.id

    def adopt(self, items: Sequence[ChannelItem]) -> None:
        """Show operator messages the channel holds that were posted before this queue
        existed (an execution restored from its store: each keeps its sender, which the
        item carries; when it was posted is not kept, so it shows when it was adopted)."""
        for item in items:
            if isinstance(item, UserMessage) and item.source == "operator":
                queued = Queued(item.id, item.text[:QUEUE_TEXT], item.sender or "", time.time())
                self.items.setdefault(item.id, queued)

    async def withdraw(self, message_id: str) -> bool:
        """Take a message back if no boundary has folded it in; whether it was."""
        if message_id not in self.items or not await self._call(self._ref.withdraw, message_id):
            return False
        self.items.pop(message_id, None)
        return True

    def drained(self, items: Sequence[ChannelItem]) -> bool:
        """A boundary folded ``items`` in; whether any of them was queued here."""
        taken = [item.id for item in items if item.id in self.items]
        for item_id in taken:
            del self.items[item_id]
        return bool(taken)

    def listing(self) -> list[f.Queued]:
        return [q.as_json() for q in self.items.values()]

    def undelivered(self, unread: Sequence[ChannelItem]) -> list[f.Undelivered]:
        """The execution ended without reading ``unread``: what the clients are told (A17).
        The queue is empty afterwards."""
        out: list[f.Undelivered] = []
        for i in unread:
            if not isinstance(i, UserMessage):
                continue
            entry: f.Undelivered = {"id": i.id, "text": i.text[:QUEUE_TEXT], "source": i.source}
            queued = self.items.get(i.id)
            if queued is not None:  # posted here: who sent it, and when
                entry["client"] = queued.client
                entry["time"] = queued.posted
            out.append(entry)
        self.items.clear()
        return out
