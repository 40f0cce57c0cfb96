"""One client session, in either mode: its role, its bounded outbox, its way to the wire.

A binding receives the hub's live stream in order. When the connection takes frames
as fast as they come, each is written on the spot; otherwise they wait in an
:class:`~._outbox.Outbox` (streamed text merges while it waits) that a sender task
works through. A client that falls more than ``backlog_limit`` bytes behind is
dropped: what was waiting is shed, the binding leaves the hub, and the client is told
why (a text chunk and ``_agent_channel/dropped``) once it reads again; ``session/load``
reattaches it with a replay. So a slow client costs at most its backlog limit and
never slows the agent or another client. (stdio's binding, in ``_stdio_stream``, sheds
and keeps the client instead.)

Ordering has one mechanism, the **mark**: :meth:`Binding.mark` runs a callback once
everything queued before it was handed to the transport (an answer that must follow
its updates, a barrier someone awaits, the end of a session). The owner flushes the
hub's loop step first (``Hub.after``), so a mark also follows the items of that step.
:meth:`Binding.hold_until` stops the stream until a request's task is done, i.e. its
response is written (stdio: S2's ``session/new``, S16's prompts).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Protocol
from uuid import uuid4

from acp import RequestError
from acp.schema import PermissionOption, ToolCallUpdate

from ..wire._frames import DroppedNote, SessionInfoUpdate
from ..wire._transport import cancel_request, encode, noting_ids
from . import _mapping as m
from ._items import META, Chunk, Item, Live, Target
from ._outbox import Outbox, Shed, Text

log = logging.getLogger("agent_channel_acp")

_WRITE_MAX = 64 * 1024  # bytes the sender joins into one write

_UPDATE_HEAD = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'


class Writer(Protocol):
    """A synchronous way to the wire (the connection's transport)."""

    def ready(self) -> bool: ...

    def write_bytes(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


class Peer(Protocol):
    """The connection a binding belongs to."""

    name: str

    @property
    def writer(self) -> Writer: ...

    @property
    def gone(self) -> bool: ...

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption]
    ) -> object: ...


