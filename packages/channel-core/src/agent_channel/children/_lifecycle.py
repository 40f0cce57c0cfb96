"""A supervisor's children's side: each child's run, its events, its end.

A child runs detached, in a task group the top-level supervisor owns for the
execution's lifetime, not inside the parent's turn: interrupting the parent never
reaches it. Each child opens its own channel in its own task, with a supervisor of its
own one level deeper; that one opens no task group (its children start in the top
level's), and at its child's end it ends its children and waits for them. The
supervisor watches the child's events (turns, usage, drains) to enforce its limits and
to learn whether a steer arrived, and reports to the parent: an :class:`Announce` into
the parent's channel when a child ends, and child events on it for operators.
:class:`Supervisor` adds the parent's calls (spawn, steer, kill, wait).
"""

from __future__ import annotations

import contextlib
import threading
import time
from functools import partial
from typing import TYPE_CHECKING, cast

import anyio

from agent_channel import (
    AgentChannel,
    Announce,
    AwaitingInput,
    ChannelClosed,
    ChannelFull,
    ChildEnded,
    ChildStarted,
    ChildSteered,
    ChildUpdated,
    ExecutionFinished,
    ItemsDrained,
    MessageAppended,
    ModelCallFinished,
    ModelCallStarted,
    ModelDelta,
    Steer,
    ToolCallFinished,
    ToolCallStarted,
    TurnCancelled,
    TurnEnded,
    TurnStarted,
    UnknownChild,
    UserMessage,
)
from agent_channel.lowlevel import (
    Execution,
    ExecutionVar,
    bounded,
    call_on_loop,
    describe,
    loop_of,
    nest,
    post_reserved,
    published,
    trusted,
    unnest,
)

from ._records import UNREAD, Child, ChildApprover, Steering, Watcher, post_steer

if TYPE_CHECKING:
    from typing import Self

    from anyio.abc import TaskGroup

    from agent_channel import AgentRef, ChildInfo, ExecutionEvent
    from agent_channel.lowlevel import CancelScopeLike, EventLike

    from ._supervisor import Supervisor

_FORWARDED = (ChildStarted, ChildUpdated, ChildSteered, ChildEnded)
"""A descendant's events, passed up so the top-level channel shows the whole tree."""

_UNWATCHED = frozenset(
    {
        TurnEnded,
        TurnCancelled,
        MessageAppended,
        ModelCallStarted,
        ModelDelta,
        ToolCallStarted,
        ToolCallFinished,
        ExecutionFinished,
    }
)
"""A child's events that only mark its activity (exact types; a subclass takes the long way)."""

SUPERVISOR: ExecutionVar[Supervisor | None] = ExecutionVar("supervisor")
"""The execution's supervisor (``open_supervisor``'s, or a child's own), while it is open."""


