"""A ref to an execution on a Ray actor, usable from any host and thread like a local one.

Every method is one actor call (``ray.get`` is safe from any thread). The channel's errors
come back as themselves (see ``_wire``). ``watch`` takes the host's snapshot, whose ``seq``
numbers the next event, then a thread polls the host for the events numbered from there:
each reaches the callback once, in order, with none missed.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio.lowlevel
import ray
from agent_channel import (
    Approver,
    Cancel,
    ChannelClosed,
    ChannelItem,
    ChatMessage,
    ChildInfo,
    Content,
    ExecutionEvent,
    ExecutionFinished,
    ExecutionSnapshot,
    MessageAppended,
    Resolver,
    Subscriber,
    TurnState,
    UnknownChild,
)
from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError

from ._asking import start
from ._registry import _first_line, registry  # pyright: ignore[reportPrivateUsage]
from ._routes import Kind
from ._wire import Batch, Outcome, SteerState

log = logging.getLogger(__name__)

POLL_WAIT = 1.0
"""Seconds one poll waits on the host for an event (a long poll: events come at once)."""


class RayRef:
    """A producer's handle on one execution hosted by an :class:`ExecutionHost` actor."""

    __slots__ = ("_host", "_id", "_run", "_state")

    remote = True
    """Its calls block on the network: an attach server makes them off its event loop."""

    def __init__(self, host: Any, execution_id: str, run: Any = None) -> None:
        self._host = host
        self._id = execution_id
        self._run = run
        self._state: TurnState = "idle"  # the last one read: a dead actor's final one

    def __reduce__(self) -> tuple[Any, ...]:
        return (RayRef, (self._host, self._id, None))

    @property
    def execution_id(self) -> str:
        return self._id

    @property
    def host(self) -> Any:
        """The actor hosting the execution (``ray.kill`` it to end them all)."""
        return self._host

    @property
    def run(self) -> Any:
        """The object ref of the body's run, when this ref launched it (``ray.cancel`` it)."""
        return self._run

    def _get(self, method: str, *args: Any, again: bool = True) -> Any:
        """One actor call's value; :class:`_Died` if the actor is gone for good. If it
        restarted (a durable execution's host, on another node) the call is made again when
        ``again`` (a read), else :class:`HostRestarted` (it may or may not have been done)."""
        try:
            return ray.get(getattr(self._host, method).remote(self._id, *args))
        except RayActorError as exc:  # the host died: restarted, or over as a closed one
            if not _back(self._host):
                raise _Died(_first_line(exc)) from exc
            if not again:
                raise HostRestarted(
                    f"execution {self._id}: its host restarted during {method}; it may or may "
                    "not have been done (the execution goes on under its id)"
                ) from None
        try:
            return ray.get(getattr(self._host, method).remote(self._id, *args))
        except RayActorError as exc:
            raise _Died(_first_line(exc)) from exc

    def _call(self, method: str, *args: Any) -> Any:
        try:
            outcome: Outcome = self._get(method, *args, again=False)
        except _Died as exc:
            raise ChannelClosed(f"execution {self._id}: its actor died") from exc
        return outcome.unwrap()

    def _or(self, dead: Any, method: str, *args: Any) -> Any:
        """``_call``, or ``dead`` (what a finished local ref returns) if the actor died."""
        try:
            outcome: Outcome = self._get(method, *args, again=False)
        except _Died:
            return dead
        return outcome.unwrap()

    def post(self, item: ChannelItem) -> None:
        """Queue a cooperative item, as ``AgentRef.post``: ``ChannelClosed``, ``ChannelFull``
        and ``TypeError`` as there (``ChannelClosed`` too once its actor died)."""
        self._call("post", item)

    def interrupt(self, cancel: Cancel | None = None) -> None:
        """Stop the work in progress, as ``AgentRef.interrupt`` (nothing once it ended)."""
        self._or(None, "interrupt", cancel)

    def withdraw(self, item_id: str) -> bool:
        """Take back a queued item no boundary has taken yet; ``True`` if it was withdrawn."""
        return self._or(False, "withdraw", item_id)

    def cancel_region(self, key: str) -> bool:
        """Stop the consumer's active region ``key`` alone, as ``AgentRef.cancel_region``."""
        return self._or(False, "cancel_region", key)

    def messages(self) -> tuple[ChatMessage, ...]:
        """The conversation the consumer shares, as of now; ``()`` once its actor died (the
        conversation died with it: a watcher keeps what it saw)."""
        try:
            outcome: Outcome = self._get("messages")
        except _Died:
            return ()
        return outcome.unwrap()

    def _read_state(self) -> tuple[TurnState, bool]:
        try:
            state, closed = self._get("state")
        except _Died:
            return self._state, True
        self._state = state
        return state, closed

    @property
    def turn_state(self) -> TurnState:
        """As ``AgentRef.turn_state``; once its actor died, the last one this ref read
        (``idle`` if none)."""
        return self._read_state()[0]

    @property
    def closed(self) -> bool:
        """As ``AgentRef.closed``: true once its actor died, too."""
        return self._read_state()[1]

    @property
    def children(self) -> RayChildren:
        """The execution's children: list, read, stop (by id), as ``AgentRef.children``."""
        return RayChildren(self)

    def mark_live(self) -> Callable[[], None]:
        """Declare an operator surface attached; returns the release."""
        try:
            token = self._get("mark_live")
        except _Died:  # nothing left to keep live
            return _nothing
        released = threading.Event()

        def release() -> None:
            if not released.is_set():
                released.set()
                with contextlib.suppress(_Died):
                    self._get("release_live", token)

        return release

    def route_approvals(self, approver: Approver) -> Callable[[], None]:
        """Answer the execution's approval requests with ``approver`` until released, as
        ``AgentRef.route_approvals``: the last one routed wins, the release restores the one
        before. Call it on an event loop: ``approver`` runs there (asyncio or trio), and is
        cancelled when the asking turn is interrupted."""
        if not callable(approver):
            raise TypeError(f"route_approvals() takes an async callable, not {_kind(approver)}")
        return self._route("approvals", approver)

    def route_questions(self, resolver: Resolver) -> Callable[[], None]:
        """Answer the questions of the execution and of its children with ``resolver`` until
        released, as ``AgentRef.route_questions`` (on the calling loop, as approvals)."""
        if not callable(resolver):
            raise TypeError(f"route_questions() takes an async callable, not {resolver!r:.60}")
        return self._route("questions", resolver)

    def _route(self, kind: Kind, fn: Callable[[Any], Awaitable[Any]]) -> Callable[[], None]:
        try:
            anyio.lowlevel.current_token()
        except RuntimeError:
            raise RuntimeError(f"route_{kind}() on a RayRef runs on an event loop") from None
        return start(self._host, self._id, kind, fn)

    def snapshot(self) -> ExecutionSnapshot:
        """The execution's state now (``seq``: the number of the next event); once its actor
        died, a closed one with nothing in it (as a finished local ref's, whose conversation
        is gone)."""
        try:
            return self._get("snapshot")
        except _Died:
            return ExecutionSnapshot(
                messages=(), turn_state=self._state, seq=0, closed=True, queued=(), awaiting=None
            )

    def watch(self, callback: Subscriber) -> tuple[ExecutionSnapshot, Callable[[], None]]:
        """The state now, and ``callback`` for every event after it, in order, on a thread of
        this ref's own. Returns the unsubscribe function too."""
        snapshot = self.snapshot()
        told = [m.id for m in snapshot.messages]
        return snapshot, self._follow(snapshot.seq, callback, closed=snapshot.closed, told=told)

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """``callback`` for every event from now on; returns an unsubscribe function."""
        return self.watch(callback)[1]

    def _follow(
        self, seq: int, callback: Subscriber, *, closed: bool, told: list[str]
    ) -> Callable[[], None]:
        """``told``: the id of each message of the conversation as the callback knows it
        (kept to resync it after a restart; one id a message, as the conversation's own)."""
        stop = threading.Event()

        def pump() -> None:
            after = seq
            epoch: str | None = None  # the host's incarnation the watcher follows
            while not stop.is_set():
                try:
                    batch: Batch = ray.get(self._host.events.remote(self._id, after, POLL_WAIT))
                except RayActorError as exc:  # the host died: the execution ended with it
                    if not stop.is_set() and _back(self._host):  # restarted: from its state
                        restored = resync()
                        if restored is None:
                            return
                        after, epoch = restored, None
                        continue
                    if not stop.is_set():  # freed once ended (the registry kept how), or died
                        died = ExecutionFinished(error=f"its actor died: {_first_line(exc)}")
                        _deliver(callback, _final(self._id) or died, self._id)
                    return
                except BaseException:  # the driver shut down: nothing follows
                    return
                if epoch is not None and batch.epoch != epoch:  # restarted between two polls
                    restored = resync()
                    if restored is None:
                        return
                    after, epoch = restored, batch.epoch
                    continue
                epoch = batch.epoch
                if batch.lost:
                    log.warning("watcher of %s fell behind the host's log; stopped", self._id)
                    return
                for number, event in batch.events:
                    if stop.is_set():
                        return
                    after = number + 1
                    if isinstance(event, MessageAppended) and not _told(told, event):
                        continue  # known: the restored run announcing its conversation again
                    _deliver(callback, event, self._id)
                if batch.closed:
                    return

        def resync() -> int | None:
            """The restarted host's state told; the number of its next event (``None``: the
            execution is over, or the host gone)."""
            try:
                snapshot = self.snapshot()
            except Exception:
                return None
            if snapshot.closed:
                return None
            _resync(told, snapshot.messages, callback, self._id)
            return snapshot.seq

        if not closed:
            threading.Thread(target=pump, name=f"ray-watch-{self._id}", daemon=True).start()
        return stop.set

    def end(self) -> bool:
        """End the execution, as the ``end`` verb does (not an interrupt: its body is
        cancelled from outside, its record reads ``cancelled``), and wait (up to 10 s) for
        the registry to list it ended; an actor started for it alone is freed then.
        ``False`` if it was not running. From any driver, the launcher gone or not."""
        return bool(ray.get(registry().end.remote(self._id)))

    def result(self, timeout: float | None = None) -> Any:
        """The body's return value (only on the ref :func:`launch` returned);
        ``ChannelClosed`` if its actor died first."""
        if self._run is None:
            raise ValueError("this ref did not launch the execution: it has no run to wait for")
        try:
            return ray.get(self._run, timeout=timeout)
        except ActorDiedError as exc:
            raise ChannelClosed(f"execution {self._id}: its actor died") from exc

    def __repr__(self) -> str:
        return f"RayRef({self._id!r})"


