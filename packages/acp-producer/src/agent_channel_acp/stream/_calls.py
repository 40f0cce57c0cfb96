"""How a hub calls its ref: directly, or, for a ref whose calls block on the network, on a
worker thread, one at a time and in order, so the server's loop serves every other session
while the network answers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class RefCalls:
    """``await calls(fn, *args)``: ``fn(*args)`` at once for a local ref; for one that
    declares itself ``remote`` (agent-channel-ray's ``RayRef``), on a worker thread after
    the earlier calls (their order kept)."""

    __slots__ = ("_lock", "remote")

    def __init__(self, ref: object) -> None:
        self.remote = getattr(ref, "remote", False) is True
        self._lock = asyncio.Lock()

    async def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        if not self.remote:
            return fn(*args)
        async with self._lock:
            return await asyncio.to_thread(fn, *args)
