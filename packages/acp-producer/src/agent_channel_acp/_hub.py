"""One execution as attach mode serves it: one subscription, fanned out to client bindings.

The hub owns everything about the execution that is the same for every client: its
ref, the single event subscription, the rendered stream (each event becomes ACP
updates once, whatever the number of clients), a ring of the most recent updates
for replay, the turn state, the operator messages posted and not yet folded in, the
tool cards, and the execution's end (with what it never read). Each client session
is a :class:`~._binding.Binding`; the hub hands it every live item in order.

Everything runs on the server's event loop. An execution on another thread has its
events handed over with ``call_soon_threadsafe`` (order kept); approvals asked from
there run here. The ring is bounded (``replay`` slots): streamed text of one message
merges into one slot (up to :data:`~._outbox.RUN_MAX` characters a slot), and a tool
call's later updates merge into its card while the card is in the ring, so a finished
call replays as one ``tool_call`` with its final status and content (A6).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from acp import RequestError
from acp.schema import AllowedOutcome, PermissionOption, ToolCallUpdate
from acp.utils import serialize_params
from agent_channel import (
    AgentRef,
    AwaitingInput,
    ChannelFull,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    ContentReasoning,
    ContentText,
    ExecutionEvent,
    ExecutionFinished,
    ItemsDrained,
    MessageAppended,
    ModelCallFinished,
    ModelDelta,
    StopReason,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    ToolKind,
    TurnCancelled,
    TurnEnded,
    TurnStarted,
    UserMessage,
    thaw,
)

from . import _mapping as m
from ._outbox import RUN_MAX

if TYPE_CHECKING:
    from ._binding import Binding

log = logging.getLogger("agent_channel_acp")

ALLOW = "allow_once"
REJECT = "reject_once"
OPTIONS = [
    PermissionOption(option_id=ALLOW, name="Allow", kind="allow_once"),
    PermissionOption(option_id=REJECT, name="Reject", kind="reject_once"),
]
REPLAY = 100
"""Updates the ring keeps for replay by default (A6)."""
REPLAY_BYTES = 2 * 1024 * 1024
"""Bytes of updates the ring keeps at most, whatever ``replay`` says (its oldest go first)."""
QUEUE_LIMIT = 256
"""Operator messages one execution holds unread in attach mode (every queue update lists
them all); a prompt past it is refused with a reason."""
QUEUE_TEXT = 2000
"""Characters of a queued message's text that ``_agent_channel/queue`` shows."""
CARDS_KEPT = 1024
"""Finished tool calls whose card the hub still knows (title, kind, sequence number), newest
first; every unfinished call is known. So the hub's card maps hold at most this many entries
plus the calls in flight, however many calls the execution makes."""
META = "agent_channel."

Status = str  # "running" | "waiting for operator" | "finished" | "failed"


@dataclass(slots=True)
class Live:
    """One item of the live stream: a ``session/update`` (``method`` None) or an extension
    notification. ``payload`` is the update, or the notification's params without the
    session id; a binding adds its own wire session id."""

    method: str | None
    payload: dict[str, Any]
    size: int = 0
    keep: bool = False
    """Never shed (approval cards: the request that follows refers to them)."""
    encoded: bytes | None = None
    """``payload`` as JSON, made once for every binding that writes it."""
    card: str | None = None
    """For a card's later update: its tool call id (a binding that never got the card
    gets a minimal one first)."""


@dataclass(slots=True)
class Chunk:
    """Streamed model text (merged while a slow client's outbox holds it)."""

    message_id: str
    kind: str
    text: str
    encoded: bytes | None = None
    """The chunk's update as JSON, made once for every binding that writes it."""


@dataclass(slots=True)
class Queued:
    """An operator message posted and not yet folded in (A25)."""

    id: str
    text: str
    client: str
    posted: float

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "text": self.text, "client": self.client, "time": self.posted}


@dataclass(slots=True)
class _Slot:
    seq: int
    update: dict[str, Any]
    parts: list[str] | None = None  # text of a merged chunk run
    size: int = 0


