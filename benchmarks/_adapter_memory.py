"""What the framework adapters' benchmarks measure alike (``*_overhead.py``)."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from agent_channel import ExecutionEvent, UserMessage, open_channel


async def memory(
    body: Callable[[], Callable[[], Awaitable[object]]], executions: int = 50
) -> dict[str, Any]:
    """Traced bytes per execution parked for its operator after one answered prompt
    (``body()`` makes an execution's body: an adapter's, for a one-tool-call workload)."""
    parked = 0
    wanted = 1
    all_parked = anyio.Event()

    def on_event(e: ExecutionEvent) -> None:
        nonlocal parked
        if e.type == "awaiting_input":
            parked += 1
            if parked == wanted:
                all_parked.set()

    async def one() -> None:
        async with open_channel() as ch:
            ref = ch.ref()
            ref.mark_live()
            ref.subscribe(on_event)
            ref.post(UserMessage("go"))
            await body()()

    async with anyio.create_task_group() as warm:  # one first: imports and caches
        warm.start_soon(one)
        await all_parked.wait()
        warm.cancel_scope.cancel()
    parked, wanted, all_parked = 0, executions, anyio.Event()
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    async with anyio.create_task_group() as tg:
        for _ in range(executions):
            tg.start_soon(one)
        await all_parked.wait()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        tg.cancel_scope.cancel()
    tracemalloc.stop()
    return {
        "executions": executions,
        "kib_per_execution": round((after - before) / executions / 1024, 1),
    }
