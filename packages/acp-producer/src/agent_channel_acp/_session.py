"""One ACP session: one top-level execution, its pending prompts and its update stream.

Threading model: everything runs on the connection's event loop. The event
subscriber runs inside the consumer's task. Entries (updates to send, prompt
answers) are handled strictly in order, so a prompt's answer always follows
every update of its turn: when nothing is queued ahead of an entry and the
transport has nothing buffered, the subscriber handles it on the spot (its
frames are written at once, a prompt answer is resolved at once); otherwise it
joins the outbox, which a sender task per session works through, waiting for
the peer when it is slow to read.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from acp import RequestError
from acp.meta import CLIENT_METHODS
from acp.schema import (
    AllowedOutcome,
    PermissionOption,
    PromptResponse,
    SessionNotification,
    ToolCallUpdate,
    UsageUpdate,
)
from acp.schema import Usage as AcpUsage
from acp.utils import serialize_params
from agent_channel import (
    AgentRef,
    AwaitingInput,
    Cancel,
    ChannelClosed,
    ChatMessage,
    ChatMessageUser,
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
    TurnCancelled,
    TurnStarted,
    Usage,
    UserMessage,
    open_channel,
    thaw,
)

from . import _mapping as m

log = logging.getLogger("agent_channel_acp")

Body = Callable[[], Awaitable[object]]
"""An execution body, as an agent factory returns it."""

ALLOW = "allow_once"
REJECT = "reject_once"
_OPTIONS = [
    PermissionOption(option_id=ALLOW, name="Allow", kind="allow_once"),
    PermissionOption(option_id=REJECT, name="Reject", kind="reject_once"),
]


class ClientConn(Protocol):
    """The part of the SDK's agent-side connection a session uses."""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None: ...

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> Any: ...


class FrameWriter(Protocol):
    """A synchronous way to the wire (the connection's transport), for updates sent on the spot."""

    def ready(self) -> bool:
        """True when a frame written now goes straight out (no backlog, no backpressure)."""
        ...

    def write_frame(self, message: dict[str, Any]) -> None: ...

    async def drain(self) -> None:
        """Wait while the peer is not reading (backpressure)."""
        ...


_SESSION_UPDATE = CLIENT_METHODS["session_update"]


@dataclass(slots=True)
class _Resolve:
    futures: list[asyncio.Future[PromptResponse]]
    stop_reason: StopReason
    error: str | None = None


@dataclass(slots=True)
class _Announce:
    call: ToolCall


@dataclass(slots=True)
class _Allowed:
    tool_call_id: str


@dataclass(slots=True)
class _Barrier:
    done: asyncio.Future[None]


@dataclass(slots=True)
class _Replay:
    history: list[ChatMessage]


_Entry = ExecutionEvent | _Resolve | _Announce | _Allowed | _Barrier | _Replay


