"""stdio mode: one ACP session is one hub and one binding, whose prompts wait for the turn.

The hub and the binding are attach mode's, in the stdio flavour of ``_stdio_stream``
(rendering, tool cards, the loop step, the outbox, shedding); this module adds what only
stdio has: prompts answered when their turn ends. Everything runs on the connection's
event loop; the hub's callbacks run inside the consumer's task and never wait.

Prompts. Each prompt is posted as a ``UserMessage`` and answered when the turn that
drained it ends (``AwaitingInput``: its stop reason; ``TurnCancelled``: ``cancelled``),
when the execution ends (its stop reason or its failure; a prompt it never drained gets
-32600, S15), or at once when a cancel withdraws it. A cancel marks every prompt not yet
answered: each is answered ``cancelled`` whenever its answer goes out (S5b).

Ordering. The hub hands over each event's updates before the session sees the event, and
an answer is a mark behind them (``Hub.after``: the loop step, then the binding's outbox),
so it follows every update of its turn (S3). When it runs, the prompts' futures resolve and
the binding holds everything after it until the SDK has written each response (S16); it
holds from the start until the ``session/new`` response is written (S2).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from acp.schema import PromptResponse
from acp.schema import Usage as AcpUsage
from agent_channel import (
    AgentChannel,
    AwaitingInput,
    Cancel,
    ChannelClosed,
    ChannelFull,
    ChatMessage,
    ChatMessageTool,
    ChatMessageUser,
    Content,
    ExecutionEvent,
    ExecutionFinished,
    ItemsDrained,
    Journal,
    ModelCallFinished,
    StopReason,
    TurnCancelled,
    Usage,
    UserMessage,
)
from agent_channel.abc import ExecutionRef

from ...stream import _mapping as m
from ...stream._binding import Peer
from ...stream._items import META
from ...wire._errors import WireError
from .._execution import BACKLOG_LIMIT, Body, NotRunnable, run
from .._handler import refused, sdk_error
from .._listing import Listed, from_hub
from ._stream import StdioBinding, StdioHub

__all__ = ["BACKLOG_LIMIT", "Body", "NotRunnable", "Session"]  # the first three: old places

log = logging.getLogger("agent_channel_acp")

_RECENT = 256  # prompt ids remembered to tell "ours" from "new" (bounded)


@dataclass(slots=True, eq=False)
class _Prompt:
    id: str
    future: asyncio.Future[PromptResponse]
    task: asyncio.Task[object] | None
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
        peer: Peer,
        body: Body,
        *,
        approve: bool = False,
        context_window: int | None = None,
        backlog_limit: int = BACKLOG_LIMIT,
        on_done: Callable[[Session], None] | None = None,
        cwd: str | None = None,
        journal: Journal | None = None,
    ) -> None:
        self.id = session_id
        self.journal = journal
        """The store's journal of its execution (``stdio --store``), else ``None``."""
        self.cwd = os.getcwd() if cwd is None else cwd
        """The client's working directory for it (``session/new``), as ``session/list`` shows."""
        self._body = body
        self._approve = approve
        self._context_window = context_window
        self._on_done = on_done
        self._binding = StdioBinding(session_id, peer, backlog_limit=backlog_limit)
        self._ref: ExecutionRef | None = None
        self._hub: StdioHub | None = None
        self._start_error: str | None = None
        self._finished: ExecutionFinished | None = None
        # prompts
        self._pending: dict[str, _Prompt] = {}  # not answered yet, by item id
        self._queued: dict[str, _Prompt] = {}  # posted, not drained
        self._consumed: list[_Prompt] = []  # drained, waiting for their turn's end
        self._our_cancels: set[str] = set()
        self._own = _Recent()  # ids of the client's prompts: not echoed back
        self._turn_usage: Usage | None = None
        self._run_task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._replay_first = False  # a restore for session/load: its replay before all else

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self, *, hold: bool = True, replay: bool = False) -> None:
        """Start the execution; return once it runs. Raises :class:`NotRunnable`.

        Called by ``session/new``: nothing is written before its response (S2). A session
        restored for ``session/load`` (``hold=False, replay=True``) has its replay queued
        before the execution's first event, so it goes out first, each card once; its
        answer waits for it (:meth:`flush`)."""
        task = asyncio.current_task()
        if task is not None and hold:
            self._binding.hold_until(task)
        self._replay_first = replay
        self._run_task = asyncio.create_task(self._run(), name=f"acp-exec-{self.id}")
        await self._ready.wait()
        if self._start_error is not None:
            raise NotRunnable(self._start_error)

    async def end(self, grace: float = 0.5) -> None:
        """Stop the execution (outer cancellation, not an interrupt)."""
        run = self._run_task
        if run is not None:
            run.cancel()
            await asyncio.wait([run], timeout=grace)

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
            await run(self._body, self._started, self.journal)
        except NotRunnable as e:
            self._start_error = str(e)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("session %s: the agent failed", self.id)
        finally:
            self._ready.set()

    def _started(self, ch: AgentChannel, task: asyncio.Future[object]) -> None:
        """The execution runs: its hub watches it, this session's binding bound (the driver)."""
        ref = self._ref = ch.ref()
        hub = self._hub = StdioHub(
            self, self.id, ref, approve=self._approve, context_window=self._context_window
        )
        if (restored := ch.restored) is not None:
            hub.restored = frozenset(m.id for m in restored.messages)
            hub.shown(restored.messages)  # their cards are the client's: a re-run updates them
        hub.bind(self._binding, driver=True)
        if restored is not None and self._replay_first:  # before the body's first step
            self._binding.replay(self._replay(restored.messages, hub))
        self._ready.set()

    # -- requests ----------------------------------------------------------------------

    async def prompt(self, content: str | tuple[Content, ...]) -> PromptResponse:
        """Post the prompt and wait for its answer (see the module docstring)."""
        ref = self._ref
        if ref is None or self._finished is not None:
            raise sdk_error(WireError.ended(self.id))
        if self._hub is not None and (
            qid := self._hub.questions.answer(_text(content), prompt=True)
        ):
            return PromptResponse(stop_reason="end_turn", field_meta={f"{META}answered": qid})
        item = UserMessage(content, source="operator")
        p = _Prompt(item.id, asyncio.get_running_loop().create_future(), asyncio.current_task())
        self._pending[item.id] = self._queued[item.id] = p  # before a drain can see it
        self._own.add(item.id)
        try:
            ref.post(item)
        except (ChannelClosed, ChannelFull) as e:
            del self._pending[item.id], self._queued[item.id]
            self._own.take(item.id)
            raise refused(self.id, e) from None
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
            self._send(_Answer(withdrawn, "cancelled"))
        if self._finished is None:
            cancel = Cancel("user_cancel")
            self._our_cancels.add(cancel.id)
            ref.interrupt(cancel)

    def listed(self) -> Listed | None:
        """Its ``session/list`` row (D5); None until its execution runs."""
        hub = self._hub
        return None if hub is None else from_hub(hub, self.cwd)

    @property
    def hub(self) -> StdioHub | None:
        """The hub of the session's execution, once its first prompt started it."""
        return self._hub

    async def replay(self) -> None:
        """Send the conversation so far as updates, after what was handed over (S13)."""
        hub = self._hub
        if hub is not None:
            hub.flush()
            self._binding.replay(self._replay(hub.messages(), hub))
        await self.flush()

    async def flush(self) -> None:
        """Wait until everything handed over so far is on the wire."""
        hub = self._hub
        if hub is None:
            await self._binding.flush()
        else:
            await hub.caught_up(self._binding)

    # -- the hub's bookkeeping (runs in the consumer's task) ----------------------------

    def echo(self, message: ChatMessageUser) -> bool:
        return not self._own.take(message.id)  # the client's own prompts are not echoed

    def observe(self, ev: ExecutionEvent) -> None:
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
                self._send(_Answer(done, ev.stop_reason or "end_turn", ev.error, usage=usage))
            unread = list(self._queued.values())
            self._queued.clear()
            if unread:
                self._send(_Answer(unread, unread=True))
            self._after(self._done)

    def _answer_turn(self, prompts: list[_Prompt], stop_reason: StopReason) -> None:
        usage, self._turn_usage = self._turn_usage, None
        if prompts:
            self._send(_Answer(prompts, stop_reason, usage=usage))

    # -- answers: marks after the updates before them -----------------------------------

    def _send(self, answer: _Answer) -> None:
        self._after(lambda: self._answer(answer))

    def _after(self, run: Callable[[], object]) -> None:
        hub = self._hub
        if hub is None:
            self._binding.mark(run)
        else:
            hub.after(self._binding, run)

    def _done(self) -> None:
        if self._on_done is not None:
            self._on_done(self)

    def _replay(self, history: Sequence[ChatMessage], hub: StdioHub) -> list[dict[str, Any]]:
        results = {msg.tool_call_id: msg for msg in history if isinstance(msg, ChatMessageTool)}
        out: list[dict[str, Any]] = []
        for msg in history:
            try:
                out.extend(m.as_json(u) for u in m.message_updates(msg, results, hub.cards))
            except Exception:
                log.exception("session %s: a replayed message could not be sent; skipped", self.id)
        return out

    def _answer(self, a: _Answer) -> None:
        """Resolve the prompts' futures (their responses follow); hold the stream until
        each is written (S16)."""
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
                fut.set_exception(sdk_error(WireError.not_read(self.id)))
            elif a.error is not None:
                fut.set_exception(sdk_error(WireError.agent_failed(a.error)))
            else:
                fut.set_result(PromptResponse(stop_reason=a.stop_reason, usage=usage))
            if p.task is not None:
                self._binding.hold_until(p.task)  # S16: what follows waits for the response


def _acp_usage(usage: Usage) -> AcpUsage:
    return AcpUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
        thought_tokens=usage.reasoning_tokens,
    )


def _text(content: str | tuple[Content, ...]) -> str:
    return (
        content if isinstance(content, str) else " ".join(getattr(p, "text", "") for p in content)
    )
