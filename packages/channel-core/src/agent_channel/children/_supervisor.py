"""The parent's side of its children: spawn, steer, kill, list, read, wait."""

from __future__ import annotations

import time
from functools import partial
from os import urandom
from typing import TYPE_CHECKING

from agent_channel import ChildStarted, SpawnRefused, Steer, UnknownChild, Usage
from agent_channel.lowlevel import call_on_loop, on_loop_thread, trusted

from ._lifecycle import SupervisorCore
from ._records import NO_LIMITS, UNREAD, Child, ChildBody, ChildLimits, Steering, post_steer

if TYPE_CHECKING:
    from agent_channel import ChatMessage, ChildInfo, Content

MAX_RUNNING = 8
"""Children of one execution running at once, unless ``open_supervisor`` says otherwise."""
MAX_TOTAL = 64
"""Children one execution may spawn in all, unless ``open_supervisor`` says otherwise."""
MAX_DEPTH = 2
"""Levels of children below the top-level execution, unless ``open_supervisor`` says otherwise."""


_zero: list[Usage] = []  # one shared Usage() (frozen), built at the first spawn


def _two_ids() -> tuple[str, str]:
    """A child's id and its Announce's, as :func:`new_id` makes them, from one system call."""
    digits = urandom(16).hex()
    return digits[:16], digits[16:]


def _no_usage() -> Usage:
    if not _zero:
        _zero.append(Usage())
    return _zero[0]


class Supervisor(SupervisorCore):
    """One execution's children: spawn, steer, kill, list, read, wait.

    Get it from :func:`open_supervisor` (the top level) or :func:`agent_supervisor` (the
    current execution's, a child's own included). ``spawn`` and ``wait`` belong to the
    execution's event loop; the rest is safe from any thread.
    """

    __slots__ = ()

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
        if not on_loop_thread(self._channel):
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
                scope=self._loop.cancel_scope(),
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
        steering = Steering(
            Steer(content, source=source), child_id, partial(call_on_loop, self._channel)
        )
        with self._lock:
            child = self._get(child_id)
            if child.end is not None:
                why: str | None = UNREAD
            else:
                child.steers[steering.id] = steering
                if child.ref is None:  # its task has not opened its channel yet
                    child.pending = (*child.pending, steering)
                    why = None
                else:
                    why = post_steer(child, steering)
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
                    self._ended = self._loop.event()
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
