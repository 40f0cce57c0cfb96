"""The replay ring: the most recent updates of one execution, for clients that join late.

Exists because replay (A5, A6; S13 in stdio) must cost a bounded amount whatever the
execution does: at most ``size`` slots and :data:`REPLAY_BYTES` bytes, its oldest slots
going first. Streamed text of one message merges into one slot (up to
:data:`~._outbox.RUN_MAX` characters a slot), and a tool call's later updates merge into
its card while the card is in the ring, so a finished call replays as one ``tool_call``
with its final status and content. Every update recorded gets the next sequence number
(the ring's ``seq``), also when the ring keeps nothing (``size`` 0).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from . import _mapping as m
from ._items import META, Payload
from ._outbox import RUN_MAX

REPLAY = 100
"""Updates the ring keeps for replay by default (A6)."""
REPLAY_BYTES = 2 * 1024 * 1024
"""Bytes of updates the ring keeps at most, whatever ``replay`` says (its oldest go first)."""


@dataclass(slots=True)
class _Slot:
    seq: int
    update: dict[str, object]
    parts: list[str] | None = None  # text of a merged chunk run
    size: int = 0


class Ring:
    """The bounded replay of one execution (see the module docstring)."""

    __slots__ = ("_bytes", "_cards", "_size", "_slots", "seq")

    def __init__(self, size: int) -> None:
        self._size = max(0, size)
        self._slots: deque[_Slot] = deque()
        self._bytes = 0
        self._cards: dict[str, _Slot] = {}  # a card's slot while it is in the ring
        self.seq = 0
        """Updates recorded so far (each replayed update carries its number)."""

    def chunk(self, message_id: str, kind: str, text: str) -> None:
        """Record streamed text: it joins the last slot when that is the same run."""
        self.seq += 1
        slots = self._slots
        last = slots[-1] if slots else None
        name = "agent_message_chunk" if kind == "text" else "agent_thought_chunk"
        if (
            last is not None
            and last.parts is not None
            and last.update["messageId"] == message_id
            and last.update["sessionUpdate"] == name
            and last.size < RUN_MAX
        ):
            last.parts.append(text)
            last.size += len(text)
            last.seq = self.seq
            self._bytes += len(text)
            self._trim()
        elif self._size:
            update = dict(m.chunk_json(kind, "", message_id))
            self._push(_Slot(self.seq, update, [text], len(text)))

    def record(self, update: Payload) -> None:
        """Keep ``update`` (a copy) for replay."""
        self.seq += 1
        if self._size:
            self._push(_Slot(self.seq, dict(update), size=size_of(update)))

    def card(self, tool_call_id: str, update: Payload) -> int:
        """Keep a tool call's card, into which its later updates merge; its number."""
        self.seq += 1
        if self._size:
            slot = _Slot(self.seq, dict(update), size=size_of(update))
            self._push(slot)
            self._cards[tool_call_id] = slot
        return self.seq

    def update_card(self, tool_call_id: str, update: Payload) -> None:
        """Merge a card's later update into its slot (or keep it alone if the card left)."""
        slot = self._cards.get(tool_call_id)
        if slot is None:
            self.record(update)
            return
        self.seq += 1
        slot.seq = self.seq
        for key, value in update.items():
            if key != "sessionUpdate":
                slot.update[key] = value
        grown = size_of(slot.update)
        self._bytes += grown - slot.size
        slot.size = grown
        self._trim()

    def replay(self) -> list[dict[str, object]]:
        """The ring as replay updates, each marked in ``_meta`` (A5, A6)."""
        out: list[dict[str, object]] = []
        for slot in self._slots:
            update = dict(slot.update)
            if slot.parts is not None:
                update["content"] = {"type": "text", "text": "".join(slot.parts)}
            prior = update.get("_meta")
            meta: dict[str, object] = {**prior} if isinstance(prior, Mapping) else {}
            meta[f"{META}replay"] = True
            meta[f"{META}seq"] = slot.seq
            update["_meta"] = meta
            out.append(update)
        return out

    def _push(self, slot: _Slot) -> None:
        self._slots.append(slot)
        self._bytes += slot.size
        self._trim()

    def _trim(self) -> None:
        """Keep within ``size`` slots and :data:`REPLAY_BYTES` (the newest stays)."""
        slots = self._slots
        while len(slots) > self._size or (self._bytes > REPLAY_BYTES and len(slots) > 1):
            old = slots.popleft()
            self._bytes -= old.size
            tool_call_id = old.update.get("toolCallId")
            if isinstance(tool_call_id, str) and self._cards.get(tool_call_id) is old:
                del self._cards[tool_call_id]


def size_of(update: Payload) -> int:
    """About how many bytes an update holds (what the ring and outboxes count)."""
    return sum(len(v) if isinstance(v, str) else len(str(v)) for v in update.values())
