"""What the adapters' benchmarks measure alike: the per-turn slope and the interrupt latency.

Each ``*_overhead.py`` supplies its framework's workload and ways of running it; the timing,
the interleaving and the percentiles are the same for all three, so their figures compare.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import anyio
from agent_channel import (
    AgentRef,
    ChatMessageTool,
    ExecutionEvent,
    MessageAppended,
    ToolCallStarted,
    UserMessage,
    open_channel,
)

T = TypeVar("T")


async def per_turn_us(
    ways: Mapping[str, Callable[[T], Awaitable[object]]],
    workload: Callable[[int], T],
    small: int,
    large: int,
    rounds: int,
) -> dict[str, float]:
    """Microseconds per turn of each way: the slope between a ``small`` and a ``large``
    workload (a run's fixed cost cancels), medians of interleaved rounds (a busy moment
    hits every way alike), after one warm-up run each (imports, schema building)."""
    loads = {n: workload(n) for n in (small, large)}
    times: dict[tuple[str, int], list[float]] = {(w, n): [] for w in ways for n in loads}
    for way in ways.values():
        await way(loads[small])
    for _ in range(rounds):
        for w, way in ways.items():
            for n, load in loads.items():
                t0 = time.perf_counter()
                await way(load)
                times[(w, n)].append(time.perf_counter() - t0)

    def slope(w: str) -> float:
        a, b = statistics.median(times[(w, small)]), statistics.median(times[(w, large)])
        return (b - a) / (large - small) * 1e6

    return {w: slope(w) for w in ways}


def overhead_figure(per: Mapping[str, float], small: int, large: int) -> dict[str, Any]:
    """The per-turn figure: each way's slope, and ``served`` against each bare way
    (``bare_stream`` is the like-for-like one, target <= 1.05)."""
    ratios = {
        f"ratio_served_vs_{w}": round(per["served"] / v, 3) for w, v in per.items() if w != "served"
    }
    return {
        "turns": [small, large],
        "per_turn_us": {w: round(v, 1) for w, v in per.items()},
        **ratios,
        "target_ratio": 1.05,
    }


def percentiles(seconds: list[float]) -> dict[str, Any]:
    """p50, p99 and the worst of ``seconds``, in milliseconds."""
    ms = sorted(x * 1e3 for x in seconds)
    return {
        "samples": len(ms),
        "p50_ms": round(ms[len(ms) // 2], 4),
        "p99_ms": round(ms[int(len(ms) * 0.99) - 1], 4),
        "max_ms": round(ms[-1], 4),
    }


async def interrupt_latency(body: Callable[[], Awaitable[object]], samples: int) -> dict[str, Any]:
    """From ``ref.interrupt()`` during a tool to the call's cancelled result appended.

    ``body`` is the served agent whose every turn calls a tool that waits until cancelled; a
    producer interrupts each call once it started and posts the redirect that starts the
    next one, ``samples`` times.
    """
    latencies: list[float] = []
    t0 = 0.0
    started = anyio.Event()
    finished = anyio.Event()

    def on_event(e: ExecutionEvent) -> None:
        if isinstance(e, ToolCallStarted):
            started.set()
        message = e.message if isinstance(e, MessageAppended) else None
        if isinstance(message, ChatMessageTool) and "cancelled" in (message.error or ""):
            latencies.append(time.perf_counter() - t0)
            if len(latencies) >= samples:
                finished.set()

    async def producer(ref: AgentRef) -> None:
        nonlocal t0, started
        for _ in range(samples):
            await started.wait()
            started = anyio.Event()
            t0 = time.perf_counter()
            ref.interrupt()
            ref.post(UserMessage("Again."))

    async with open_channel() as ch, anyio.create_task_group() as tg:
        ref = ch.ref()
        ref.mark_live()
        ref.subscribe(on_event)
        ref.post(UserMessage("go"))
        tg.start_soon(producer, ref)
        tg.start_soon(body)
        await finished.wait()
        tg.cancel_scope.cancel()
    return percentiles(latencies)
