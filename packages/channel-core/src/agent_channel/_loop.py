"""Just enough knowledge of the running event loop, captured once per channel.

anyio hides the backend, but the channel's hot paths need three things at the
lowest cost the backend offers: who the current task is, how to run a callback
on the consumer's loop from another thread without blocking, and a cancel
scope (trio's native one is several times cheaper than anyio's wrapper and
behaves the same).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from types import TracebackType
from typing import Any, Protocol

import anyio


class CancelScopeLike(Protocol):
    """What the channel uses of a cancel scope (anyio's and trio's agree on it)."""

    @property
    def cancelled_caught(self) -> bool: ...

    def cancel(self) -> None: ...

    def __enter__(self) -> Any: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
        /,
    ) -> bool | None: ...


class LoopHandle:
    """The consumer's loop, captured where a channel is opened."""

    __slots__ = ("call_soon_threadsafe", "cancel_scope", "current_task")

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
