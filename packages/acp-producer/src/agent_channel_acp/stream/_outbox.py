"""What waits for one client's pipe: streamed text merges, and the whole is bounded in bytes.

A client that stops reading must cost memory that follows the text waiting for it, not
the number of pieces it was streamed in, and never more than a stated cap (S14). The
outbox knows nothing of ACP or of sessions: entries are opaque to it, except runs of
text, which it merges itself. Each stdio session and each attach-mode
client binding has one (``sheds`` counts overflows: attach mode drops the client then).

- Consecutive text of one message and one kind merges into one :class:`Text` run while
  queued, up to :data:`RUN_MAX` characters a run (so a run stays a reasonable frame).
- Every entry costs its stated bytes plus :data:`ENTRY_COST`. Entries put with ``keep``
  (answers, barriers: the client asked for them, so their number is the client's
  doing) are never dropped. When the sheddable cost passes ``limit``, every sheddable
  entry still queued is dropped at once; the owner may put a small replacement in a
  dropped entry's place (``on_shed``), and one :class:`Shed` marker, where the first
  dropped entry was, records how much was dropped so the client can be told.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

RUN_MAX = 64 * 1024
"""Characters one merged run may hold."""
ENTRY_COST = 256
"""Bytes counted for any queued entry on top of its text (the objects that hold it)."""
_JOIN_EVERY = 64


def check_limit(limit: int) -> int:
    """``limit`` if an outbox can hold one run of text within it; ValueError otherwise (the
    servers call it where they are made, not at every session)."""
    if limit < RUN_MAX:
        raise ValueError(f"backlog_limit must be at least {RUN_MAX} bytes, not {limit}")
    return limit


class Text:
    """A run of one message's text of one kind, merged while it waited."""

    __slots__ = ("kind", "message_id", "parts", "size")

    def __init__(self, message_id: str, kind: str, text: str) -> None:
        self.message_id = message_id
        self.kind = kind
        self.parts = [text]
        self.size = len(text)

    def add(self, text: str) -> None:
        parts = self.parts
        parts.append(text)
        self.size += len(text)
        if len(parts) >= _JOIN_EVERY:  # keep the per-piece overhead bounded
            parts[:] = ["".join(parts)]

    @property
    def text(self) -> str:
        return "".join(self.parts)


class Shed:
    """Where queued entries were dropped, and how many bytes they held."""

    __slots__ = ("entries", "size")

    def __init__(self) -> None:
        self.entries = 0
        self.size = 0


class _Slot(Generic[T]):
    __slots__ = ("cost", "entry", "keep")

    def __init__(self, entry: T | Text | Shed, cost: int, keep: bool) -> None:
        self.entry = entry
        self.cost = cost
        self.keep = keep


class Outbox(Generic[T]):
    """A FIFO of entries for one client, bounded to ``limit`` sheddable bytes (see the module)."""

    __slots__ = ("_on_shed", "_slots", "limit", "sheds", "size")

    def __init__(self, limit: int, on_shed: Callable[[T], T | None] | None = None) -> None:
        self.limit = check_limit(limit)
        self.size = 0
        """Sheddable bytes queued now (what ``limit`` bounds)."""
        self.sheds = 0
        """How many times the queue overflowed and was shed."""
        self._slots: deque[_Slot[T]] = deque()
        self._on_shed = on_shed

    def __bool__(self) -> bool:
        return bool(self._slots)

    def __len__(self) -> int:
        return len(self._slots)

    def text(self, message_id: str, kind: str, text: str) -> None:
        """Queue streamed text, merged into the last entry when that is the same run."""
        slots = self._slots
        if slots:
            last = slots[-1]
            run = last.entry
            if (
                type(run) is Text
                and run.message_id == message_id
                and run.kind == kind
                and run.size < RUN_MAX
            ):
                run.add(text)
                last.cost += len(text)
                self._grow(len(text))
                return
        slots.append(_Slot(Text(message_id, kind, text), ENTRY_COST + len(text), False))
        self._grow(ENTRY_COST + len(text))

    def put(self, entry: T, size: int = 0, *, keep: bool = False) -> None:
        """Queue ``entry``, which holds about ``size`` bytes; ``keep`` entries are never shed."""
        cost = ENTRY_COST + size
        self._slots.append(_Slot(entry, cost, keep))
        if not keep:
            self._grow(cost)

    def peek(self) -> T | Text | Shed:
        """The first entry, left in place."""
        return self._slots[0].entry

    def popleft(self) -> T | Text | Shed:
        slot = self._slots.popleft()
        if not slot.keep:
            self.size -= slot.cost
        return slot.entry

    def _grow(self, cost: int) -> None:
        self.size += cost
        if self.size > self.limit:
            self._shed()

    def _shed(self) -> None:
        self.sheds += 1
        kept: deque[_Slot[T]] = deque()
        marker: Shed | None = None
        for slot in self._slots:
            entry = slot.entry
            if slot.keep:
                if type(entry) is Shed:
                    marker = entry
                kept.append(slot)
                continue
            if marker is None:
                marker = Shed()
                kept.append(_Slot(marker, ENTRY_COST, True))
            marker.entries += 1
            marker.size += slot.cost
            if self._on_shed is not None and not isinstance(entry, Text | Shed):
                small = self._on_shed(entry)
                if small is not None:
                    kept.append(_Slot(small, ENTRY_COST, True))
        self._slots = kept
        self.size = 0
