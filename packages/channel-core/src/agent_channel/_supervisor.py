# pyright: reportPrivateUsage=false
# (the supervisor is part of its execution: it reads its channel's loop hooks and sequence)
"""Children: one supervisor per execution spawns, steers, kills and lists them.

A child runs detached, in a task group the top-level supervisor owns for the
execution's lifetime, not inside the parent's turn: interrupting the parent never
reaches it. Each child opens its own channel in its own task, with a supervisor of its
own one level deeper; that one opens no task group (its children start in the top
level's), and at its child's end it ends its children and waits for them. The
supervisor watches the child's events (turns, usage, drains) to enforce its limits and
to learn whether a steer arrived, and reports to the parent: an :class:`Announce` into
the parent's channel when a child ends, and child events on it for operators, who
reach children only through :attr:`AgentRef.children`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from functools import partial
from os import urandom
from typing import TYPE_CHECKING

import anyio

from ._channel import AgentChannel, _Execution, _InertChannel, agent_channel
from ._children import NO_LIMITS, Child, ChildApprover, ChildBody, ChildLimits, Steering
from ._errors import ChannelClosed, ChannelFull, SpawnRefused, UnknownChild, describe
from ._events import (
    AwaitingInput,
    ChildEnded,
    ChildInfo,
    ChildStarted,
    ChildSteered,
    ChildUpdated,
    ExecutionFinished,
    ItemsDrained,
    MessageAppended,
    ModelCallFinished,
    ModelCallStarted,
    ModelDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnCancelled,
    TurnEnded,
    TurnStarted,
    Usage,
)
from ._items import RESULT_CHARS, Announce, Steer, UserMessage, bounded
from ._trusted import trusted

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from ._channel import AgentRef
    from ._content import Content
    from ._events import ExecutionEvent
    from ._loop import CancelScopeLike, EventLike
    from ._messages import ChatMessage

MAX_RUNNING = 8
"""Children of one execution running at once, unless ``open_supervisor`` says otherwise."""
MAX_TOTAL = 64
"""Children one execution may spawn in all, unless ``open_supervisor`` says otherwise."""
MAX_DEPTH = 2
"""Levels of children below the top-level execution, unless ``open_supervisor`` says otherwise."""

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

_UNREAD = "the child ended before reading it"

_zero: list[Usage] = []  # one shared Usage() (frozen), built at the first spawn


def _two_ids() -> tuple[str, str]:
    """A child's id and its Announce's, as :func:`new_id` makes them, from one system call."""
    digits = urandom(16).hex()
    return digits[:16], digits[16:]


def _no_usage() -> Usage:
    if not _zero:
        _zero.append(Usage())
    return _zero[0]


class Supervisor:
    """One execution's children: spawn, steer, kill, list, read, wait.

    Get it from :func:`open_supervisor` (the top level) or :func:`agent_supervisor` (the
    current execution's, a child's own included). ``spawn`` and ``wait`` belong to the
    execution's event loop; the rest is safe from any thread.
    """

    __slots__ = (
        "_channel",
        "_children",
        "_closed",
        "_ended",
        "_lock",
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
        # Where its children start: the top level's task group (a child's supervisor opens
        # none of its own); none at the depth limit, where spawn is refused.
        self._tg: TaskGroup | None = None
        self._lock = threading.Lock()
        self._children: dict[str, Child] = {}
        self._running = 0
        self._closed = False
        self._ended: EventLike | None = None  # set when a child ends (for wait())
        self._owner = owner
        self.depth = depth
        """Levels below the top-level execution (0 at the top)."""
        self.max_running = max_running
        self.max_total = max_total
        self.max_depth = max_depth
        self.parent: Supervisor | None = None
        """The supervisor that spawned this one's execution (``None`` at the top)."""

    # -- the parent's side -------------------------------------------------------------

    def spawn(
        self,
        body: ChildBody,
        input: str = "",
        *,
        name: str | None = None,
        limits: ChildLimits | None = None,
    ) -> str:
        """Start ``body(input)`` as a detached child and return its id at once.

        The child runs in its own task with its own channel until its body returns, it is
        killed, a limit ends it or this execution ends. Raises :class:`SpawnRefused` at
        once past a cap (``max_running`` alive, ``max_total`` in all), at the depth limit
        or while the execution ends.
        """
        if not callable(body):
            raise TypeError(f"spawn() takes an async callable as the body, not {body!r:.60}")
        if not isinstance(input, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"spawn() takes the input as a str, not {type(input).__name__}")
        if threading.get_ident() != self._channel._thread:
            raise RuntimeError("spawn() runs on the execution's event loop, not another thread")
        with self._lock:
            tg = self._tg
            if self._closed:
                raise SpawnRefused("this execution is ending: no child can start now")
            if tg is None:
                raise SpawnRefused(
                    f"depth limit: this execution is {self.depth} level(s) below the top and "
                    f"children nest at most {self.max_depth} deep; do this work here instead"
                )
            if self._running >= self.max_running:
                raise SpawnRefused(
                    f"{self._running} children are already running, the limit at once; "
                    "wait for one to end (or kill one), then spawn again"
                )
            if len(self._children) >= self.max_total:
                raise SpawnRefused(
                    f"this execution has already spawned {len(self._children)} children, "
                    "its limit in all; no more can start"
                )
            child_id, announce_id = _two_ids()
            child = Child(
                child_id,
                name or f"child-{len(self._children) + 1}",
                body,
                input,
                limits or NO_LIMITS,
                depth=self.depth + 1,
                parent_id=self._owner.id if self._owner is not None else None,
                started=time.time(),
                usage=_no_usage(),
                scope=self._channel._loop.cancel_scope(),
            )
            child.announce_id = announce_id  # withdrawable once it is posted, at its end
            self._children[child_id] = child
            self._running += 1
            info = child.info() if self._channel.observed else None
        tg.start_soon(self._run, child, name=f"agent_channel child {child.name}")
        if info is not None:
            self._channel.publish(trusted(ChildStarted, {"type": "child_started", "child": info}))
        return child_id

    def steer(
        self, child_id: str, content: str | tuple[Content, ...], *, source: str = "parent"
    ) -> Steering:
        """Post a :class:`Steer` into the child's channel; the receipt tells its outcome.

        The child folds it at its next boundary. Exactly one outcome per steer: delivered
        when the child drains it, undelivered when the child ends first (at once if it
        has ended). Raises :class:`UnknownChild` for an id this execution never spawned.
        """
        steering = Steering(Steer(content, source=source), child_id, self._channel._call_on_loop)
        with self._lock:
            child = self._get(child_id)
            if child.end is not None:
                why: str | None = _UNREAD
            else:
                child.steers[steering.id] = steering
                if child.ref is None:  # its task has not opened its channel yet
                    child.pending = (*child.pending, steering)
                    why = None
                else:
                    why = _post_steer(child, steering)
        if why is not None:
            self._resolved(steering, None, why)
        return steering

    def kill(self, child_id: str, reason: str = "killed by its parent") -> bool:
        """Stop the child's work and end it (status ``killed``, with ``reason``).

        ``True`` if it was running and is now being ended; ``False`` if it had ended or
        was already being ended. Safe from any thread.
        """
        with self._lock:
            child = self._get(child_id)
            if child.end is not None or child.cause is not None:
                return False
            child.cause = ("killed", reason, None)
            scope = child.scope
        assert scope is not None  # dropped only once it has ended
        self._cancel(scope)
        return True

    def children(self) -> tuple[ChildInfo, ...]:
        """This execution's own children, oldest first (see :attr:`ChildControl.list` for
        the whole tree)."""
        with self._lock:
            return tuple(c.info() for c in self._children.values())

    def info(self, child_id: str) -> ChildInfo:
        """One child's registry row as of now."""
        with self._lock:
            return self._get(child_id).info()

    def result(self, child_id: str) -> str:
        """The child's whole result (``""`` until it ends, or if it returned nothing)."""
        with self._lock:
            return self._get(child_id).result or ""

    def messages(self, child_id: str, tail: int | None = None) -> tuple[ChatMessage, ...]:
        """The child's conversation (only its last ``tail`` messages if given), live or as
        it ended: what its consumer shares (``()`` if it shares none)."""
        with self._lock:
            child = self._get(child_id)
            ref, final = child.ref, child.final
        messages = ref.messages() if ref is not None else final
        return messages if tail is None else messages[max(len(messages) - tail, 0) :]

    async def wait(self, *child_ids: str) -> ChildInfo:
        """Until one of ``child_ids`` (default: every child running now) has ended; its row.

        A named child that has ended already is returned at once. Raises
        :class:`UnknownChild` for an unknown id, or when no id is given and none runs.
        """
        with self._lock:
            if child_ids:
                targets = [self._get(i) for i in child_ids]
            else:
                targets = [c for c in self._children.values() if c.end is None]
                if not targets:
                    raise UnknownChild("no child is running: there is nothing to wait for")
        while True:
            with self._lock:
                for c in targets:
                    if c.end is not None:
                        return c.info()
                if self._ended is None:
                    self._ended = self._channel._loop.event()
                ended = self._ended
            await ended.wait()

    def withdraw_announce(self, child_id: str) -> bool:
        """Take back the child's :class:`Announce` while the parent has not drained it, for a
        consumer that gave its model the result another way (a wait on the child): the
        model reads it once. ``True`` if it was still queued."""
        with self._lock:
            announce_id = self._get(child_id).announce_id
        return announce_id is not None and self._channel.withdraw(announce_id)

    @property
    def running(self) -> int:
        """Children alive now (running or waiting), counted against ``max_running``."""
        return self._running

    # -- the children's side -------------------------------------------------------------

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
                with _Execution(AgentChannel._on_loop(self._channel._loop)) as ch:
                    watcher = _Watcher(self, child, ch)
                    ch._subscribers = (watcher,)  # a fresh channel: the first subscriber
                    ch._routed = (ChildApprover(self._channel, child, ch),)  # K9
                    ref = ch.ref()
                    sub = self._below(ch, child)
                    self._attach(child, ref, sub)
                    try:
                        out = await body(child.input)
                    except BaseException as e:
                        if sub._close():  # its children's ends still come up through it
                            await sub._wait_all()
                        self._finish(child, None, e)
                        watcher.leave()
                        raise
                    if sub._close():
                        await sub._wait_all()
                    self._finish(child, "" if out is None else str(out), None)
                    watcher.leave()
        except Exception as e:  # the child failed (recorded already): its parent goes on
            if child.end is None:  # its setup failed: it ends now
                self._finish(child, None, e)
        except BaseException as e:  # cancelled from outside (the execution is ending), or worse
            if child.end is None:
                self._finish(child, None, e)
            raise

    def _below(self, channel: AgentChannel, child: Child) -> Supervisor:
        """The child's own supervisor, one level deeper, with the same caps. Its children
        start in this one's task group (the top level's): a task group of its own would
        cost every child ~15 µs and a checkpoint at its end, spawning or not."""
        sub = Supervisor(
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
        channel._supervisor = sub
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
        self._channel._supervisor = None  # (the channel and its supervisor: no cycle left)
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
                            self._ended = self._channel._loop.event()
                        ended = self._ended
                    await ended.wait()
        finally:
            self._channel._supervisor = None

    def _attach(self, child: Child, ref: AgentRef, sub: Supervisor) -> None:
        """The child's channel is open: steers sent before it opened go in, in order."""
        failed: list[tuple[Steering, str]] = []
        with self._lock:
            child.ref, child.sub = ref, sub
            pending, child.pending = child.pending, ()
            for steering in pending:
                why = _post_steer(child, steering)
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
        seq = ch._seq - 1  # this event's number: publish() counted it before calling us
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
            self._resolved(steering, None, _UNREAD)
        with contextlib.suppress(ChannelClosed):  # the parent's execution is over already
            self._channel._post_unbounded(announce)
        if info is not None:
            self._channel.publish(trusted(ChildEnded, {"type": "child_ended", "child": info}))
        if ended is not None:
            ended.set()

    def _resolved(self, steering: Steering, seq: int | None, reason: str | None) -> None:
        """Record a steer's outcome (once) and tell the parent's subscribers, on its loop."""
        if not steering._resolve(seq, reason):
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
            channel._call_on_loop(lambda: channel.publish(event))

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
        channel = self._channel
        channel._call_on_loop(partial(channel._loop.cancel, scope))

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

    def _find(self, child_id: str) -> tuple[Supervisor, Child] | None:
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


class _Watcher:
    """The supervisor's subscription to one child's channel: one object, not a closure."""

    __slots__ = ("_channel", "_child", "_sup")

    def __init__(self, sup: Supervisor, child: Child, channel: AgentChannel) -> None:
        self._sup, self._child, self._channel = sup, child, channel

    def __call__(self, event: ExecutionEvent) -> None:
        self._sup._on_event(self._child, self._channel, event)

    def leave(self) -> None:
        """The child's body and children are over: what its channel publishes now (its
        close) is nothing to watch, and need not even be built for the supervisor; no call
        is left to approve. Both referred to the channel, which refers to them: left in
        place, that cycle would keep the channel, its task and its context for the GC."""
        ch = self._channel
        subscribers, routed = ch._subscribers, ch._routed
        ch._subscribers = (
            () if subscribers == (self,) else tuple(s for s in subscribers if s is not self)
        )
        ch._routed = (
            () if len(routed) == 1 else tuple(r for r in routed if type(r) is not ChildApprover)
        )


def _post_steer(child: Child, steering: Steering) -> str | None:
    """Under the supervisor's lock: post the steer; why it was not queued, if it was not."""
    ref = child.ref
    assert ref is not None
    try:
        ref.post(steering.steer)
    except ChannelClosed:
        why = _UNREAD
    except ChannelFull:
        why = "the child's channel was full (it is not reaching its boundaries)"
    else:
        return None
    child.steers.pop(steering.id, None)
    return why


class ChildControl:
    """An operator's reach into an execution's children, by id (:attr:`AgentRef.children`).

    Every call goes through the supervisor that spawned the child, which carries it out
    at once and leaves a note for its own model at the next boundary. Covers the whole
    tree below the execution; with no supervisor open there are no children. Safe from
    any thread; a producer never gets a child's ref.
    """

    __slots__ = ("_channel",)

    def __init__(self, channel: AgentChannel) -> None:
        self._channel = channel

    def list(self) -> tuple[ChildInfo, ...]:
        """Every child below the execution, each followed by its own children."""
        sup = self._channel._supervisor
        return tuple(sup._tree()) if sup is not None else ()

    def info(self, child_id: str) -> ChildInfo:
        """One child's registry row."""
        return self._find(child_id)[0].info(child_id)

    def result(self, child_id: str) -> str:
        """A child's whole result (``""`` until it ends)."""
        return self._find(child_id)[0].result(child_id)

    def messages(self, child_id: str, tail: int | None = None) -> tuple[ChatMessage, ...]:
        """A child's conversation (its last ``tail`` messages)."""
        return self._find(child_id)[0].messages(child_id, tail)

    def steer(self, child_id: str, content: str | tuple[Content, ...]) -> Steering:
        """Steer a child as the operator (``source="operator"``); its parent's model is told."""
        owner, child = self._find(child_id)
        steering = owner.steer(child_id, content, source="operator")
        if steering.outcome != "undelivered":
            text = bounded(steering.steer.text, RESULT_CHARS)[0]
            owner._note(f"The operator told child {child.name} (id {child_id}): {text}")
        return steering

    def stop(self, child_id: str, reason: str = "stopped by the operator") -> bool:
        """Kill a child as the operator; its parent's model is told. ``False`` if it had ended."""
        owner, child = self._find(child_id)
        stopped = owner.kill(child_id, reason)
        if stopped:
            owner._note(f"The operator stopped child {child.name} (id {child_id}).")
        return stopped

    def _find(self, child_id: str) -> tuple[Supervisor, Child]:
        sup = self._channel._supervisor
        found = sup._find(child_id) if sup is not None else None
        if found is None:
            raise UnknownChild(f"no child with id {child_id!r} in this execution")
        return found


def agent_supervisor() -> Supervisor | None:
    """The current execution's supervisor: the one :func:`open_supervisor` opened, or a
    child's own. ``None`` when the execution has none (or outside any execution)."""
    return agent_channel()._supervisor


@asynccontextmanager
async def open_supervisor(
    *, max_running: int = MAX_RUNNING, max_total: int = MAX_TOTAL, max_depth: int = MAX_DEPTH
) -> AsyncGenerator[Supervisor, None]:
    """Give the current execution children for the block: ``async with open_supervisor():``.

    Open it inside ``open_channel()``, around the execution's body. Children run in a task
    group it owns, so they outlive any one turn; leaving the block ends every child still
    running (status ``parent_ended``) and waits for them. Caps: ``max_running`` children
    alive at once, ``max_total`` in all, and children may nest ``max_depth`` levels below
    the top; each child's own supervisor has the same caps.
    """
    for name, value in (("max_running", max_running), ("max_total", max_total)):
        if type(value) is not int or value < 1:
            raise ValueError(f"{name} must be an int of at least 1, not {value!r}")
    if type(max_depth) is not int or max_depth < 1:
        raise ValueError(f"max_depth must be an int of at least 1, not {max_depth!r}")
    channel = agent_channel()
    if isinstance(channel, _InertChannel):
        raise RuntimeError("open_supervisor() needs an execution: open it inside open_channel()")
    if channel._supervisor is not None:
        raise RuntimeError("this execution already has a supervisor")
    sup = Supervisor(
        channel,
        depth=0,
        owner=None,
        max_running=max_running,
        max_total=max_total,
        max_depth=max_depth,
    )
    channel._supervisor = sup
    try:
        error: BaseException | None = None
        async with anyio.create_task_group() as tg:  # every descendant's task runs in it
            sup._tg = tg
            try:
                yield sup
            except BaseException as e:  # re-raised as it is, not wrapped in a group
                error = e
            finally:
                sup._end_all()
        if error is not None:
            raise error
    finally:
        channel._supervisor = None