class _Died(Exception):
    """The host actor is gone for good: the execution ended with it."""


class HostRestarted(ConnectionError):
    """A durable execution's host restarted (its node died) while a call that changes the
    execution was under way: it may or may not have been done. The execution goes on under
    its id, restored from its store; a ref's later calls reach it."""


RESTART_WAIT = 60.0
"""Seconds a ref waits for a dead host to come back (restarted) before it counts it gone."""


def _back(host: Any) -> bool:
    """Whether the host answers again (restarted), within :data:`RESTART_WAIT`."""
    deadline = time.monotonic() + RESTART_WAIT
    pause = 0.05
    while True:
        try:
            ray.get(host.ping.remote(), timeout=max(deadline - time.monotonic(), 0.1))
        except ActorUnavailableError:  # restarting: ask again, until the deadline
            if time.monotonic() > deadline:
                return False
            time.sleep(pause)  # a backoff between probes of a restarting actor
            pause = min(pause * 2, 1.0)
            continue
        except Exception:  # died for good (ActorDiedError), or not back in time
            return False
        return True


def _final(execution_id: str) -> ExecutionFinished | None:
    """How an execution whose actor is gone ended, as the registry kept it before freeing
    the actor (``None`` if it died first: the caller says so)."""
    try:
        return ray.get(registry().finished.remote(execution_id), timeout=RESTART_WAIT)
    except Exception:
        return None