class Frames:
    """Frames already encoded (a bind's preamble), queued as one entry."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


class Mark:
    """A callback in the outbox: it runs once every entry before it was handed over."""

    __slots__ = ("run",)

    def __init__(self, run: Callable[[], object]) -> None:
        self.run = run


class Binding:
    """A client session, bound to a hub or still choosing one (the picker)."""

    def __init__(self, wire_id: str, peer: Peer, *, backlog_limit: int) -> None:
        self.wire_id = wire_id
        self._sid = encode(wire_id)
        self._update_head = _UPDATE_HEAD + self._sid + b',"update":'
        self.peer = peer
        self._writer = peer.writer
        self.hub: Target | None = None
        self.observe = False
        """Asked to observe only (or the execution cannot be driven)."""
        self.dropped = False
        self._outbox: Outbox[Live | Mark | Frames] = Outbox(backlog_limit, self._on_shed)
        self._sheds = 0
        self._holds = 0  # requests whose response must be written before anything more
        self._owed: set[str] = set()  # cards older than the bind and not in its replay
        self._sender: asyncio.Task[None] | None = None
        self._gone = asyncio.Event()

    @property
    def is_driver(self) -> bool:
        hub = self.hub
        return hub is not None and not self.observe and hub.running

    @property
    def alive(self) -> bool:
        return not (self.dropped or self.peer.gone or self._gone.is_set())

    # -- binding -------------------------------------------------------------------------

    def attached(
        self, target: Target, replay: list[dict[str, object]] | None, snapshot: Live
    ) -> None:
        """Bound to ``target``: the preamble, in order, then the live stream (A5). ``replay``
        None: a resume (D5), whose client has the history: no replay, no confirmation text."""
        self.hub = hub = target
        self.dropped = False
        replayed = {u["toolCallId"] for u in replay or () if u["sessionUpdate"] == "tool_call"}
        self._owed = set(hub.card_seq).difference(replayed)
        self._preamble(hub, replay, snapshot)

    def _preamble(
        self, hub: Target, replay: list[dict[str, object]] | None, snapshot: Live
    ) -> None:
        interactive = self.is_driver
        verb = "Bound to" if interactive else "Observing"
        note = "" if interactive else " (observe-only)"
        confirm = m.chunk_json("text", f"{verb} {hub.title} [{hub.id}]{note}\n", _fresh("bind"))
        bound: dict[str, object] = {
            f"{META}bound": {"executionId": hub.id, "interactive": interactive},
            f"{META}interactive": interactive,
        }
        confirm["_meta"] = bound
        # The preamble is kept whatever the backlog (the client asked for it): it costs at
        # most the ring's bytes (``_ring.REPLAY_BYTES``) on top of the backlog limit.
        info: SessionInfoUpdate = {"sessionUpdate": "session_info_update", "title": hub.title}
        if replay is None:  # a resume: the bind's facts ride on the title's update
            items = [Live(None, {**info, "_meta": bound}, keep=True)]
        else:
            items = [Live(None, confirm, keep=True), Live(None, info, keep=True)]
            items.extend(Live(None, update, keep=True) for update in replay)
        items.append(Live(snapshot.method, snapshot.payload, keep=True))
        data = b"".join(self._frame(live) for live in items)  # encoded once, one write
        if self._clear():
            self._write(data)
            return
        self._outbox.put(Frames(data), keep=True)
        self._queued()

    def leave(self) -> None:
        """The client went away or bound elsewhere (its handler unbinds it): an approval
        asked of it moves on."""
        self._gone.set()

    async def left(self) -> None:
        """Until the client goes away or binds elsewhere (a question asked of it moves on)."""
        await self._gone.wait()

    def rebind(self) -> None:
        """Before binding again on the same session id (its handler unbound it)."""
        self.hub = None
        self._gone = asyncio.Event()

    # -- the stream ----------------------------------------------------------------------

    def chunk(self, chunk: Chunk) -> None:
        if self._clear():
            update = chunk.encoded
            if update is None:
                update = chunk.encoded = encode(
                    m.chunk_json(chunk.kind, chunk.text, chunk.message_id)
                )
            self._write(self._update_head + update + b"}}\n")
            return
        self._outbox.text(chunk.message_id, chunk.kind, chunk.text)
        self._queued()

    def live(self, live: Live) -> None:
        if live.card is not None and live.card in self._owed:
            self._card_first(live.card)
        if self._clear():
            self._write(self._frame(live))
            return
        self._outbox.put(live, live.size, keep=live.keep)
        self._queued()

    def _card_first(self, tool_call_id: str) -> None:
        """An update for a card this session never got (it left the ring before the bind):
        a minimal card first, so no update names a call the client does not know."""
        self._owed.discard(tool_call_id)
        hub = self.hub
        if hub is None:
            return
        title, kind = hub.cards.get(tool_call_id, (tool_call_id, "other"))
        card = m.tool_start(tool_call_id, title=title, kind=kind, raw_input=None)
        self.live(Live(None, m.as_json(card), keep=True))

    # -- one loop step of the hub's stream ---------------------------------------------

    def in_sync(self, cards: set[str]) -> bool:
        """Whether this session takes the step as one write: nothing of its own is waiting
        or held, and it owes no minimal card for ``cards``."""
        return (
            self._sender is None
            and not self._outbox
            and not self._holds
            and not (cards and self._owed and not self._owed.isdisjoint(cards))
            and self._writer.ready()
        )

    def encode(self, step: list[Item]) -> bytes:
        """The step's frames for this session (the same for every session of this id)."""
        out: list[bytes] = []
        for item in step:
            if isinstance(item, Chunk):
                update = item.encoded
                if update is None:
                    update = item.encoded = encode(
                        m.chunk_json(item.kind, item.text, item.message_id)
                    )
                out.append(self._update_head + update + b"}}\n")
            else:
                out.append(self._frame(item))
        return b"".join(out)

    def write_step(self, data: bytes) -> None:
        with contextlib.suppress(ConnectionError):  # the connection's end detaches us
            self._writer.write_bytes(data)

    def take(self, step: Sequence[Item]) -> None:
        """The step item by item (queued, merged or shed as this session needs)."""
        for item in step:
            if self.hub is None or self.dropped:
                return  # dropped within the step: the rest is not for it
            if isinstance(item, Chunk):
                self.chunk(item)
            else:
                self.live(item)

    def say(self, text: str) -> None:
        """A line of our own (the picker) on this session's stream."""
        self.live(Live(None, m.chunk_json("text", text, _fresh("note"))))

    def mark(self, run: Callable[[], object]) -> None:
        """Run ``run`` once everything queued here so far was handed to the transport
        (at once when nothing is queued or held). The one ordering mechanism (see the
        module docstring)."""
        if self._sender is None and not self._outbox and not self._holds:
            _run(run, self.wire_id)
            return
        self._outbox.put(Mark(run), keep=True)
        self._kick()

    def hold_until(self, task: asyncio.Task[object]) -> None:
        """Write nothing more until ``task`` (a request's) is done: its response is out."""
        if task.done():
            return
        self._holds += 1
        task.add_done_callback(self._release)

    def _release(self, task: asyncio.Task[object]) -> None:
        self._holds -= 1
        self._kick()

    async def flush(self) -> None:
        """Wait until everything queued here so far was handed to the transport."""
        if not self._outbox and self._sender is None:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.mark(lambda: done.done() or done.set_result(None))
        await done

    async def ask_permission(
        self, request: ToolCallUpdate, options: list[PermissionOption]
    ) -> object | None:
        """This client's answer; None when it left before answering (A20: ask the next)."""
        await self.flush()  # the model's narration reaches the driver first
        if not self.alive:
            return None
        ids: list[object] = []
        ask = asyncio.ensure_future(
            noting_ids(self.peer.request_permission(self.wire_id, request, options), ids)
        )
        gone = asyncio.ensure_future(self._gone.wait())
        try:
            await asyncio.wait({ask, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not ask.done():
                ask.cancel()
                self.withdraw_requests(ids)
        if ask.cancelled():
            return None
        error = ask.exception()
        if isinstance(error, ConnectionError) or (error is not None and not self.alive):
            return None
        if error is not None:
            if not isinstance(error, RequestError | ValueError):
                raise error
            log.warning(
                "session %s: permission request failed (%s); rejecting", self.wire_id, error
            )
            return False
        return getattr(ask.result(), "outcome", None)

    def withdraw_requests(self, ids: list[object]) -> None:
        """We stopped waiting for these requests (a cancel, a stop, an answer from elsewhere):
        tell the client (``$/cancel_request``), so one that takes it closes its dialog; any
        answer it still sends is dropped."""
        if not self.alive:
            return
        for request_id in ids:
            try:
                self._writer.write_bytes(cancel_request(request_id))
            except ConnectionError:
                return

    # -- writing -------------------------------------------------------------------------

    def _clear(self) -> bool:
        return (
            self._sender is None and not self._outbox and not self._holds and self._writer.ready()
        )

    def _queued(self) -> None:
        if self._outbox.sheds != self._sheds:  # it overflowed just now
            self._sheds = self._outbox.sheds
            self._overflowed()
        self._kick()

    def _overflowed(self) -> None:
        if not self.dropped:
            self._drop()

    def _on_shed(self, entry: Live | Mark | Frames) -> Live | Mark | Frames | None:
        """What stays of an entry the outbox dropped (attach: nothing, the client goes)."""
        return None

    def _drop(self) -> None:
        """Fell too far behind: shed, and say so once the client reads (the hub lets it go)."""
        self.dropped = True
        log.warning("session %s: the client fell behind and was detached", self.wire_id)

    def _kick(self) -> None:
        """Work through the outbox: on the spot while the pipe takes it, then in a task."""
        if self._sender is not None or self._holds or not self._outbox:
            return
        outbox = self._outbox
        while outbox and not self._holds and self._sender is None and self._writer.ready():
            data = self._next_write()  # a mark it runs may write or kick again: in order
            if data:
                self._write(data)
        if outbox and not self._holds and self._sender is None:
            self._sender = asyncio.get_running_loop().create_task(
                self._send_loop(), name=f"acp-send-{self.wire_id}"
            )

    def _next_write(self) -> bytes:
        """The next entries' frames, joined (up to a mark, which runs, and at most about
        :data:`_WRITE_MAX` bytes)."""
        outbox = self._outbox
        frames: list[bytes] = []
        size = 0
        while outbox and size < _WRITE_MAX:
            entry = outbox.peek()
            if isinstance(entry, Mark):
                if frames:
                    break
                outbox.popleft()
                _run(entry.run, self.wire_id)
                return b""
            outbox.popleft()
            more = self._frames(entry)
            frames.extend(more)
            size += sum(map(len, more))
        return b"".join(frames)

    async def _send_loop(self) -> None:
        outbox, writer = self._outbox, self._writer
        held = False
        try:
            while outbox:
                if self._holds:
                    held = True
                    return
                data = self._next_write()
                if not data or self.peer.gone:
                    continue
                try:
                    writer.write_bytes(data)
                    await writer.drain()
                except ConnectionError:
                    continue
        finally:
            self._sender = None
            if not held:  # stopped (the client is gone): release whoever waits on a mark
                while outbox:
                    entry = outbox.popleft()
                    if isinstance(entry, Mark):
                        _run(entry.run, self.wire_id)

    def _frames(self, entry: Live | Frames | Text | Shed) -> list[bytes]:
        if isinstance(entry, Frames):
            return [entry.data]
        if isinstance(entry, Text):
            return [self._frame_chunk(entry.message_id, entry.kind, entry.text)]
        if isinstance(entry, Shed):
            return self._shed_frames(entry)
        return [self._frame(entry)]

    def _shed_frames(self, entry: Shed) -> list[bytes]:
        """What the client is told where its stream was shed (attach: it was dropped)."""
        reason = (
            f"this client fell {amount(entry.size)} behind the agent and was detached; "
            "session/load reattaches it and replays the recent stream"
        )
        note = m.chunk_json("text", f"[agent-channel: {reason}]\n", _fresh("dropped"))
        dropped: DroppedNote = {"reason": reason}
        return [
            self._frame(Live(None, note)),
            self._frame(Live("_agent_channel/dropped", dropped)),
        ]

    def _write(self, frame: bytes) -> None:
        with contextlib.suppress(ConnectionError):  # the connection's end detaches us
            self._writer.write_bytes(frame)

    def _frame(self, live: Live) -> bytes:
        """``live`` as this session's frame: its payload is encoded once for all bindings."""
        payload = live.encoded
        if payload is None:
            payload = live.encoded = encode(live.payload)
        if live.method is None:
            return self._update_head + payload + b"}}\n"
        head = b'{"jsonrpc":"2.0","method":' + encode(live.method) + b',"params":{"sessionId":'
        rest = b"," + payload[1:] if len(payload) > 2 else b"}"
        return head + self._sid + rest + b"}\n"

    def _frame_chunk(self, message_id: str, kind: str, text: str) -> bytes:
        return self._update_head + encode(m.chunk_json(kind, text, message_id)) + b"}}\n"


def _run(run: Callable[[], object], wire_id: str) -> None:
    try:
        run()
    except Exception:
        log.exception("session %s: a mark failed; the stream goes on", wire_id)


def _fresh(prefix: str) -> str:
    return f"{prefix}-{uuid4().hex[:12]}"


def amount(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MiB" if size >= 1024 * 1024 else f"{size // 1024} KiB"