class Session:
    """The producer's side of one ACP session (see the module docstring)."""

    def __init__(
        self,
        session_id: str,
        conn: ClientConn,
        body: Body,
        *,
        approve: bool = False,
        context_window: int | None = None,
        writer: FrameWriter | None = None,
    ) -> None:
        self.id = session_id
        self._conn = conn
        self._writer = writer
        self._busy = False  # the sender is part-way through an entry
        self._gone = False  # the client went away: nothing more is written
        self._body = body
        self._approve = approve
        self._context_window = context_window
        self._ref: AgentRef | None = None
        self._queued: dict[str, asyncio.Future[PromptResponse]] = {}
        self._consumed: list[asyncio.Future[PromptResponse]] = []
        self._own_ids: set[str] = set()
        self._cancel_next_turn = False
        self._finished: ExecutionFinished | None = None
        self._history: list[ChatMessage] = []
        self._outbox: deque[_Entry] = deque()
        self._wake = asyncio.Event()
        self._open = asyncio.Event()
        self._ready = asyncio.Event()
        self._announced: set[str] = set()
        self._awaiting_approval: set[str] = set()
        self._unfinished: set[str] = set()
        self._streamed: set[str] = set()
        self._turn_usage: Usage | None = None
        self._run_task: asyncio.Task[None] | None = None
        self._send_task: asyncio.Task[None] | None = None

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Start the execution and the sender; return once the ref is taken."""
        self._send_task = asyncio.create_task(self._send_loop(), name=f"acp-send-{self.id}")
        self._run_task = asyncio.create_task(self._run(), name=f"acp-exec-{self.id}")
        await self._ready.wait()

    def open(self) -> None:
        """Let updates flow: called once the ``session/new`` response is on the wire."""
        self._open.set()

    async def close(self, grace: float = 0.5) -> None:
        """Stop the execution (outer cancellation, not an interrupt) and the sender."""
        tasks = [t for t in (self._run_task, self._send_task) if t is not None]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=grace)

    async def _run(self) -> None:
        approver = self._approve_call if self._approve else None
        try:
            async with open_channel(approver=approver) as ch:
                ref = self._ref = ch.ref()
                release = ref.mark_live()
                ref.subscribe(self._on_event)
                self._ready.set()
                try:
                    await self._body()
                finally:
                    release()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("session %s: the agent failed", self.id)
        finally:
            self._ready.set()

    # -- requests ----------------------------------------------------------------------

    async def prompt(self, content: Any) -> PromptResponse:
        """Post the prompt and wait for the end of the turn that consumes it."""
        ref = self._ref
        if ref is None or self._finished is not None:
            raise RequestError.invalid_request(
                {"reason": "the session's agent has finished", "sessionId": self.id}
            )
        item = UserMessage(content, source="operator")
        fut: asyncio.Future[PromptResponse] = asyncio.get_running_loop().create_future()
        self._queued[item.id] = fut
        self._own_ids.add(item.id)
        try:
            ref.post(item)
        except ChannelClosed:
            self._queued.pop(item.id, None)
            raise RequestError.invalid_request(
                {"reason": "the session's agent has finished", "sessionId": self.id}
            ) from None
        return await fut

    def cancel(self) -> None:
        """Interrupt the turn a pending prompt runs in; with nothing pending, do nothing at all."""
        ref = self._ref
        if ref is None or not (self._queued or self._consumed):
            return
        if ref.turn_state == "started":
            ref.interrupt(Cancel("user_cancel"))
        else:
            # Between turns (or parked with the prompt not yet drained) a posted Cancel
            # would be dropped or would race the prompt: stop the next turn instead.
            self._cancel_next_turn = True

    async def replay(self) -> None:
        """Queue the conversation so far as updates, ahead of anything that follows."""
        self._push(_Replay(list(self._history)))
        await self.flush()

    async def flush(self) -> None:
        """Wait until everything queued so far is on the wire."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._push(_Barrier(done))
        await done

    # -- the consumer's side (runs in the consumer's task) -----------------------------

    def _on_event(self, ev: ExecutionEvent) -> None:
        if isinstance(ev, ModelDelta):  # by far the most frequent: test it first
            self._push(ev)
            return
        if isinstance(ev, ItemsDrained):
            for item in ev.items:
                fut = self._queued.pop(item.id, None)
                if fut is not None:
                    self._consumed.append(fut)
            return
        if isinstance(ev, TurnStarted):
            if self._cancel_next_turn and self._ref is not None:
                self._cancel_next_turn = False
                self._ref.interrupt(Cancel("user_cancel"))
            return
        if isinstance(ev, TurnCancelled):
            self._push(ev)
            self._resolve_consumed("cancelled")
            return
        if isinstance(ev, AwaitingInput):
            self._resolve_consumed(ev.stop_reason)
            return
        if isinstance(ev, MessageAppended):
            msg = ev.message
            if ev.index == len(self._history):
                self._history.append(msg)
            elif ev.index < len(self._history):
                self._history[ev.index] = msg
            if isinstance(msg, ChatMessageUser) and msg.id not in self._own_ids:
                self._push(ev)  # a message the agent added itself: show it
            return
        if isinstance(ev, ExecutionFinished):
            self._finished = ev
            futures = [*self._consumed, *self._queued.values()]
            self._consumed.clear()
            self._queued.clear()
            self._cancel_next_turn = False
            self._push(_Resolve(futures, ev.stop_reason or "end_turn", ev.error))
            return
        if isinstance(ev, ModelCallFinished | ToolCallStarted | ToolCallFinished):
            self._push(ev)

    def _resolve_consumed(self, stop_reason: StopReason) -> None:
        futures = self._consumed
        if futures:
            self._consumed = []
            self._push(_Resolve(futures, stop_reason))
        if not self._queued and not self._consumed:
            self._cancel_next_turn = False

    async def _approve_call(self, call: ToolCall) -> bool:
        self._push(_Announce(call))
        await self.flush()
        update = ToolCallUpdate(
            tool_call_id=call.id,
            title=call.name,
            kind="other",
            status="pending",
            raw_input=thaw(call.arguments),
        )
        try:
            resp = await self._conn.request_permission(
                session_id=self.id, tool_call=update, options=_OPTIONS
            )
        except (RequestError, ConnectionError, ValueError) as e:
            log.warning("session %s: permission request failed (%s); rejecting", self.id, e)
            return False
        outcome = getattr(resp, "outcome", None)
        allowed = isinstance(outcome, AllowedOutcome) and outcome.option_id == ALLOW
        if allowed:
            self._push(_Allowed(call.id))
        return allowed

    # -- the sender --------------------------------------------------------------------

    def _push(self, entry: _Entry) -> None:
        if not (self._outbox or self._busy) and self._writes_now(entry):
            try:
                for update in self._prepare(entry):
                    self._write(update)
            except ConnectionError:
                self._gone = True
                log.debug("session %s: client gone", self.id)
            except Exception:
                log.exception("session %s: sending an update failed", self.id)
            return
        self._outbox.append(entry)
        self._wake.set()

    def _writes_now(self, entry: _Entry) -> bool:
        """Whether ``entry`` can be handled on the spot (see the module docstring)."""
        writer = self._writer
        return (
            writer is not None
            and self._open.is_set()
            and not self._gone
            and not isinstance(entry, _Replay)  # possibly long: let the sender pace it
            and writer.ready()
        )

    def _write(self, update: Any) -> None:
        assert self._writer is not None
        notification = SessionNotification(session_id=self.id, update=update)
        self._writer.write_frame(
            {"jsonrpc": "2.0", "method": _SESSION_UPDATE, "params": serialize_params(notification)}
        )

    async def _send_loop(self) -> None:
        await self._open.wait()
        outbox = self._outbox
        try:
            while True:
                if not outbox:
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                self._busy = True
                try:
                    for update in self._prepare(outbox.popleft()):
                        await self._send(update)
                finally:
                    self._busy = False
        except ConnectionError:
            self._gone = True
            log.debug("session %s: client gone", self.id)

    async def _send(self, update: Any) -> None:
        if self._writer is None:
            await self._conn.session_update(session_id=self.id, update=update)
            return
        self._write(update)  # the same bytes as the SDK's session_update, one await fewer
        await self._writer.drain()

    def _prepare(self, entry: _Entry) -> list[Any]:
        """Bookkeeping for ``entry``; the updates it sends, in order.

        Answers and barriers take effect here: every entry before them has been sent.
        """
        if isinstance(entry, ModelDelta):
            self._streamed.add(entry.message_id)
            chunk = m.text_chunk if entry.kind == "text" else m.thought_chunk
            return [chunk(entry.text, entry.message_id)]
        if isinstance(entry, ToolCallStarted):
            self._unfinished.add(entry.tool_call_id)
            if entry.tool_call_id in self._announced:
                return [m.tool_started_update(entry)]
            # With approval on, the request follows: the card waits as "pending".
            self._announced.add(entry.tool_call_id)
            if self._approve:
                self._awaiting_approval.add(entry.tool_call_id)
            return [
                m.tool_start(
                    entry.tool_call_id,
                    title=entry.title or entry.name,
                    kind=entry.kind,
                    raw_input=thaw(entry.arguments),
                    status="pending" if self._approve else "in_progress",
                )
            ]
        if isinstance(entry, ToolCallFinished):
            self._unfinished.discard(entry.tool_call_id)
            self._awaiting_approval.discard(entry.tool_call_id)
            out: list[Any] = []
            if entry.tool_call_id not in self._announced:
                # Never started (rejected, say): a card first, so no update is orphaned.
                self._announced.add(entry.tool_call_id)
                out.append(
                    m.tool_start(entry.tool_call_id, title=entry.name, kind="other", raw_input=None)
                )
            out.append(m.tool_finished_update(entry))
            return out
        if isinstance(entry, ModelCallFinished):
            return self._model_finished(entry)
        if isinstance(entry, _Resolve):
            self._answer(entry)
            return []
        if isinstance(entry, TurnCancelled):
            # a consumer that broke rule 1
            out = [m.tool_failed_update(i, "cancelled") for i in sorted(self._unfinished)]
            self._unfinished.clear()
            return out
        if isinstance(entry, MessageAppended):
            if isinstance(entry.message, ChatMessageUser):
                return list(m.user_chunks(entry.message))
            return []
        if isinstance(entry, _Announce):
            if entry.call.id in self._announced:
                return []
            self._announced.add(entry.call.id)
            self._awaiting_approval.add(entry.call.id)
            return [
                m.tool_start(
                    entry.call.id,
                    title=entry.call.name,
                    kind="other",
                    raw_input=thaw(entry.call.arguments),
                    status="pending",
                )
            ]
        if isinstance(entry, _Allowed):
            if entry.tool_call_id not in self._awaiting_approval:
                return []
            self._awaiting_approval.discard(entry.tool_call_id)
            return [m.tool_status_update(entry.tool_call_id, "in_progress")]
        if isinstance(entry, _Barrier):
            if not entry.done.done():
                entry.done.set_result(None)
            return []
        if isinstance(entry, _Replay):
            return list(m.replay_updates(entry.history))
        return []

    def _model_finished(self, ev: ModelCallFinished) -> list[Any]:
        out: list[Any] = []
        msg = ev.message
        if msg is not None and msg.id not in self._streamed:
            out.extend(m.assistant_chunks(msg))  # a model that does not stream
        if msg is not None:
            self._streamed.discard(msg.id)
        if ev.usage is not None:
            self._turn_usage = ev.usage if self._turn_usage is None else self._turn_usage + ev.usage
            if self._context_window:
                used = ev.usage.input_tokens + ev.usage.output_tokens
                out.append(
                    UsageUpdate(
                        session_update="usage_update",
                        used=min(used, self._context_window),
                        size=self._context_window,
                    )
                )
        return out

    def _answer(self, r: _Resolve) -> None:
        usage, self._turn_usage = self._turn_usage, None
        for fut in r.futures:
            if fut.done():
                continue
            if r.error is not None:
                fut.set_exception(
                    RequestError.internal_error({"reason": "the agent failed", "details": r.error})
                )
            else:
                fut.set_result(PromptResponse(stop_reason=r.stop_reason, usage=_acp_usage(usage)))


def _acp_usage(usage: Usage | None) -> AcpUsage | None:
    if usage is None:
        return None
    return AcpUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
        thought_tokens=usage.reasoning_tokens,
    )