def _nothing() -> None:
    return None


def _told(known: list[str], event: MessageAppended) -> bool:
    """Keep ``known`` (the message ids a watcher was told, by index) as ``event`` changes it;
    ``False`` if the watcher knows it already (that message at that index)."""
    if event.index < len(known):
        if known[event.index] == event.message.id:
            return False
        known[event.index] = event.message.id
    elif event.index == len(known):
        known.append(event.message.id)
    return True


def _resync(
    known: list[str], restored: tuple[ChatMessage, ...], callback: Subscriber, execution_id: str
) -> None:
    """After a restart, tell the watcher the restored conversation from the first message
    it does not know: what the restore added before its snapshot (a call "interrupted by a
    restart", a child "lost in a restart"), or what replaced messages said but never
    checkpointed. Without it the watcher's conversation stops at the kill (D6)."""
    first = next(
        (i for i, (was, now) in enumerate(zip(known, restored, strict=False)) if was != now.id),
        min(len(known), len(restored)),
    )
    for index in range(first, len(restored)):
        event = MessageAppended(message=restored[index], index=index)
        _told(known, event)
        _deliver(callback, event, execution_id)


def _deliver(callback: Subscriber, event: ExecutionEvent, execution_id: str) -> None:
    try:
        callback(event)
    except Exception:
        log.exception("a subscriber of %s raised", execution_id)


def _kind(value: object) -> str:
    return f"{type(value).__name__} {value!r}"[:80]


class RayChildren:
    """``AgentRef.children`` through the host: list, info, result, messages, steer, stop."""

    __slots__ = ("_ref",)

    def __init__(self, ref: RayRef) -> None:
        self._ref = ref

    def _call(self, method: str, *args: Any) -> Any:
        try:  # a dead actor's children are gone with it: none is known, as after a restart
            outcome: Outcome = self._ref._get(  # pyright: ignore[reportPrivateUsage]
                "children", method, args, again=method not in ("steer", "stop")
            )
        except _Died:
            if method == "list":
                return ()
            raise UnknownChild(f"no child with id {args[0]!r} in this execution") from None
        return outcome.unwrap()

    def list(self) -> tuple[ChildInfo, ...]:
        return self._call("list")

    def info(self, child_id: str) -> ChildInfo:
        return self._call("info", child_id)

    def result(self, child_id: str) -> str:
        return self._call("result", child_id)

    def messages(self, child_id: str, tail: int | None = None) -> tuple[ChatMessage, ...]:
        return self._call("messages", child_id, tail)

    def steer(self, child_id: str, content: str | tuple[Content, ...]) -> SteerState:
        """Steer a child as the operator; its outcome arrives as a ``ChildSteered`` event."""
        return self._call("steer", child_id, content)

    def stop(self, child_id: str, reason: str = "stopped by the operator") -> bool:
        return self._call("stop", child_id, reason)