@dataclass(slots=True)
class _Watch:
    """What watching the ref gave: the state at subscription and the release."""

    messages: tuple[ChatMessage, ...]
    turn_state: str
    closed: bool
    release: Callable[[], None] = field(default=lambda: None)


class Hub:
    """One top-level execution, served to any number of bindings (see the module)."""

    def __init__(
        self,
        execution_id: str,
        ref: AgentRef,
        *,
        title: str,
        replay: int = REPLAY,
        approve: bool = False,
        context_window: int | None = None,
        on_change: Callable[[], None] | None = None,
        attach: bool = True,
        echo: Callable[[ChatMessageUser], bool] | None = None,
        observer: Callable[[ExecutionEvent], None] | None = None,
    ) -> None:
        self.id = execution_id
        self.ref = ref
        self.title = title
        self.created = time.time()
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._replay = max(0, replay)
        self._context_window = context_window
        self._on_change = on_change
        self._attach = attach
        self._approving = approve
        self._echo = echo
        self._observer = observer
        self.bindings: tuple[Binding, ...] = ()  # in bind order; replaced, never mutated
        self._last_driver: Binding | None = None
        self._drivers_changed = asyncio.Event()
        # the stream
        self.seq = 0
        self._ring: deque[_Slot] = deque()
        self._ring_bytes = 0
        self._card_slots: dict[str, _Slot] = {}
        self.cards: dict[str, tuple[str, ToolKind]] = {}
        """Each tool call's title and kind, as its live card showed them (S16)."""
        self.card_seq: dict[str, int] = {}
        """The sequence number of each tool call's card (newer binds got it live)."""
        self._announced: set[str] = set()
        self._unfinished: set[str] = set()
        self._cancelled_calls: set[str] = set()  # unfinished calls whose region was cancelled
        self._done_cards: OrderedDict[str, None] = OrderedDict()  # finished, oldest first
        self._shown: OrderedDict[str, None] = OrderedDict()
        self._last_streamed = ""
        self._streamed_by = ""  # the model call that streamed it
        self._history: list[ChatMessage] = []  # for a consumer that publishes but shares none
        self._step: list[Live | Chunk] = []  # this loop step's items, not handed over yet
        # state
        self.turn_state = "idle"
        self.parked: StopReason | None = None  # waiting for an operator message, and why
        self.queue: OrderedDict[str, Queued] = OrderedDict()
        self.pending_approval: str | None = None
        self.finished: ExecutionFinished | None = None
        self.undelivered: list[dict[str, Any]] = []
        self.ending: Callable[[], None] | None = None  # outer cancellation, when we started it
        self.ended = asyncio.Event()
        self._release_approvals: Callable[[], None] | None = None
        watched = self._watch()
        self._release = watched.release
        self.turn_state = watched.turn_state if watched.turn_state != "idle" else "idle"
        for i, msg in enumerate(watched.messages):
            self._appended(MessageAppended(message=msg, index=i))
        if not watched.closed:
            self._in_flight(watched.messages)
        if approve:
            self._route_approvals()
        if watched.closed and self.finished is None:
            self._finish(ExecutionFinished())

    # -- subscription ------------------------------------------------------------------

    def _watch(self) -> _Watch:
        snapshot, release = self.ref.watch(self._on_event_any_thread)
        return _Watch(snapshot.messages, snapshot.turn_state, snapshot.closed, release)

    def _in_flight(self, messages: tuple[ChatMessage, ...]) -> None:
        """Cards for the calls the conversation asked for and has no result of yet: they
        run now. An execution served only once its tools started (``add`` of a ref already
        at work) then shows them, and each can be cancelled alone (A6, A22)."""
        for i in range(len(messages) - 1, -1, -1):
            msg = messages[i]
            if not isinstance(msg, ChatMessageAssistant):
                continue
            later = messages[i + 1 :]
            answered = {r.tool_call_id for r in later if isinstance(r, ChatMessageTool)}
            for call in msg.tool_calls:
                if call.id in answered or call.id in self._announced:
                    continue
                self._announced.add(call.id)
                self._unfinished.add(call.id)
                self.cards[call.id] = (call.name, "other")
                start = m.tool_start(
                    call.id, title=call.name, kind="other", raw_input=thaw(call.arguments)
                )
                self._card(serialize_params(start), call.id)
            return

    def _route_approvals(self) -> None:
        self._release_approvals = self.ref.route_approvals(self.approve)

    def _on_event_any_thread(self, ev: ExecutionEvent) -> None:
        if threading.get_ident() == self._thread:
            self._on_event(ev)
        else:
            self._loop.call_soon_threadsafe(self._on_event, ev)

    def messages(self) -> tuple[ChatMessage, ...]:
        """The execution's conversation now (A19): the one the consumer shares, else the
        messages its events announced."""
        return self.ref.messages() or tuple(self._history)

    # -- state for list / picker -------------------------------------------------------

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

    def describe(self) -> dict[str, Any]:
        """One entry of ``_agent_channel/list`` (A24)."""
        return {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "turnState": self.turn_state,
            "messageCount": len(self.messages()),
            "pendingApproval": self.pending_approval,
            "queued": len(self.queue),
            "drivable": self.running,
            "clients": len(self.bindings),
            "started": self.created,
            "runningToolCalls": self.running_tool_calls(),
        }

    def running_tool_calls(self) -> list[dict[str, Any]]:
        """The tool calls running now, oldest first: what an operator names to cancel one."""
        running = sorted(self._unfinished, key=lambda i: self.card_seq.get(i, 0))
        return [
            {"id": i, "title": self.cards[i][0], "kind": self.cards[i][1]}
            for i in running
            if i in self.cards
        ]

    # -- bindings ----------------------------------------------------------------------

    def bind(self, binding: Binding, *, driver: bool) -> None:
        """Attach ``binding``: its preamble (A5) and then every live item, atomically."""
        self.flush()  # the step's items are in the ring: the replay has them, live must not
        if binding not in self.bindings:
            self.bindings = (*self.bindings, binding)
        if driver:
            self._last_driver = binding
        binding.attached(self, self._replay_frames(), self._turn_state_note())
        self._drivers_changed.set()
        self._changed()

    def unbind(self, binding: Binding) -> None:
        if binding in self.bindings:
            self.bindings = tuple(b for b in self.bindings if b is not binding)
        if self._last_driver is binding:
            self._last_driver = None
        self._drivers_changed.set()
        self._changed()

    def prompted(self, binding: Binding) -> None:
        self._last_driver = binding

    def driver(self) -> Binding | None:
        """Who answers approval requests: the last driver that prompted or bound, else the
        first one still there (A20)."""
        last = self._last_driver
        if last is not None and last.is_driver and last.alive:
            return last
        return next((b for b in self.bindings if b.is_driver and b.alive), None)

    # -- operator requests -------------------------------------------------------------

    def post(self, content: Any, text: str, client: str) -> str:
        """Queue an operator message (A7); raises ``ChannelClosed`` when the execution ended,
        ``ChannelFull`` while ``QUEUE_LIMIT`` messages (or the channel's own limit) wait."""
        if len(self.queue) >= QUEUE_LIMIT:
            raise ChannelFull(f"{QUEUE_LIMIT} operator messages already wait unread")
        item = UserMessage(content, source="operator")
        self.queue[item.id] = Queued(item.id, text[:QUEUE_TEXT], client, time.time())
        try:
            self.ref.post(item)
        except Exception:
            del self.queue[item.id]
            raise
        self._queue_changed()
        return item.id

    def withdraw(self, message_id: str) -> bool:
        if message_id not in self.queue or not self.ref.withdraw(message_id):
            return False
        del self.queue[message_id]
        self._queue_changed()
        return True

    def interrupt(self) -> bool:
        """A driver's ``session/cancel``: stop the running turn; ``False`` when there was none.
        While parked there is no turn to stop, and nothing is queued that could stop a later
        one (A12, A13)."""
        from agent_channel import Cancel

        if self.finished is not None or self.parked is not None:
            return False
        self.ref.interrupt(Cancel("user_cancel"))
        return True

    def cancel_tool_call(self, tool_call_id: str) -> bool:
        if self.finished is not None or tool_call_id not in self._unfinished:
            return False
        if not self.ref.cancel_region(tool_call_id):
            return False
        self._cancelled_calls.add(tool_call_id)
        return True

    def tool_call_state(self, tool_call_id: str) -> str:
        """Why a call cannot be cancelled (A22's ``false``), in a word: ``cancelling`` (a
        cancel is on its way), ``not_in_region`` (it runs, but its agent did not put it in
        ``ch.region(id)``: only the turn can be stopped), ``finished``, ``unknown``."""
        if tool_call_id in self._unfinished and self.finished is None:
            return "cancelling" if tool_call_id in self._cancelled_calls else "not_in_region"
        return "finished" if tool_call_id in self._done_cards else "unknown"

    # -- approvals (A20) ---------------------------------------------------------------

    async def approve(self, call: ToolCall) -> bool:
        if threading.get_ident() != self._thread:
            future = asyncio.run_coroutine_threadsafe(self._approve(call), self._loop)
            return await asyncio.wrap_future(future)
        return await self._approve(call)

    async def _approve(self, call: ToolCall) -> bool:
        self._announce(call)
        self.pending_approval = call.id
        self._changed()
        title, kind = self.cards.get(call.id, (call.name, "other"))
        request = ToolCallUpdate(
            tool_call_id=call.id,
            title=title,
            kind=kind,
            status="pending",
            raw_input=thaw(call.arguments),
        )
        try:
            while True:
                driver = self.driver()
                if driver is None:  # nobody can answer yet: wait for a driver to bind
                    self._drivers_changed.clear()
                    await self._drivers_changed.wait()
                    continue
                outcome = await driver.ask_permission(request, OPTIONS)
                if outcome is None:  # that driver left: the request moves on
                    continue
                allowed = isinstance(outcome, AllowedOutcome) and outcome.option_id == ALLOW
                if allowed and call.id in self._announced and call.id in self.cards:
                    update = m.tool_status_update(call.id, "in_progress")
                    self._update_card(update, call.id, keep=True)
                return allowed
        finally:
            self.pending_approval = None
            self._changed()

    def _announce(self, call: ToolCall) -> None:
        if call.id in self._announced:
            return
        self._announced.add(call.id)
        self.cards.setdefault(call.id, (call.name, "other"))
        title, kind = self.cards[call.id]
        start = m.tool_start(
            call.id, title=title, kind=kind, raw_input=thaw(call.arguments), status="pending"
        )
        self._card(serialize_params(start), call.id, keep=True)

    # -- events (the consumer's side) --------------------------------------------------

    def _on_event(self, ev: ExecutionEvent) -> None:
        self._render(ev)
        if self._observer is not None:
            self._observer(ev)

    def _render(self, ev: ExecutionEvent) -> None:
        if isinstance(ev, ModelDelta):
            mid = ev.message_id
            self._streamed_by = ev.call_id
            if mid != self._last_streamed:
                self._last_streamed = mid
                self._remember_shown(mid)
            self._chunk(mid, ev.kind, ev.text)
        elif isinstance(ev, ItemsDrained):
            self.parked = None
            taken = [item.id for item in ev.items if item.id in self.queue]
            for item_id in taken:
                del self.queue[item_id]
            if taken:
                self._queue_changed()
        elif isinstance(ev, ToolCallStarted):
            self._tool_started(ev)
        elif isinstance(ev, ToolCallFinished):
            self._card_first(ev.tool_call_id, ev.name)
            self._update_card(m.tool_finished_json(ev), ev.tool_call_id)
            self._card_done(ev.tool_call_id)
        elif isinstance(ev, ModelCallFinished):
            self._model_finished(ev)
        elif isinstance(ev, MessageAppended):
            self._appended(ev)
        elif isinstance(ev, TurnStarted):
            self.parked = None
            self._turn("started")
        elif isinstance(ev, TurnEnded):
            if self.turn_state != "cancelled":  # A8: after cancelled, the next is started
                self._turn("ended")
        elif isinstance(ev, TurnCancelled):
            self._close_unfinished("cancelled")
            self._turn("cancelled")
        elif isinstance(ev, AwaitingInput):
            self.parked = ev.stop_reason
            self._changed()
        elif isinstance(ev, ExecutionFinished):  # pyright: ignore[reportUnnecessaryIsInstance]
            self._finish(ev)

    def _tool_started(self, ev: ToolCallStarted) -> None:
        tool_call_id = ev.tool_call_id
        self.cards[tool_call_id] = (ev.title or ev.name, ev.kind)
        self._unfinished.add(tool_call_id)
        if tool_call_id in self._announced:
            self._update_card(serialize_params(m.tool_started_update(ev)), tool_call_id)
            return
        self._announced.add(tool_call_id)
        title, kind = self.cards[tool_call_id]
        status = "pending" if self._approving else "in_progress"  # with approval, a request follows
        start = m.tool_start(
            tool_call_id, title=title, kind=kind, raw_input=thaw(ev.arguments), status=status
        )
        self._card(serialize_params(start), tool_call_id)

    def _card_first(self, tool_call_id: str, name: str) -> None:
        """A card for a call never announced (rejected before it ran)."""
        if tool_call_id in self._announced:
            return
        self._announced.add(tool_call_id)
        title, kind = self.cards.get(tool_call_id, (name, "other"))
        start = m.tool_start(tool_call_id, title=title, kind=kind, raw_input=None)
        self._card(serialize_params(start), tool_call_id)

    def _close_unfinished(self, why: str) -> None:
        for tool_call_id in sorted(self._unfinished):  # a consumer that did not close them
            self._update_card(m.tool_end_json(tool_call_id, "failed", why), tool_call_id)
            self._card_done(tool_call_id)

    def _card_done(self, tool_call_id: str) -> None:
        """A call finished: its card is remembered among the last :data:`CARDS_KEPT`."""
        self._unfinished.discard(tool_call_id)
        self._cancelled_calls.discard(tool_call_id)
        done = self._done_cards
        done[tool_call_id] = None
        done.move_to_end(tool_call_id)
        while len(done) > CARDS_KEPT:
            old, _ = done.popitem(last=False)
            self.cards.pop(old, None)
            self.card_seq.pop(old, None)
            self._announced.discard(old)

    def _model_finished(self, ev: ModelCallFinished) -> None:
        msg = ev.message
        if ev.cancelled and self._attach:  # A9: the client learns the model call is over
            # the message this call streamed; none (the call's id) if it streamed nothing
            streamed = self._streamed_by == ev.call_id and self._last_streamed
            marker = m.chunk_json("text", "", streamed or ev.call_id)
            marker["_meta"] = {f"{META}modelCall": {"id": ev.call_id, "status": "cancelled"}}
            self._emit(Live(None, marker))
        if msg is not None and msg.id not in self._shown:
            self._remember_shown(msg.id)
            self._whole(msg)
        usage = ev.usage
        if usage is not None and self._context_window:
            used = min(usage.input_tokens + usage.output_tokens, self._context_window)
            update = {"sessionUpdate": "usage_update", "used": used, "size": self._context_window}
            self._emit(Live(None, update))

    def _appended(self, ev: MessageAppended) -> None:
        msg = ev.message
        history = self._history
        if ev.index == len(history):
            history.append(msg)
        elif ev.index < len(history):
            history[ev.index] = msg
        if not self._attach:  # stdio: a user message the client did not send shows
            if isinstance(msg, ChatMessageUser) and (self._echo is None or self._echo(msg)):
                for chunk in m.user_chunks(msg):
                    self._emit(Live(None, serialize_params(chunk), _text_size(msg)))
            elif isinstance(msg, ChatMessageAssistant) and msg.id not in self._shown:
                self._remember_shown(msg.id)
                self._whole(msg)
            return
        if isinstance(msg, ChatMessageUser | ChatMessageSystem):
            meta = {f"{META}role": msg.role}
            if isinstance(msg, ChatMessageUser) and msg.source:
                meta[f"{META}source"] = msg.source
            for chunk in m.user_chunks(ChatMessageUser(id=msg.id, content=msg.content)):
                update = serialize_params(chunk)
                update["_meta"] = meta
                self._record(update)
                self._emit(Live(None, update, _text_size(msg)))
        elif isinstance(msg, ChatMessageAssistant) and msg.id not in self._shown:
            self._remember_shown(msg.id)
            self._whole(msg)
        elif isinstance(msg, ChatMessageTool):
            pass  # its result shows in its call's card

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
        if self._attach:
            self._emit(self._turn_state_note())
            self._changed()

    def _turn_state_note(self) -> Live:
        return Live("_agent_channel/turn_state", {"state": self.turn_state})

    def _queue_changed(self) -> None:
        if not self._attach:
            return
        queue = [q.as_json() for q in self.queue.values()]
        self._emit(Live("_agent_channel/queue", {"messages": queue}, 64 * len(queue)))
        self._changed()

    def _finish(self, ev: ExecutionFinished) -> None:
        if self.finished is not None:
            return
        self.finished = ev
        self.parked = None
        if not self._attach:
            self._release()
            self.ended.set()
            return
        self._close_unfinished("the execution ended")
        final = "cancelled" if ev.stop_reason == "cancelled" else self.turn_state
        if final in ("idle", "started"):
            final = "ended"
        self.turn_state = final
        self._emit(self._turn_state_note())  # A8: a final state, always
        reached = {q for q in self.queue}
        unread = [i for i in ev.undelivered if isinstance(i, UserMessage)]
        self.undelivered = [
            {
                "id": i.id,
                "text": i.text[:QUEUE_TEXT],
                "source": i.source,
                **(
                    {"client": self.queue[i.id].client, "time": self.queue[i.id].posted}
                    if i.id in reached
                    else {}
                ),
            }
            for i in unread
        ]
        self.queue.clear()
        ended: dict[str, Any] = {
            "stopReason": ev.stop_reason,
            "undelivered": self.undelivered,  # A17: never dropped silently
        }
        if ev.error is not None:
            ended["error"] = ev.error
        self._emit(Live("_agent_channel/session_ended", ended))
        self._release()
        if self._release_approvals is not None:
            self._release_approvals()
        self.ended.set()
        self._changed()

    # -- the stream ----------------------------------------------------------------------

    def _chunk(self, message_id: str, kind: str, text: str) -> None:
        self.seq += 1
        ring = self._ring
        last = ring[-1] if ring else None
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
            self._ring_bytes += len(text)
            self._trim()
        elif self._replay:
            update = m.chunk_json(kind, "", message_id)
            self._push_slot(_Slot(self.seq, update, [text], len(text)))
        chunk = Chunk(message_id, kind, text)
        self._hand(chunk)

    def _record(self, update: dict[str, Any]) -> None:
        """Keep ``update`` in the ring (a card's later updates merge into it instead)."""
        self.seq += 1
        if self._replay:
            self._push_slot(_Slot(self.seq, dict(update), size=_size(update)))

    def _card(self, update: dict[str, Any], tool_call_id: str, *, keep: bool = False) -> None:
        self.seq += 1
        self.card_seq[tool_call_id] = self.seq
        if self._replay:
            slot = _Slot(self.seq, dict(update), size=_size(update))
            self._push_slot(slot)
            self._card_slots[tool_call_id] = slot
        self._emit(Live(None, update, 256, keep))

    def _update_card(self, update: Any, tool_call_id: str, *, keep: bool = False) -> None:
        if not isinstance(update, dict):
            update = serialize_params(update)
        slot = self._card_slots.get(tool_call_id)
        if slot is not None:
            self.seq += 1
            slot.seq = self.seq
            for key, value in update.items():  # pyright: ignore[reportUnknownVariableType]
                if key != "sessionUpdate":
                    slot.update[key] = value
            grown = _size(slot.update)
            self._ring_bytes += grown - slot.size
            slot.size = grown
            self._trim()
        else:
            self._record(update)  # pyright: ignore[reportUnknownArgumentType]
        size = _size(update)  # pyright: ignore[reportUnknownArgumentType]
        self._emit(Live(None, update, size, keep, card=tool_call_id))  # pyright: ignore[reportUnknownArgumentType]

    def _push_slot(self, slot: _Slot) -> None:
        self._ring.append(slot)
        self._ring_bytes += slot.size
        self._trim()

    def _trim(self) -> None:
        """Keep the ring within ``replay`` slots and :data:`REPLAY_BYTES` (the newest stays)."""
        ring = self._ring
        while len(ring) > self._replay or (self._ring_bytes > REPLAY_BYTES and len(ring) > 1):
            old = ring.popleft()
            self._ring_bytes -= old.size
            tool_call_id = old.update.get("toolCallId")
            if tool_call_id is not None and self._card_slots.get(tool_call_id) is old:
                del self._card_slots[tool_call_id]

    def _emit(self, live: Live) -> None:
        self._hand(live)

    def _hand(self, item: Live | Chunk) -> None:
        """Give ``item`` to every binding: in attach mode at the end of this loop step, with
        the step's other items: a client in step with the stream gets the whole burst as one
        write of bytes built once for all of them (the per-client cost of an event is nil)."""
        if not self.bindings:
            return
        if not self._attach:
            for b in self.bindings:
                if isinstance(item, Chunk):
                    b.chunk(item)
                else:
                    b.live(item)
            return
        step = self._step
        step.append(item)
        if len(step) == 1:
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Hand the items of this loop step to the bindings now (before a bind, an approval
        request or a response that must come after them)."""
        step = self._step
        if not step:
            return
        self._step = []
        cards = {i.card for i in step if type(i) is Live and i.card is not None}
        shared: bytes | None = None  # the same bytes for every binding in step with the stream
        for b in self.bindings:
            if b.in_sync(self.id, cards):
                if shared is None:
                    shared = b.encode(step)
                b.write_step(shared)
            else:
                b.take(step)

    def _replay_frames(self) -> list[dict[str, Any]]:
        """The ring as replay updates, each marked in ``_meta`` (A5, A6)."""
        out: list[dict[str, Any]] = []
        for slot in self._ring:
            update = dict(slot.update)
            if slot.parts is not None:
                update["content"] = {"type": "text", "text": "".join(slot.parts)}
            meta = dict(update.get("_meta") or {})
            meta[f"{META}replay"] = True
            meta[f"{META}seq"] = slot.seq
            update["_meta"] = meta
            out.append(update)
        return out

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
        if self._release_approvals is not None:
            self._release_approvals()


def _size(update: dict[str, Any]) -> int:
    """About how many bytes an update holds (what the ring and outboxes count)."""
    return sum(len(v) if isinstance(v, str) else len(str(v)) for v in update.values())


def _text_size(msg: ChatMessage) -> int:
    return len(msg.text)


def queue_full(session_id: str, error: ChannelFull) -> RequestError:
    """A prompt the execution cannot take yet: too many wait unread (its own limit)."""
    reason = f"the agent has not read the messages already queued ({error}); send again later"
    return RequestError.invalid_request({"reason": reason, "sessionId": session_id})


def not_attachable(session_id: str) -> RequestError:
    return RequestError.invalid_request(
        {
            "reason": "the execution is not currently attachable: its loop has ended",
            "sessionId": session_id,
        }
    )
