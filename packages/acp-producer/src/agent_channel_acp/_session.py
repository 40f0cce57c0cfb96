"""stdio mode: one ACP session is one hub and this one binding, whose prompts wait for
the turn.

The :class:`~._hub.Hub` watches the execution and renders its events (the same rendering
attach mode uses); this module adds what only stdio has: prompts answered when their turn
ends, the S-rules' ordering of answers and updates, and shedding that keeps the client.
Everything runs on the connection's event loop; the hub's callbacks run inside the
consumer's task and never wait.

Prompts. Each prompt is posted as a ``UserMessage`` and answered when the turn that
drained it ends (``AwaitingInput``: its stop reason; ``TurnCancelled``: ``cancelled``),
when the execution ends (its stop reason or its failure; a prompt it never drained gets
-32600, S15), or at once when a cancel withdraws it. A cancel marks every prompt not yet
answered: each is answered ``cancelled`` whenever its answer goes out (S5b).

Updates. The hub hands over each event's updates before the session sees the event, so
an answer follows every update of its turn. Entries are written strictly in order, and
nothing after an answer is written before the SDK has written that response (S16). When
nothing is queued or held and the transport has nothing buffered, an entry is written on
the spot; otherwise it joins the outbox (bounded, text merges: see ``_outbox``), which a
sender task works through while a backlog exists. A card's update whose card the client
never got (it was shed) is preceded by a minimal card, so no update names an unknown call.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol
from uuid import uuid4

from acp import RequestError
from acp.meta import CLIENT_METHODS
from acp.schema import PermissionOption, PromptResponse, ToolCallUpdate
from acp.schema import Usage as AcpUsage
from agent_channel import (
    AgentRef,
    AwaitingInput,
    Cancel,
    ChannelClosed,
    ChannelFull,
    ChatMessage,
    ChatMessageTool,
    ChatMessageUser,
    ExecutionEvent,
    ExecutionFinished,
    ItemsDrained,
    ModelCallFinished,
    StopReason,
    TurnCancelled,
    Usage,
    UserMessage,
    open_channel,
)

from . import _mapping as m
from ._execution import BACKLOG_LIMIT, Body, NotRunnable
from ._handler import queue_full
from ._hub import Hub
from ._outbox import Outbox, Shed, Text
from ._stream import Chunk, Live

__all__ = ["BACKLOG_LIMIT", "Body", "NotRunnable", "Session"]  # the first three: old places

log = logging.getLogger("agent_channel_acp")

NOT_READ = "the agent finished before reading this prompt"
FINISHED = "the session's agent has finished"

_SESSION_UPDATE = CLIENT_METHODS["session_update"]
_RECENT = 256  # prompt ids remembered to tell "ours" from "new" (bounded)
_FINAL = frozenset({"completed", "failed"})


class ClientConn(Protocol):
    """The part of the SDK's agent-side connection a session uses."""

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> Any: ...


class FrameWriter(Protocol):
    """A synchronous way to the wire (the connection's transport)."""

    def ready(self) -> bool:
        """True when a frame written now goes straight out (no backlog, no backpressure)."""
        ...

    def write_frame(self, message: dict[str, Any]) -> None: ...

    async def drain(self) -> None:
        """Wait while the peer is not reading (backpressure)."""
        ...


@dataclass(slots=True, eq=False)
class _Prompt:
    id: str
    future: asyncio.Future[PromptResponse]
    task: asyncio.Task[Any] | None
    cancelled: bool = False
    """A cancel arrived before its answer went out: it is answered ``cancelled``."""


@dataclass(slots=True)
class _Answer:
    prompts: list[_Prompt]
    stop_reason: StopReason = "end_turn"
    error: str | None = None
    unread: bool = False
    usage: Usage | None = None


@dataclass(slots=True)
class _Barrier:
    done: asyncio.Future[None]


@dataclass(slots=True)
class _Replay:
    history: tuple[ChatMessage, ...]


@dataclass(slots=True)
class _End:
    pass


