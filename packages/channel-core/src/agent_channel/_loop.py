"""Just enough knowledge of the running event loop: the current task and a thread-safe wake-up.

anyio hides the backend, but the two things the channel needs on its hot path
(who is calling, and how to run a callback on the consumer's loop from another
thread without blocking) are cheapest straight from asyncio or trio.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


class LoopHandle:
    """The consumer's loop, captured where a channel is opened."""

    __slots__ = ("call_soon_threadsafe", "current_task")

    def __init__(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            import trio  # only reached under trio, which is then installed

            self.current_task: Callable[[], object] = trio.lowlevel.current_task
            self.call_soon_threadsafe: Callable[[Callable[[], Any]], object] = (
                trio.lowlevel.current_trio_token().run_sync_soon
            )
        else:
            self.current_task = asyncio.current_task
            self.call_soon_threadsafe = loop.call_soon_threadsafe
