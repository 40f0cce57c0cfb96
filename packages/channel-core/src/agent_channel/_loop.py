"""Just enough knowledge of the running event loop, captured once per channel.

anyio hides the backend, but the channel's hot paths need five things at the
lowest cost the backend offers: who the current task is, how to run a callback
on the consumer's loop from another thread without blocking, a cancel scope
(trio's native one is several times cheaper than anyio's wrapper and behaves
the same), a way to cancel one from another task (anyio's asyncio
``cancel()`` formats the calling task's repr into its reason: ~10 µs, more for
a task deep in a stack), and an event (``anyio.Event()`` looks the backend up
at each call: 2 µs, five times the native one's cost).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from functools import partial
from types import TracebackType
from typing import Any, Protocol

import anyio


class CancelScopeLike(Protocol):
    """What the channel uses of a cancel scope (anyio's and trio's agree on it)."""

    @property
    def cancelled_caught(self) -> bool: ...

    @property
    def cancel_called(self) -> bool: ...

    @property
    def deadline(self) -> float: ...

    @deadline.setter
    def deadline(self, value: float, /) -> None: ...

    def cancel(self) -> None: ...

    def __enter__(self) -> Any: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
        /,
    ) -> bool | None: ...


class EventLike(Protocol):
    """What the core uses of an event (asyncio's and trio's agree on it), on its loop only."""

    def is_set(self) -> bool: ...

    def set(self) -> None: ...

    def wait(self) -> Awaitable[object]: ...


class LoopHandle:
    """The consumer's loop, captured where a channel is opened."""

    __slots__ = ("call_soon_threadsafe", "cancel", "cancel_scope", "current_task", "event")

    def __init__(self) -> None:
        if not self._on_asyncio():
            self._on_trio()

    def _on_asyncio(self) -> bool:
        if "asyncio" not in sys.modules:  # so no asyncio loop runs (and trio users never load it)
            return False
        import asyncio
        import asyncio.tasks

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        # asyncio.current_task() looks the loop up again on every call; the
        # table it reads is a plain dict keyed by loop where the C accelerator
        # publishes it (3.11-3.13), so read it directly when it is there.
        tasks: object = getattr(asyncio.tasks, "_current_tasks", None)
        if isinstance(tasks, dict):
            self.current_task: Callable[[], object] = partial(tasks.get, loop)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        else:
            self.current_task = asyncio.current_task
        self.call_soon_threadsafe: Callable[[Callable[[], Any]], object] = loop.call_soon_threadsafe
        # anyio.CancelScope() looks the backend up on every call; the class it
        # returns is what it would build each time, so build that directly.
        self.cancel_scope: Callable[[], CancelScopeLike] = type(anyio.CancelScope())
        self.cancel: Callable[[CancelScopeLike], None] = (
            _unnamed_canceller(loop, self.current_task) or _cancel  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        )
        self.event: Callable[[], EventLike] = asyncio.Event
        return True

    def _on_trio(self) -> None:
        try:
            import trio  # pyright: ignore[reportMissingTypeStubs]

            token: Any = trio.lowlevel.current_trio_token()
        except (ImportError, RuntimeError):
            raise RuntimeError("a channel needs a running asyncio or trio event loop") from None
        self.current_task = trio.lowlevel.current_task
        self.call_soon_threadsafe = token.run_sync_soon
        self.cancel_scope = trio.CancelScope
        self.cancel = _cancel
        self.event = trio.Event


def _cancel(cs: CancelScopeLike) -> None:
    cs.cancel()


def _unnamed_canceller(
    loop: object, current_task: Callable[[], object]
) -> Callable[[CancelScopeLike], None] | None:
    """An asyncio cancel that anyio cannot name the calling task in, or None if unsupported.

    anyio only names the caller in the cancellation's reason, and skips it when delivering
    (a task cannot be cancelled while it runs). So the caller is hidden only when it is
    outside the scope: then delivery cannot reach it and nothing but the reason changes.
    Uses asyncio's and anyio's private hooks; without them it is a plain ``cancel()``.
    """
    try:
        from asyncio import tasks

        from anyio._backends import _asyncio
    except ImportError:  # pragma: no cover - anyio without its asyncio backend
        return None
    enter: Any = getattr(tasks, "_enter_task", None)
    leave: Any = getattr(tasks, "_leave_task", None)
    states: Any = getattr(_asyncio, "_task_states", None)
    if enter is None or leave is None or states is None:  # pragma: no cover - other versions
        return None

    def cancel(cs: CancelScopeLike) -> None:
        task = current_task()
        state = states.get(task) if task is not None else None
        scope: Any = state.cancel_scope if state is not None else None
        while scope is not None:
            if scope is cs:  # the caller is inside: anyio must see it
                cs.cancel()
                return
            scope = scope._parent_scope
        if task is None:
            cs.cancel()
            return
        leave(loop, task)
        try:
            cs.cancel()
        finally:
            enter(loop, task)

    return cancel