_Entry = Live | _Answer | _Barrier | _Replay | _End


@dataclass(slots=True)
class _Recent:
    """A set that remembers only its last ``_RECENT`` members."""

    items: dict[str, None] = field(default_factory=dict[str, None])

    def add(self, key: str) -> None:
        items = self.items
        items[key] = None
        if len(items) > _RECENT:
            del items[next(iter(items))]

    def take(self, key: str) -> bool:
        """Forget ``key``; whether it was there."""
        return self.items.pop(key, 0) is None


class Session:
    """The producer's side of one stdio ACP session (see the module docstring)."""

    def __init__(
        self,
        session_id: str,
        conn: ClientConn,
        body: Body,
        writer: FrameWriter,
        *,
        approve: bool = False,
        context_window: int | None = None,
        backlog_limit: int = BACKLOG_LIMIT,
        on_done: Callable[[Session], None] | None = None,
    ) -> None:
        self.id = session_id
        self._conn = conn
        self._writer = writer
        self._body = body
        self._approve = approve
        self._context_window = context_window
        self._on_done = on_done
        self._ref: AgentRef | None = None
        self._hub: Hub | None = None
        self._start_error: str | None = None
        self._finished: ExecutionFinished | None = None
        # prompts
        self._pending: dict[str, _Prompt] = {}  # not answered yet, by item id
        self._queued: dict[str, _Prompt] = {}  # posted, not drained
        self._consumed: list[_Prompt] = []  # drained, waiting for their turn's end
        self._our_cancels: set[str] = set()
        self._own = _Recent()  # ids of the client's prompts: not echoed back
        self._turn_usage: Usage | None = None
        # writing
        self._outbox: Outbox[_Entry] = Outbox(backlog_limit, self._shed)
        self._carded: set[str] = set()  # tool calls whose card the client was sent
        self._opened = False
        self._gone = False
        self._holds = 0  # answers resolved whose response the SDK has not written yet
        self._sender: asyncio.Task[None] | None = None
        self._run_task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Start the execution; return once it runs. Raises :class:`NotRunnable`."""
        if not callable(self._body):
            raise NotRunnable(f"it returned {self._body!r}, which is not callable")
        self._run_task = asyncio.create_task(self._run(), name=f"acp-exec-{self.id}")
        await self._ready.wait()
        if self._start_error is not None:
            raise NotRunnable(self._start_error)

    def open(self) -> None:
        """Let updates flow: called once the ``session/new`` response is on the wire."""
        self._opened = True
        self._kick()

    async def end(self, grace: float = 0.5) -> None:
        """Stop the execution (outer cancellation, not an interrupt) and the sender."""
        tasks = [t for t in (self._run_task, self._sender) if t is not None]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=grace)

    async def close(self, grace: float = 0.5) -> None:
        """``session/close``: every pending prompt is answered ``cancelled``, the execution
        stops, and its last updates and answers go out (waiting at most ``grace`` each)."""
        for p in self._pending.values():
            p.cancelled = True
        run = self._run_task
        if run is not None and not run.done():
            run.cancel()
            await asyncio.wait([run], timeout=grace)
        try:
            await asyncio.wait_for(self.flush(), grace)
        except TimeoutError:
            log.warning("session %s: closed with updates still queued for the client", self.id)

    async def _run(self) -> None:
        try:
            async with open_channel() as ch:
                ref = ch.ref()
                try:
                    run = self._body()
                except Exception as e:
                    self._start_error = f"calling it raised {e!r}"
                    return
                if not inspect.isawaitable(run):
                    self._start_error = f"calling it returned {run!r}, not an awaitable"
                    return
                self._ref = ref
                release = ref.mark_live()
                hub = self._hub = Hub(
                    self.id,
                    ref,
                    title="",
                    replay=0,
                    approve=self._approve,
                    context_window=self._context_window,
                    attach=False,
                    echo=self._echo,
                    observer=self._on_event,
                )
                hub.bind(self, driver=True)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
                self._ready.set()
                try:
                    await run
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
        """Post the prompt and wait for its answer (see the module docstring)."""
        ref = self._ref
        if ref is None or self._finished is not None:
            raise RequestError.invalid_request({"reason": FINISHED, "sessionId": self.id})
        item = UserMessage(content, source="operator")
        p = _Prompt(item.id, asyncio.get_running_loop().create_future(), asyncio.current_task())
        self._pending[item.id] = self._queued[item.id] = p  # before a drain can see it
        self._own.add(item.id)
        try:
            ref.post(item)
        except (ChannelClosed, ChannelFull) as e:
            del self._pending[item.id], self._queued[item.id]
            self._own.take(item.id)
            if isinstance(e, ChannelFull):
                raise queue_full(self.id, e) from None
            raise RequestError.invalid_request({"reason": FINISHED, "sessionId": self.id}) from None
        return await p.future

    def cancel(self) -> None:
        """S5b: every prompt not answered yet will answer ``cancelled``; those no boundary has
        taken are withdrawn (answered now), and the execution is interrupted: its turn stops,
        or the next one does (a Cancel that finds the agent parked is dropped by the core).
        With nothing pending this does nothing at all (S7)."""
        ref = self._ref
        if ref is None or not self._pending:
            return
        for p in self._pending.values():
            p.cancelled = True
        withdrawn = [p for p in self._queued.values() if ref.withdraw(p.id)]
        for p in withdrawn:
            del self._queued[p.id]
        if withdrawn:
            self._push(_Answer(withdrawn, "cancelled"), keep=True)
        if self._finished is None:
            cancel = Cancel("user_cancel")
            self._our_cancels.add(cancel.id)
            ref.interrupt(cancel)

    async def replay(self) -> None:
        """Queue the conversation so far as updates, ahead of anything that follows."""
        hub = self._hub
        self._push(_Replay(hub.messages() if hub is not None else ()), keep=True)
        await self.flush()

    async def flush(self) -> None:
        """Wait until everything queued so far is on the wire."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._push(_Barrier(done), keep=True)
        await done

    # -- the hub's binding (runs in the consumer's task) --------------------------------

    is_driver = True
    alive = True

    def attached(self, hub: Hub, replay: list[dict[str, Any]], snapshot: Live) -> None:
        """stdio has no bind preamble: the client started the execution itself."""

    def live(self, live: Live) -> None:
        if live.method is not None:
            return  # attach mode's extension notifications
        self._push(live, keep=live.keep, size=live.size)

    def chunk(self, chunk: Chunk) -> None:
        if self._clear() and not self._outbox:
            self._write(self._notify(m.chunk_json(chunk.kind, chunk.text, chunk.message_id)))
            return
        self._outbox.text(chunk.message_id, chunk.kind, chunk.text)
        self._kick()

    async def ask_permission(self, request: ToolCallUpdate, options: list[PermissionOption]) -> Any:
        """The client's answer; a request that fails counts as a rejection (S10)."""
        await self.flush()  # the card (and the narration) first
        try:
            resp = await self._conn.request_permission(
                session_id=self.id, tool_call=request, options=options
            )
        except (RequestError, ConnectionError, ValueError) as e:
            log.warning("session %s: permission request failed (%s); rejecting", self.id, e)
            return False
        return getattr(resp, "outcome", None)

    def _echo(self, message: ChatMessageUser) -> bool:
        return not self._own.take(message.id)  # the client's own prompts are not echoed

    def _on_event(self, ev: ExecutionEvent) -> None:
        """Prompt bookkeeping, after the hub has handed over the event's updates."""
        if isinstance(ev, ItemsDrained):
            for item in ev.items:
                p = self._queued.pop(item.id, None)
                if p is not None:
                    self._consumed.append(p)
        elif isinstance(ev, ModelCallFinished):
            usage = ev.usage
            if usage is not None:
                self._turn_usage = usage if self._turn_usage is None else self._turn_usage + usage
        elif isinstance(ev, TurnCancelled):
            ours = ev.cancel.id in self._our_cancels
            self._our_cancels.discard(ev.cancel.id)
            # Ours covers the prompts sent before it; another producer's, the whole turn.
            done = [p for p in self._consumed if p.cancelled or not ours]
            if done:
                self._consumed = [p for p in self._consumed if not (p.cancelled or not ours)]
            self._answer_turn(done, "cancelled")
        elif isinstance(ev, AwaitingInput):
            self._our_cancels.clear()  # nothing left to stop: a late one is dropped
            done, self._consumed = self._consumed, []
            self._answer_turn(done, ev.stop_reason)
        elif isinstance(ev, ExecutionFinished):
            self._finished = ev
            self._our_cancels.clear()
            done, self._consumed = self._consumed, []
            if done:
                usage, self._turn_usage = self._turn_usage, None
                self._push(
                    _Answer(done, ev.stop_reason or "end_turn", ev.error, usage=usage), keep=True
                )
            unread = list(self._queued.values())
            self._queued.clear()
            if unread:
                self._push(_Answer(unread, unread=True), keep=True)
            self._push(_End(), keep=True)

    def _answer_turn(self, prompts: list[_Prompt], stop_reason: StopReason) -> None:
        usage, self._turn_usage = self._turn_usage, None
        if prompts:
            self._push(_Answer(prompts, stop_reason, usage=usage), keep=True)

    # -- writing -------------------------------------------------------------------------

    def _clear(self) -> bool:
        """Whether an entry may be written on the spot: nothing queued or held before it."""
        return (
            self._sender is None
            and not self._holds
            and self._opened
            and (self._gone or self._writer.ready())
        )

    def _push(self, entry: _Entry, *, keep: bool = False, size: int = 0) -> None:
        if self._clear() and not self._outbox:
            for frame in self._frames(entry):
                self._write(frame)
            return
        self._outbox.put(entry, size, keep=keep)
        self._kick()

    def _write(self, frame: dict[str, Any]) -> None:
        if self._gone:
            return
        try:
            self._writer.write_frame(frame)
        except ConnectionError:
            self._lost()

    def _lost(self) -> None:
        self._gone = True
        log.debug("session %s: client gone; answering without writing", self.id)

    def _kick(self) -> None:
        """Start the sender if a backlog waits and nothing holds it."""
        if self._sender is None and self._opened and not self._holds and self._outbox:
            self._sender = asyncio.get_running_loop().create_task(
                self._send_loop(), name=f"acp-send-{self.id}"
            )

    async def _send_loop(self) -> None:
        outbox, writer = self._outbox, self._writer
        try:
            while outbox and not self._holds:
                for frame in self._frames(outbox.popleft()):
                    if self._gone:
                        break
                    try:
                        writer.write_frame(frame)
                        await writer.drain()
                    except ConnectionError:
                        self._lost()
        finally:
            self._sender = None

    def _release(self, task: asyncio.Task[Any]) -> None:
        self._holds -= 1
        self._kick()

    def _shed(self, entry: _Entry) -> _Entry | None:
        """What stays of a dropped entry: the final state of a card the client already has."""
        if isinstance(entry, Live) and entry.method is None:
            update = entry.payload
            if (
                update.get("sessionUpdate") == "tool_call_update"
                and update.get("status") in _FINAL
                and update.get("toolCallId") in self._carded
            ):
                small = m.tool_end_json(update["toolCallId"], update["status"], None)
                return Live(None, small, 0, True)
        return None

    # -- rendering (runs when an entry is written; every entry before it is out) ---------

    def _frames(self, entry: _Entry | Text | Shed) -> list[dict[str, Any]]:
        """The frames ``entry`` sends. The one failure policy: an update that cannot be
        rendered is logged and skipped; the session and its answers go on."""
        if isinstance(entry, Text):
            return [self._notify(m.chunk_json(entry.kind, entry.text, entry.message_id))]
        if isinstance(entry, Live):
            return self._live_frames(entry.payload)
        try:
            updates = self._render(entry)
        except Exception:
            log.exception("session %s: an update could not be sent; skipped", self.id)
            return []
        frames: list[dict[str, Any]] = []
        for update in updates:
            try:
                frames.extend(self._live_frames(m.as_json(update)))
            except Exception:
                log.exception("session %s: an update could not be sent; skipped", self.id)
        return frames

    def _live_frames(self, update: dict[str, Any]) -> list[dict[str, Any]]:
        kind = update.get("sessionUpdate")
        if kind == "tool_call":
            self._carded.add(update["toolCallId"])
        elif kind == "tool_call_update" and update["toolCallId"] not in self._carded:
            # its card was shed: a minimal one first, so the update names a known call
            tool_call_id = update["toolCallId"]
            self._carded.add(tool_call_id)
            hub = self._hub
            title, kind_ = (hub.cards if hub is not None else {}).get(
                tool_call_id, (tool_call_id, "other")
            )
            card = m.as_json(m.tool_start(tool_call_id, title=title, kind=kind_, raw_input=None))
            return [self._notify(card), self._notify(update)]
        return [self._notify(update)]

    def _notify(self, update: dict[str, Any]) -> dict[str, Any]:
        """The ``session/update`` frame for an update already in its JSON form."""
        return {
            "jsonrpc": "2.0",
            "method": _SESSION_UPDATE,
            "params": {"sessionId": self.id, "update": update},
        }

    def _render(self, entry: _Entry | Shed) -> list[Any]:
        if isinstance(entry, _Answer):
            self._answer(entry)
            return []
        if isinstance(entry, _Barrier):
            if not entry.done.done():
                entry.done.set_result(None)
            return []
        if isinstance(entry, _Replay):
            return self._replay(entry.history)
        if isinstance(entry, Shed):
            note = (
                f"[agent-channel: {_amount(entry.size)} of updates were not sent: the client "
                "stopped reading. session/load replays the conversation.]"
            )
            return [m.chunk_json("text", note, f"shed-{uuid4().hex[:12]}")]
        if isinstance(entry, _End):
            if self._on_done is not None:
                self._on_done(self)
            return []
        return []

    def _replay(self, history: tuple[ChatMessage, ...]) -> list[Any]:
        results = {msg.tool_call_id: msg for msg in history if isinstance(msg, ChatMessageTool)}
        cards = self._hub.cards if self._hub is not None else {}
        out: list[Any] = []
        for msg in history:
            try:
                out.extend(m.message_updates(msg, results, cards))
            except Exception:
                log.exception("session %s: a replayed message could not be sent; skipped", self.id)
        return out

    def _answer(self, a: _Answer) -> None:
        usage: AcpUsage | None = None
        if a.usage is not None:
            try:
                usage = _acp_usage(a.usage)
            except Exception:
                log.exception("session %s: the turn's usage could not be sent; left out", self.id)
        for p in a.prompts:
            self._pending.pop(p.id, None)
            fut = p.future
            if fut.done():
                continue
            if p.cancelled:
                fut.set_result(PromptResponse(stop_reason="cancelled", usage=usage))
            elif a.unread:
                fut.set_exception(RequestError.invalid_request({"reason": NOT_READ}))
            elif a.error is not None:
                fut.set_exception(
                    RequestError.internal_error({"reason": "the agent failed", "details": a.error})
                )
            else:
                fut.set_result(PromptResponse(stop_reason=a.stop_reason, usage=usage))
            task = p.task
            if task is not None and not task.done():
                # S16: hold what follows until the SDK has written this response.
                self._holds += 1
                task.add_done_callback(self._release)


def _amount(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MiB" if size >= 1024 * 1024 else f"{size // 1024} KiB"


def _acp_usage(usage: Usage) -> AcpUsage:
    return AcpUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
        thought_tokens=usage.reasoning_tokens,
    )
