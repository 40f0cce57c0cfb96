"""The children of one execution as its sessions see them (K11): a card each, and a list.

Exists because the producer holds only the top-level ref: the core publishes every child
event of the whole tree on the top-level channel, and this turns them into what a client
reads. Each child is a tool-call card in the parent's session (``child-<id>``), its status
tracking the child's (``in_progress`` while it runs or waits, ``completed`` or ``failed``
when it ends, its result or the reason as the content), and each change is an
``_agent_channel/children`` notification with the whole tree. Cards go through the ring
like tool cards, so a late joiner's replay has them. Steering and stopping go through
``ref.children`` (the hub's); a steer's outcome is learned here, from its ``ChildSteered``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, MutableMapping
from typing import Literal

from agent_channel import ChildEnded, ChildInfo, ChildStarted, ChildSteered, ChildUpdated

from ..wire._frames import ChildEntry, ChildrenNote, ToolContent
from ._items import META, Card, Live, Payload
from ._ring import Ring, size_of

ChildEvent = ChildStarted | ChildUpdated | ChildSteered | ChildEnded
NOTE = "_agent_channel/children"
TITLE = 80
"""Characters of a child's task its card's title shows."""


def card_id(child_id: str) -> str:
    """The tool call id of a child's card."""
    return f"child-{child_id}"


def entry(info: ChildInfo) -> ChildEntry:
    """A registry row as the wire carries it."""
    return {
        "id": info.id,
        "name": info.name,
        "parentId": info.parent_id,
        "depth": info.depth,
        "status": info.status,
        "end": info.end,
        "reason": info.reason,
        "result": info.result,
        "turns": info.turns,
        "tokens": info.usage.total_tokens,
        "started": info.started,
        "lastActivity": info.last_activity,
    }


