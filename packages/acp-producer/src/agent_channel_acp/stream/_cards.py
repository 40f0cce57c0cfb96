"""The tool cards of one execution: one card per tool call, whatever path announced it.

Exists because a call can be announced four ways (an approval request, the tool's start,
a result for a call that never started, a call already running when the execution was
served) and must show one card with one title and one kind everywhere (S9, S16), be
cancellable alone while it runs (A22), and be remembered within a bound once finished.
Every card and card update goes to the ring (see ``_ring``) and out through ``emit``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

from acp.utils import serialize_params
from agent_channel import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageTool,
    ChildToolCall,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    thaw,
)

from ..wire._frames import RunningToolCall
from . import _mapping as m
from ._items import META, Card, Live, Payload
from ._ring import Ring, size_of

CARDS_KEPT = 1024
"""Finished tool calls whose card the hub still knows (title, kind, sequence number), newest
first; every unfinished call is known. So the card maps hold at most this many entries
plus the calls in flight, however many calls the execution makes."""


def child_meta(call: ToolCall) -> dict[str, object] | None:
    """The ``_meta`` naming the child a call comes from (K9), or None for the top level's."""
    if not isinstance(call, ChildToolCall):
        return None
    return {f"{META}child": {"id": call.child_id, "name": call.child_name}}


