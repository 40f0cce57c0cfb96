"""One execution, rendered once and served to any number of client sessions.

The hub owns what is the same for every client: the ref, the single event subscription,
the rendering of events into ACP updates (once, whatever the number of clients), the
turn state, and the execution's end (with what it never read). Its parts each have a
module: the replay ring (``_ring``), the tool cards (``_cards``), the operator queue
(``_operator_queue``), the fan-out to the sessions (``_fanout``); each client session is
a :class:`~._stream.Sink` (a binding) that the hub hands every live item, in order.

Everything runs on the server's event loop. An execution on another thread has its
events handed over with ``call_soon_threadsafe`` (order kept); approvals asked from
there run here. A ``remote`` ref's calls go through ``_calls`` (off the loop, in order), and
its conversation is read from the events it sent.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping

from acp.utils import serialize_params
from agent_channel import (
    AwaitingInput,
    Cancel,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    ChildEnded,
    ChildStarted,
    ChildSteered,
    ChildToolCall,
    ChildUpdated,
    Content,
    ContentReasoning,
    ContentText,
    ExecutionEvent,
    ExecutionFinished,
    ItemsDrained,
    MessageAppended,
    ModelCallFinished,
    ModelDelta,
    StopReason,
    StoreFailed,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    TurnCancelled,
    TurnEnded,
    TurnStarted,
)
from agent_channel.abc import ExecutionRef

from ..wire import _frames as f
from . import _mapping as m
from ._approvals import ask_for
from ._calls import RefCalls
from ._cards import ToolCards
from ._child_requests import ChildRequests
from ._children import NOTE, ChildCards
from ._fanout import Fanout
from ._items import META, Card, Chunk, Live, Sink
from ._questions import Questions, across
from ._queue import OperatorQueue, Queued
from ._ring import REPLAY, Ring

log = logging.getLogger("agent_channel_acp")

Status = str  # "running" | "waiting for operator" | "finished" | "failed"


class Hub:
    """One top-level execution, served to any number of sessions (see the module)."""

    fanout: type[Fanout] = Fanout
    """How items reach the sessions: per loop step (stdio's hub hands them over at once)."""

    def __init__(
        self,
        execution_id: str,
        ref: ExecutionRef,
        *,
        title: str,
        replay: int = REPLAY,
        approve: bool = False,
        context_window: int | None = None,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.id = execution_id
        self.ref = ref
        self.call = RefCalls(ref)  # how the operator's calls reach the ref
        self.title = title
        self.created = self.updated = time.time()  # updated: at each event (session/list)
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._context_window = context_window
        self._on_change = on_change
        self._ring = Ring(replay)
        self._fanout = self.fanout(execution_id, self._changed)
        self._emit = self._fanout.hand
        self._cards = ToolCards(self._ring, self._emit, approving=approve)
        self._children = ChildCards(
            execution_id, self._ring, self._emit, self._cards.cards, self._cards.card_seq
        )
        self.child_requests = ChildRequests(execution_id, ref, self._children)
        """The operator's reads and controls of a child (K12)."""
        self._queue = OperatorQueue(ref, self.call)
        self._shown: OrderedDict[str, None] = OrderedDict()
        self._last_streamed = ""
        self._streamed_by = ""  # the model call that streamed it
        self._history: list[ChatMessage] = []  # for a consumer that publishes but shares none
        # state
        self.turn_state = "idle"
        self.parked: StopReason | None = None  # waiting for an operator message, and why
        self._approvals: dict[object, f.PendingApproval] = {}  # asked, not answered; oldest first
        self.finished: ExecutionFinished | None = None
        self.undelivered: list[f.Undelivered] = []
        self.ending: Callable[[], None] | None = None  # outer cancellation, when we started it
        self.outlives_server = False  # ``ending`` ends it, a server stopping does not (Ray's)
        self.ended = asyncio.Event()
        self._release_approvals: Callable[[], None] | None = None
        snapshot, self._release = ref.watch(self._on_event_any_thread)
        self.turn_state = snapshot.turn_state
        self.parked = snapshot.awaiting  # a hub added to a parked execution shows it waiting
        self._queue.adopt(snapshot.queued)  # a restored execution's unread messages
        for i, msg in enumerate(snapshot.messages):
            self._appended(MessageAppended(message=msg, index=i))
        if not snapshot.closed:
            self._cards.in_flight(snapshot.messages)
            self._children.seed(ref.children.list())
        if approve:
            self._release_approvals = ref.route_approvals(self.approve)
        self.questions = Questions(ref, self._fanout)  # the model's questions (Q2-Q4)
        if snapshot.closed and self.finished is None:
            self._finish(ExecutionFinished())

    # -- what the sessions and the list read -----------------------------------------------

    @property
    def cards(self) -> Mapping[str, Card]:
        """Each tool call's title and kind, as its live card showed them (S16)."""
        return self._cards.cards

    @property
    def card_seq(self) -> Mapping[str, int]:
        """The sequence number of each tool call's card (newer binds got it live)."""
        return self._cards.card_seq

    @property
    def bindings(self) -> tuple[Sink, ...]:
        return self._fanout.sinks

    @property
    def clients(self) -> int:
        return len(self._fanout.sinks)

    @property
    def queue(self) -> OrderedDict[str, Queued]:
        return self._queue.items

    @property
    def running(self) -> bool:
        return self.finished is None

    @property
    def status(self) -> Status:
        if self.finished is not None:
            return "failed" if self.finished.error is not None else "finished"
        if self.parked is not None:
            return "waiting for operator"
        return "running"

    def messages(self) -> tuple[ChatMessage, ...]:
        """The execution's conversation now (A19): the one the consumer shares, else the
        messages its events announced (a remote ref's: no call on the loop)."""
        if self.call.remote:
            return tuple(self._history)
        return self.ref.messages() or tuple(self._history)

    def describe(self) -> dict[str, object]:
        """One entry of ``_agent_channel/list`` (A24), checked against the verbs' shape; a
        plain dict, as the list's callers (``agent.attach``, ``hosting``) are typed to take."""
        entry: f.Execution = {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "turnState": self.turn_state,
            "messageCount": len(self.messages()),
            "pendingApproval": self.pending_approval,
            "pendingApprovals": list(self._approvals.values()),
            "queued": len(self._queue),
            "drivable": self.running,
            "clients": len(self._fanout.sinks),
            "started": self.created,
            "runningToolCalls": self._cards.running_tool_calls(),
        }
        if children := self._children.listing():
            entry["children"] = children
        if (question := self.questions.oldest()) is not None:
            entry["pendingQuestion"] = question
        return dict(entry)

    # -- sessions ----------------------------------------------------------------------

    def bind(self, sink: Sink, *, driver: bool, replay: bool = True) -> None:
        """Attach ``sink`` atomically: its preamble (A5; a resume has no replay, D5), then live."""
        self.flush()  # the step's items are in the ring: the replay has them, live must not
        sink.attached(self, self._ring.replay() if replay else None, self._turn_state_note())
        if self._children.listing():  # K11: the tree with the cards, not at its next change
            sink.take([Live(NOTE, self._children.note(), keep=True)])
        self._fanout.add(sink, driver=driver)

    def unbind(self, sink: Sink) -> None:
        self._fanout.remove(sink)

    def prompted(self, sink: Sink) -> None:
        self._fanout.prompted(sink)

    def flush(self) -> None:
        """Hand the items of this loop step to the sessions now (see ``_fanout``)."""
        self._fanout.flush()

    def after(self, sink: Sink, run: Callable[[], object]) -> None:
        """Run ``run`` once everything handed to ``sink`` so far is written: this loop
        step's items first, then a mark in its outbox (the one ordering mechanism: an
        answer after its updates, a barrier)."""
        self._fanout.flush()
        sink.mark(run)

    async def caught_up(self, sink: Sink) -> None:
        """Wait until everything handed to ``sink`` so far is written."""
        self._fanout.flush()
        await sink.flush()

    # -- operator requests -------------------------------------------------------------

    async def post(self, content: str | tuple[Content, ...], text: str, client: str) -> str:
        """Queue an operator message (A7); see :meth:`OperatorQueue.post`."""
        message_id = await self._queue.post(content, text, client)
        self._queue_changed()
        return message_id

    async def withdraw(self, message_id: str) -> bool:
        if not await self._queue.withdraw(message_id):
            return False
        self._queue_changed()
        return True

    async def interrupt(self) -> bool:
        """A driver's ``session/cancel``: stop the running turn; ``False`` when there was none.
        While parked there is no turn to stop, and nothing is queued that could stop a later
        one (A12, A13)."""
        if self.finished is not None or self.parked is not None:
            return False
        await self.call(self.ref.interrupt, Cancel("user_cancel"))
        return True

    async def cancel_tool_call(self, tool_call_id: str) -> bool:
        if self.finished is not None or not self._cards.running(tool_call_id):
            return False
        if not await self.call(self.ref.cancel_region, tool_call_id):
            return False
        self._cards.cancelling(tool_call_id)
        return True

    def tool_call_state(self, tool_call_id: str) -> str:
        return self._cards.state(tool_call_id, ended=self.finished is not None)

    # -- children (K11, K12) -------------------------------------------------------------

    def children(self) -> list[f.ChildEntry]:
        """The tree below the execution, as its child events told it (K11)."""
        return self._children.listing()

    # -- approvals (A20) ---------------------------------------------------------------

    async def approve(self, call: ToolCall) -> bool:
        if threading.get_ident() != self._thread:  # the execution's loop may be trio
            return await across(self._loop, self._approve(call))
        return await self._approve(call)

    @property
    def pending_approval(self) -> str | None:
        """The oldest tool call waiting for an operator's approval, if any."""
        return next((a["toolCallId"] for a in self._approvals.values()), None)

    async def _approve(self, call: ToolCall) -> bool:
        title, _ = self._cards.asked(call)  # its card first (asked again below: once)
        waiting: f.PendingApproval = {"toolCallId": call.id, "title": title}
        if isinstance(call, ChildToolCall):
            waiting["childId"] = call.child_id
        key = object()  # each request its own entry: two may share a call id
        self._approvals[key] = waiting
        self._changed()
        try:
            return await ask_for(call, self._cards, self._fanout)
        finally:
            del self._approvals[key]
            self._changed()

    # -- events (the consumer's side) --------------------------------------------------

    def _on_event_any_thread(self, ev: ExecutionEvent) -> None:
        if threading.get_ident() == self._thread:
            self._on_event(ev)
        else:
            self._loop.call_soon_threadsafe(self._on_event, ev)

    def _on_event(self, ev: ExecutionEvent) -> None:
        self.updated = time.time()
        if isinstance(ev, ModelDelta):
            mid = ev.message_id
            self._streamed_by = ev.call_id
            if mid != self._last_streamed:
                self._last_streamed = mid
                self._remember_shown(mid)
            self._chunk(mid, ev.kind, ev.text)
        elif isinstance(ev, ItemsDrained):
            self.parked = None
            if self._queue.drained(ev.items):
                self._queue_changed()
        elif isinstance(ev, ToolCallStarted):
            self._cards.started(ev)
        elif isinstance(ev, ToolCallFinished):
            self._cards.finished(ev)
        elif isinstance(ev, ModelCallFinished):
            self._model_finished(ev)
        elif isinstance(ev, MessageAppended):
            self._appended(ev)
        elif isinstance(ev, TurnStarted):
            self.parked = None
            self._turn("started")
        elif isinstance(ev, TurnEnded):
            if self.turn_state != "cancelled":  # A8: after cancelled, the next is started
                # cut short by outer cancellation (`end`, the server closing): its one end
                # state says so, and the execution's end sends no second one
                self._turn("cancelled" if ev.error == "cancelled" else "ended")
        elif isinstance(ev, TurnCancelled):
            self._cards.close_unfinished("cancelled")
            self._turn("cancelled")
        elif isinstance(ev, AwaitingInput):
            self.parked = ev.stop_reason
            self._changed()
        elif isinstance(ev, ExecutionFinished):
            self._finish(ev)
        elif isinstance(ev, StoreFailed):  # D7: every operator is told, once
            self._emit(Live(None, m.chunk_json("text", f"[{ev.reason}]", "store"), keep=True))
        elif isinstance(ev, ChildStarted | ChildUpdated | ChildSteered | ChildEnded):
            self._children.on_event(ev)  # nothing a discovery record keeps: no _changed

    def _model_finished(self, ev: ModelCallFinished) -> None:
        msg = ev.message
        if ev.cancelled:
            self._model_cancelled(ev)
        if msg is not None and msg.id not in self._shown:
            self._remember_shown(msg.id)
            self._whole(msg)
        if ev.usage is not None and self._context_window:
            self._emit(Live(None, m.usage_update(ev.usage, self._context_window)))

    def _model_cancelled(self, ev: ModelCallFinished) -> None:
        """A9: the client learns the model call is over."""
        # the message this call streamed; none (the call's id) if it streamed nothing
        streamed = self._streamed_by == ev.call_id and self._last_streamed
        marker = m.chunk_json("text", "", streamed or ev.call_id)
        marker["_meta"] = {f"{META}modelCall": {"id": ev.call_id, "status": "cancelled"}}
        self._emit(Live(None, marker))

    def _appended(self, ev: MessageAppended) -> None:
        msg = ev.message
        history = self._history
        if ev.index == len(history):
            history.append(msg)
        elif ev.index < len(history):
            history[ev.index] = msg
        if isinstance(msg, ChatMessageUser | ChatMessageSystem):
            self._show_input(msg)
        elif isinstance(msg, ChatMessageAssistant) and msg.id not in self._shown:
            self._remember_shown(msg.id)
            self._whole(msg)  # (a tool message's result shows in its call's card)

    def _show_input(self, msg: ChatMessageUser | ChatMessageSystem) -> None:
        """A user or system message, with its role and source (A6, A7), kept for replay."""
        meta = {f"{META}role": msg.role}
        if isinstance(msg, ChatMessageUser) and msg.source:
            meta[f"{META}source"] = msg.source
        for chunk in m.user_chunks(ChatMessageUser(id=msg.id, content=msg.content)):
            update = serialize_params(chunk)
            update["_meta"] = meta
            self._ring.record(update)
            self._emit(Live(None, update, len(msg.text)))

    def _whole(self, msg: ChatMessageAssistant) -> None:
        if isinstance(msg.content, str):
            if msg.content:
                self._chunk(msg.id, "text", msg.content)
            return
        for part in msg.content:
            if isinstance(part, ContentReasoning):
                self._chunk(msg.id, "reasoning", part.reasoning)
            elif isinstance(part, ContentText) and part.text:
                self._chunk(msg.id, "text", part.text)

    def _remember_shown(self, message_id: str) -> None:
        shown = self._shown
        shown[message_id] = None
        if len(shown) > 256:
            shown.popitem(last=False)

    def _turn(self, state: str) -> None:
        self.turn_state = state
        self._emit(self._turn_state_note())
        self._changed()

    def _turn_state_note(self) -> Live:
        note: f.TurnStateNote = {"state": self.turn_state}
        return Live("_agent_channel/turn_state", note)

    def _queue_changed(self) -> None:
        note: f.QueueNote = {"messages": self._queue.listing()}
        self._emit(Live("_agent_channel/queue", note, 64 * len(note["messages"])))
        self._changed()

    def _finish(self, ev: ExecutionFinished) -> None:
        if self.finished is not None:
            return
        self.finished = ev
        self.parked = None
        self._cards.close_unfinished("the execution ended")
        if self.turn_state in ("idle", "started"):  # A8: a final state, always; one per turn
            self.turn_state = "cancelled" if ev.stop_reason == "cancelled" else "ended"
            self._emit(self._turn_state_note())
        self.undelivered = self._queue.undelivered(ev.undelivered)
        ended: f.SessionEndedNote = {
            "stopReason": ev.stop_reason,
            "undelivered": self.undelivered,  # A17: never dropped silently
        }
        if ev.error is not None:
            ended["error"] = ev.error
        self._emit(Live("_agent_channel/session_ended", ended))
        self._release()
        self.questions.close()
        if self._release_approvals is not None:
            self._release_approvals()
        self.ended.set()
        self._changed()

    # -- the stream ----------------------------------------------------------------------

    def _chunk(self, message_id: str, kind: str, text: str) -> None:
        self._ring.chunk(message_id, kind, text)
        self._emit(Chunk(message_id, kind, text))

    def _changed(self) -> None:
        if self._on_change is not None:
            try:
                self._on_change()
            except Exception:
                log.exception("execution %s: the change hook failed", self.id)

    def close(self) -> None:
        """Stop watching (the server is closing)."""
        self.flush()
        self._release()
        self.questions.close()
        if self._release_approvals is not None:
            self._release_approvals()