class SupervisorCore:
    """One execution's children registry and their runs (see the module)."""

    __slots__ = (
        "_channel",
        "_children",
        "_closed",
        "_ended",
        "_lock",
        "_loop",
        "_owner",
        "_running",
        "_tg",
        "depth",
        "max_depth",
        "max_running",
        "max_total",
        "parent",
    )

    def __init__(
        self,
        channel: AgentChannel,
        *,
        depth: int,
        owner: Child | None,
        max_running: int,
        max_total: int,
        max_depth: int,
    ) -> None:
        self._channel = channel
        self._loop = loop_of(channel)
        # Where its children start: the top level's task group (a child's supervisor opens
        # none of its own); none at the depth limit, where spawn is refused.
        self._tg: TaskGroup | None = None
        self._lock = threading.Lock()
        self._children: dict[str, Child] = {}
        self._running: int = 0
        self._closed = False
        self._ended: EventLike | None = None  # set when a child ends (for wait())
        self._owner = owner
        self.depth = depth
        """Levels below the top-level execution (0 at the top)."""
        self.max_running = max_running
        self.max_total = max_total
        self.max_depth = max_depth
        self.parent: SupervisorCore | None = None
        """The supervisor that spawned this one's execution (``None`` at the top)."""

    async def _run(self, child: Child) -> None:
        """The child's task: its scope, its channel, its own supervisor, its body.

        Plain context managers, not ``open_channel`` and an async ``_supervise``: each
        async generator, task group and closure is time and objects on every spawn. The
        child has ended when its body is over and its own children have ended: that is
        reported at once; closing its channel and leaving its scope, which nobody else
        sees, come after.
        """
        scope, body = child.scope, child.body
        assert scope is not None and body is not None  # dropped only once it has ended
        try:
            with scope:
                if child.limits.seconds is not None:
                    scope.deadline = anyio.current_time() + child.limits.seconds
                watcher = Watcher(self._on_event, child)
                approver = ChildApprover(self._channel, child)  # K9
                # linked below this execution: its questions climb to the top by it
                ch = nest(self._channel, child.id, child.name, watcher, approver)
                watcher.channel = approver.own = ch
                with Execution(ch):
                    ref = ch.ref()
                    sub = self._below(ch, child)
                    self._attach(child, ref, sub)
                    try:
                        out = await body(child.input)
                    except BaseException as e:
                        if sub._close():  # its children's ends still come up through it
                            await sub._wait_all()
                        self._finish(child, None, e)
                        unnest(ch, watcher, approver)
                        raise
                    if sub._close():
                        await sub._wait_all()
                    self._finish(child, "" if out is None else str(out), None)
                    unnest(ch, watcher, approver)
        except Exception as e:  # the child failed (recorded already): its parent goes on
            if child.end is None:  # its setup failed: it ends now
                self._finish(child, None, e)
        except BaseException as e:  # cancelled from outside (the execution is ending), or worse
            if child.end is None:
                self._finish(child, None, e)
            raise

    def _below(self, channel: AgentChannel, child: Child) -> Self:
        """The child's own supervisor, one level deeper, with the same caps. Its children
        start in this one's task group (the top level's): a task group of its own would
        cost every child ~15 µs and a checkpoint at its end, spawning or not."""
        sub = type(self)(
            channel,
            depth=self.depth + 1,
            owner=child,
            max_running=self.max_running,
            max_total=self.max_total,
            max_depth=self.max_depth,
        )
        sub.parent = self
        if sub.depth < self.max_depth:
            sub._tg = self._tg
        SUPERVISOR.set(channel, cast("Supervisor", sub))  # every supervisor is one
        return sub

    def _close(self) -> bool:
        """A child's supervisor as its child ends: no more spawns, and every child still
        running ends (``parent_ended``). ``True`` if some still run: its child's end waits
        for theirs (:meth:`_wait_all`), as leaving a task group of its own would; without
        any it costs no checkpoint."""
        if self._children:
            self._end_all()
        else:  # it never spawned: nothing to end
            self._closed = True
        if self._running:
            return True
        SUPERVISOR.delete(self._channel)  # (the channel and its supervisor: no cycle left)
        return False

    async def _wait_all(self) -> None:
        """Until every child of this (closed) supervisor has ended; not cancellable."""
        try:
            with anyio.CancelScope(shield=True):  # the child may be ending by a cancel
                while True:
                    with self._lock:
                        if not self._running:
                            return
                        if self._ended is None:
                            self._ended = self._loop.event()
                        ended = self._ended
                    await ended.wait()
        finally:
            SUPERVISOR.delete(self._channel)

    def _attach(self, child: Child, ref: AgentRef, sub: SupervisorCore) -> None:
        """The child's channel is open: steers sent before it opened go in, in order."""
        failed: list[tuple[Steering, str]] = []
        with self._lock:
            child.ref, child.sub = ref, sub
            pending, child.pending = child.pending, ()
            for steering in pending:
                why = post_steer(child, steering)
                if why is not None:
                    failed.append((steering, why))
        for steering, why in failed:
            self._resolved(steering, None, why)

    def _on_event(self, child: Child, ch: AgentChannel, event: ExecutionEvent) -> None:
        """Every event of the child's channel, in the child's task."""
        kind = type(event)
        if kind in _FORWARDED:
            if self._channel.observed:
                self._channel.publish(event)
            return
        delivered: list[Steering] = []
        over = False
        changed = False
        with self._lock:
            child.last_activity = time.time()
            if kind in _UNWATCHED:  # most events: skip the isinstance chain (ABC checks)
                return
            if isinstance(event, ItemsDrained):
                for item in event.items:
                    if type(item) is Steer:
                        steering = child.steers.pop(item.id, None)
                        if steering is not None:
                            delivered.append(steering)
                if child.status == "waiting":
                    child.status, changed = "running", True
            elif isinstance(event, TurnStarted):
                child.turns += 1
                child.status, changed = "running", True
                cap = child.limits.turns
                if cap is not None and child.turns > cap and child.cause is None:
                    child.cause = ("limit", f"{cap} turn(s)", "turns")
                    over = True
            elif isinstance(event, AwaitingInput):
                child.status, changed = "waiting", True
            elif isinstance(event, ModelCallFinished) and event.usage is not None:
                child.usage = child.usage + event.usage
                changed = True
                cap = child.limits.tokens
                used = child.usage.total_tokens
                if cap is not None and used > cap and child.cause is None:
                    child.cause = ("limit", f"{cap} tokens ({used} used)", "tokens")
                    over = True
            info = child.info() if changed and self._channel.observed else None
        if over:
            assert child.scope is not None  # it runs
            child.scope.cancel()  # in the child's own task: it stops at its next await
        seq = published(ch) - 1  # this event's number: publish() counted it before calling us
        for steering in delivered:
            self._resolved(steering, seq, None)
        if info is not None:
            self._channel.publish(trusted(ChildUpdated, {"type": "child_updated", "child": info}))

    def _finish(self, child: Child, result: str | None, error: BaseException | None) -> None:
        """The child's body is over (returned ``result`` or raised ``error``) and so are its
        own children: record how it ended, free its slot, announce it to the parent.

        How: the cause set before its scope was cancelled (a kill, a limit, the parent's
        end); else its own deadline, if a cancellation ended it and its scope was
        cancelled; else any other cancellation came from outside (its parent's execution
        is ending); else it failed, or completed.
        """
        sub = child.sub
        below = tuple(sub._tree()) if sub is not None and sub._children else ()  # final now
        with self._lock:
            child.sub, child.below = None, below  # nothing of its execution stays reachable
            scope = child.scope
            if child.cause is not None:
                end, reason, limit = child.cause
            elif error is None:
                end, reason, limit = "completed", None, None
            elif isinstance(error, Exception):
                end, reason, limit = "failed", describe(error), None
            elif (
                child.limits.seconds is not None
                and scope is not None
                and scope.cancel_called  # by its deadline: every other cancel sets a cause
                and isinstance(error, anyio.get_cancelled_exc_class())
            ):
                end, reason, limit = "limit", f"{child.limits.seconds:g} s", "time"
            else:
                end, reason, limit = "parent_ended", None, None
            child.end, child.reason, child.limit = end, reason, limit
            child.status = "ended"
            child.result = result or ""
            # Only the row stays: what its run held goes now (max_total records are kept).
            child.scope = child.body = None
            child.input = bounded(child.input)[0]
            if child.ref is not None:
                child.final = child.ref.messages()  # its body is over: nothing appends now
                child.ref = None  # no steer reaches its channel now: let it go
            # Not drained (its body, their one consumer, is over): queued, or never posted.
            unread = list(child.steers.values())
            child.steers.clear()
            child.pending = ()
            self._running -= 1
            ended, self._ended = self._ended, None
            text, omitted = bounded(child.result)
            announce = trusted(
                Announce,
                {
                    "type": "announce",
                    "id": child.announce_id,
                    "child_id": child.id,
                    "name": child.name,
                    "status": end,
                    "result": text,
                    "omitted": omitted,
                    "reason": reason,
                    "limit": limit,
                },
            )
            info = child.info() if self._channel.observed else None
        for steering in unread:
            self._resolved(steering, None, UNREAD)
        with contextlib.suppress(ChannelClosed):  # the parent's execution is over already
            post_reserved(self._channel, announce)
        if info is not None:
            self._channel.publish(trusted(ChildEnded, {"type": "child_ended", "child": info}))
        if ended is not None:
            ended.set()

    def _resolved(self, steering: Steering, seq: int | None, reason: str | None) -> None:
        """Record a steer's outcome (once) and tell the parent's subscribers, on its loop."""
        if not steering._resolve(seq, reason):  # pyright: ignore[reportPrivateUsage]
            return
        channel = self._channel
        if channel.observed:
            event = ChildSteered(
                child_id=steering.child_id,
                steer_id=steering.id,
                source=steering.steer.source,
                outcome=steering.outcome,  # pyright: ignore[reportArgumentType] (resolved)
                seq=seq,
                reason=reason,
            )
            call_on_loop(channel, lambda: channel.publish(event))

    def _end_all(self) -> None:
        """The execution is ending: no more spawns, and every child ends with it."""
        with self._lock:
            self._closed = True
            doomed: list[CancelScopeLike] = []
            for c in self._children.values():
                if c.end is None and c.cause is None and c.scope is not None:
                    c.cause = ("parent_ended", None, None)
                    doomed.append(c.scope)
        for scope in doomed:
            self._cancel(scope)

    def _cancel(self, scope: CancelScopeLike) -> None:
        """Cancel a child's scope as an interrupt stops a turn: the loop's own cancel, which
        spares anyio naming the calling task in the reason (half a kill's cost on asyncio)."""
        call_on_loop(self._channel, partial(self._loop.cancel, scope))

    # -- lookups -----------------------------------------------------------------------

    def _get(self, child_id: str) -> Child:
        """Under the lock: the child, or an error naming the ones there are."""
        child = self._children.get(child_id)
        if child is not None:
            return child
        known = ", ".join(f"{c.id} ({c.name})" for c in list(self._children.values())[-8:])
        raise UnknownChild(
            f"no child with id {child_id!r} here; "
            + (f"the latest are: {known}" if known else "this execution has no children")
        )

    def _find(self, child_id: str) -> tuple[SupervisorCore, Child] | None:
        """The supervisor that spawned ``child_id`` (this one or one below it), and its record."""
        with self._lock:
            child = self._children.get(child_id)
            subs = [c.sub for c in self._children.values() if c.sub is not None]
        if child is not None:
            return self, child
        for sub in subs:
            found = sub._find(child_id)
            if found is not None:
                return found
        return None

    def _tree(self) -> list[ChildInfo]:
        """Every descendant, each followed by its own children."""
        with self._lock:
            rows = [(c.info(), c.sub, c.below) for c in self._children.values()]
        out: list[ChildInfo] = []
        for info, sub, below in rows:
            out.append(info)
            out.extend(sub._tree() if sub is not None else below)
        return out

    def _note(self, text: str) -> None:
        """A line for this execution's model at its next boundary (an operator's action)."""
        with contextlib.suppress(ChannelClosed, ChannelFull):
            self._channel.post(UserMessage(text, source="supervisor"))