class ToolCards:
    """The cards of one execution's tool calls (see the module docstring)."""

    def __init__(self, ring: Ring, emit: Callable[[Live], None], *, approving: bool) -> None:
        self._ring = ring
        self._emit = emit
        self._approving = approving
        self.cards: dict[str, Card] = {}
        """Each tool call's title and kind, as its live card showed them (S16)."""
        self.card_seq: dict[str, int] = {}
        """The sequence number of each tool call's card (newer binds got it live)."""
        self._announced: set[str] = set()
        self._unfinished: set[str] = set()
        self._cancelled: set[str] = set()  # unfinished calls whose region was cancelled
        self._done: OrderedDict[str, None] = OrderedDict()  # finished, oldest first

    # -- the four ways a card appears ------------------------------------------------------

    def in_flight(self, messages: tuple[ChatMessage, ...]) -> None:
        """Cards for the calls the conversation asked for and has no result of yet: they
        run now. An execution served only once its tools started (``add`` of a ref already
        at work) then shows them, and each can be cancelled alone (A6, A22)."""
        last = next((i for i in range(len(messages) - 1, -1, -1) if _asks(messages[i])), 0)
        for call in self._open(messages[last:]):  # the last step's: earlier ones do not run
            start = m.tool_start(
                call.id, title=call.name, kind="other", raw_input=thaw(call.arguments)
            )
            self._card(serialize_params(start), call.id)

    def shown(self, messages: Sequence[ChatMessage]) -> None:
        """The calls of a restored conversation that have no result: the client has their
        cards already (``session/load``'s replay, or its own from before the restart), so
        they are announced without a card; a call's re-run then updates its card."""
        self._open(messages)

    def _open(self, messages: Sequence[ChatMessage]) -> list[ToolCall]:
        """The calls without a result not announced yet, now announced and unfinished."""
        answered = {r.tool_call_id for r in messages if isinstance(r, ChatMessageTool)}
        calls = [
            call
            for msg in messages
            if isinstance(msg, ChatMessageAssistant)
            for call in msg.tool_calls
            if call.id not in answered and call.id not in self._announced
        ]
        for call in calls:
            self._announced.add(call.id)
            self._unfinished.add(call.id)
            self.cards[call.id] = (call.name, "other")
        return calls

    def asked(self, call: ToolCall) -> Card:
        """An approval is asked for ``call``: its card (``pending``) first; its title, kind."""
        name = f"{call.child_name}: {call.name}" if isinstance(call, ChildToolCall) else call.name
        if call.id not in self._announced:
            self._announced.add(call.id)
            self.cards.setdefault(call.id, (name, "other"))
            title, kind = self.cards[call.id]
            start = m.tool_start(
                call.id, title=title, kind=kind, raw_input=thaw(call.arguments), status="pending"
            )
            update = serialize_params(start)
            if (meta := child_meta(call)) is not None:
                update["_meta"] = meta
            self._card(update, call.id, keep=True)
        return self.cards.get(call.id, (name, "other"))

    def answered_in_child(self, call: ChildToolCall, allowed: bool | None) -> None:
        """A child's call was answered (K9): its card ends with the answer, since the call's
        own events stay on the child's channel (the child's card shows how it goes on)."""
        if call.id not in self._announced:
            return
        if allowed:
            update = m.tool_end_json(call.id, "completed", f"allowed: {call.child_name} runs it")
        else:
            why = "rejected" if allowed is False else "not answered"
            update = m.tool_end_json(call.id, "failed", f"{why}: {call.child_name} does not run it")
        self._update(update, call.id, keep=True)
        self._card_done(call.id)

    def allowed(self, tool_call_id: str) -> None:
        """The approval was granted: the card moves to ``in_progress``."""
        if tool_call_id in self._announced and tool_call_id in self.cards:
            update = m.tool_status_update(tool_call_id, "in_progress")
            self._update(serialize_params(update), tool_call_id, keep=True)

    def started(self, ev: ToolCallStarted) -> None:
        tool_call_id = ev.tool_call_id
        self.cards[tool_call_id] = (ev.title or ev.name, ev.kind)
        self._unfinished.add(tool_call_id)
        if tool_call_id in self._announced:
            self._update(serialize_params(m.tool_started_update(ev)), tool_call_id)
            return
        self._announced.add(tool_call_id)
        title, kind = self.cards[tool_call_id]
        status = "pending" if self._approving else "in_progress"  # with approval, a request follows
        start = m.tool_start(
            tool_call_id, title=title, kind=kind, raw_input=thaw(ev.arguments), status=status
        )
        self._card(serialize_params(start), tool_call_id)

    def finished(self, ev: ToolCallFinished) -> None:
        tool_call_id = ev.tool_call_id
        if tool_call_id not in self._announced:  # rejected before it ran: a card first
            self._announced.add(tool_call_id)
            title, kind = self.cards.get(tool_call_id, (ev.name, "other"))
            start = m.tool_start(tool_call_id, title=title, kind=kind, raw_input=None)
            self._card(serialize_params(start), tool_call_id)
        self._update(m.tool_finished_json(ev), tool_call_id)
        self._card_done(tool_call_id)

    def close_unfinished(self, why: str) -> None:
        """Every call still open ends ``failed`` (a consumer that did not close them)."""
        for tool_call_id in sorted(self._unfinished):
            self._update(m.tool_end_json(tool_call_id, "failed", why), tool_call_id)
            self._card_done(tool_call_id)

    # -- cancelling one call (A22) ------------------------------------------------------------

    def running(self, tool_call_id: str) -> bool:
        return tool_call_id in self._unfinished

    def cancelling(self, tool_call_id: str) -> None:
        self._cancelled.add(tool_call_id)

    def state(self, tool_call_id: str, *, ended: bool) -> str:
        """Why a call cannot be cancelled (A22's ``false``), in a word: ``cancelling`` (a
        cancel is on its way), ``not_in_region`` (it runs, but its agent did not put it in
        ``ch.region(id)``: only the turn can be stopped), ``finished``, ``unknown``."""
        if tool_call_id in self._unfinished and not ended:
            return "cancelling" if tool_call_id in self._cancelled else "not_in_region"
        return "finished" if tool_call_id in self._done else "unknown"

    def running_tool_calls(self) -> list[RunningToolCall]:
        """The tool calls running now, oldest first: what an operator names to cancel one."""
        running = sorted(self._unfinished, key=lambda i: self.card_seq.get(i, 0))
        return [
            {"id": i, "title": self.cards[i][0], "kind": self.cards[i][1]}
            for i in running
            if i in self.cards
        ]

    # -- internals ----------------------------------------------------------------------------

    def _card(self, update: Payload, tool_call_id: str, *, keep: bool = False) -> None:
        self.card_seq[tool_call_id] = self._ring.card(tool_call_id, update)
        self._emit(Live(None, update, 256, keep))

    def _update(self, update: Payload, tool_call_id: str, *, keep: bool = False) -> None:
        self._ring.update_card(tool_call_id, update)
        self._emit(Live(None, update, size_of(update), keep, card=tool_call_id))

    def _card_done(self, tool_call_id: str) -> None:
        """A call finished: its card is remembered among the last :data:`CARDS_KEPT`."""
        self._unfinished.discard(tool_call_id)
        self._cancelled.discard(tool_call_id)
        done = self._done
        done[tool_call_id] = None
        done.move_to_end(tool_call_id)
        while len(done) > CARDS_KEPT:
            old, _ = done.popitem(last=False)
            self.cards.pop(old, None)
            self.card_seq.pop(old, None)
            self._announced.discard(old)


def _asks(message: ChatMessage) -> bool:
    return isinstance(message, ChatMessageAssistant)