class ChildCards:
    """The children's cards and rows of one execution (see the module docstring).

    ``cards`` and ``card_seq`` are the execution's tool-card maps: a child's card is known
    there as any card is, so a binding that missed it gets a minimal one first.
    """

    def __init__(
        self,
        execution_id: str,
        ring: Ring,
        emit: Callable[[Live], None],
        cards: MutableMapping[str, Card],
        card_seq: MutableMapping[str, int],
    ) -> None:
        self._execution_id = execution_id  # the parent of its own children
        self._ring = ring
        self._emit = emit
        self._cards = cards
        self._card_seq = card_seq
        self._rows: dict[str, ChildInfo] = {}  # spawn order
        self._steers: dict[str, asyncio.Future[ChildSteered]] = {}
        self._ends: dict[str, asyncio.Future[None]] = {}

    def on_event(self, ev: ChildEvent) -> None:
        if isinstance(ev, ChildSteered):
            self._steered(ev)
            return
        info = ev.child
        known = info.id in self._rows
        self._rows[info.id] = info
        if isinstance(ev, ChildStarted) or not known:
            self._card(info)
        else:
            self._update(info, ended=isinstance(ev, ChildEnded))
        self._emit(Live(NOTE, self.note(), 128 * len(self._rows)))
        future = self._ends.get(info.id) if isinstance(ev, ChildEnded) else None
        if future is not None and not future.done():
            future.set_result(None)

    def seed(self, infos: tuple[ChildInfo, ...]) -> None:
        """The children already there when the execution was served: a card each."""
        for info in infos:
            if info.id not in self._rows:
                self._rows[info.id] = info
                self._card(info)

    def listing(self) -> list[ChildEntry]:
        """The whole tree, each child followed by its own, oldest first at each level."""
        below: dict[str | None, list[ChildInfo]] = {}
        for info in self._rows.values():
            parent = info.parent_id if info.parent_id in self._rows else None
            below.setdefault(parent, []).append(info)
        out: list[ChildEntry] = []

        def walk(parent: str | None) -> None:
            for info in below.get(parent, []):
                out.append(entry(info))
                walk(info.id)

        walk(None)
        return out

    def note(self) -> ChildrenNote:
        return {"children": self.listing()}

    def known(self, child_id: str) -> ChildInfo | None:
        return self._rows.get(child_id)

    def expect(self, steer_id: str) -> asyncio.Future[ChildSteered]:
        """A future resolved by the steer's delivered or undelivered ``ChildSteered``."""
        future = asyncio.get_running_loop().create_future()
        self._steers[steer_id] = future
        future.add_done_callback(lambda _: self._steers.pop(steer_id, None))
        return future

    def expect_end(self, child_id: str) -> asyncio.Future[None]:
        """A future resolved by the child's ``ChildEnded``."""
        future = asyncio.get_running_loop().create_future()
        self._ends[child_id] = future
        future.add_done_callback(lambda _: self._ends.pop(child_id, None))
        return future

    # -- internals ----------------------------------------------------------------------------

    def _steered(self, ev: ChildSteered) -> None:
        steer: dict[str, object] = {"id": ev.steer_id, "source": ev.source, "outcome": ev.outcome}
        if ev.reason is not None:
            steer["reason"] = ev.reason
        update: Payload = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": card_id(ev.child_id),
            "_meta": {f"{META}steer": steer},
        }
        tool_call_id = card_id(ev.child_id)
        if tool_call_id in self._card_seq:
            self._ring.update_card(tool_call_id, update)
            self._emit(Live(None, update, size_of(update), card=tool_call_id))
        future = self._steers.get(ev.steer_id)
        if future is not None and ev.outcome != "queued" and not future.done():
            future.set_result(ev)

    def _card(self, info: ChildInfo) -> None:
        tool_call_id = card_id(info.id)
        title = _title(info)
        self._cards[tool_call_id] = (title, "other")  # ACP has no kind for an agent
        parent = info.parent_id or self._execution_id
        update: dict[str, object] = {
            "sessionUpdate": "tool_call",
            "toolCallId": tool_call_id,
            "title": title,
            "kind": "other",
            "status": _status(info),
            "rawInput": {"name": info.name, "input": info.input, "parentId": parent},
            "_meta": {f"{META}child": entry(info)},
        }
        if info.status == "ended":
            update["content"] = _content(info)
        self._card_seq[tool_call_id] = self._ring.card(tool_call_id, update)
        self._emit(Live(None, update, 256, keep=True))

    def _update(self, info: ChildInfo, *, ended: bool) -> None:
        tool_call_id = card_id(info.id)
        update: dict[str, object] = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": tool_call_id,
            "status": _status(info),
            "_meta": {f"{META}child": entry(info)},
        }
        if ended:
            update["content"] = _content(info)
        self._ring.update_card(tool_call_id, update)
        self._emit(Live(None, update, size_of(update), keep=ended, card=tool_call_id))


def _title(info: ChildInfo) -> str:
    """``Child agent NAME: TASK``, the task's first line cut at :data:`TITLE` characters."""
    task = info.input.strip().split("\n", 1)[0]
    if len(task) > TITLE:
        task = task[: TITLE - 1].rstrip() + "…"
    return f"Child agent {info.name}: {task}" if task else f"Child agent {info.name}"


def _status(info: ChildInfo) -> Literal["in_progress", "completed", "failed"]:
    """ACP's statuses: running and waiting are both ``in_progress`` (``_meta`` tells which);
    any end but ``completed`` is ``failed`` (ACP has no ``cancelled``)."""
    if info.status != "ended":
        return "in_progress"
    return "completed" if info.end == "completed" else "failed"


def _content(info: ChildInfo) -> list[ToolContent]:
    """What the ended card shows: the result when it completed, else how it ended and why."""
    how = info.end or "ended"
    text = info.result if info.end == "completed" and info.result else None
    if text is None:
        text = f"{how}: {info.reason}" if info.reason else how
    return [{"type": "content", "content": {"type": "text", "text": text}}]
