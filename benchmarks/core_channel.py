"""Cost of the core channel's hot paths; prints JSON.

    uv run python benchmarks/core_channel.py [--backend asyncio|trio] [--reference]

Every figure comes with a baseline measured in the same process (raw anyio /
a bare deque doing the same work), so ratios stay meaningful on any machine.
``--reference`` also runs the same workloads on Inspect AI 0.3.285's channel,
installed into a throwaway virtualenv (needs network; never run in CI).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

TURNS = 200_000
POSTS = 1_000_000
INTERRUPTS = 2_000

# Inspect AI 0.3.285 on a 2-core machine, asyncio (figures from the issue).
REFERENCE_QUOTED = {
    "turn_us": 8.0,
    "interrupt_p50_us": 35.0,
    "interrupt_p99_us": 80.0,
    "post_drain_us": 0.22,
}


def per_op_us(fn: Callable[[int], None], n: int) -> float:
    fn(min(n, 1000))  # warm up
    gc.collect()
    gc.disable()
    try:
        t = time.perf_counter()
        fn(n)
        return (time.perf_counter() - t) / n * 1e6
    finally:
        gc.enable()


def percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


# -- workloads over an "api": (open_channel, interrupt_error, user_message, cancel) -------------


async def measure(api: dict[str, Any]) -> dict[str, float]:
    open_channel, Interrupted = api["open_channel"], api["Interrupted"]
    make_msg, make_cancel = api["message"], api["cancel"]
    # Each api entry returns the bound method to call, so no wrapper sits on the hot path.
    drain_of, scope_of, post_of, interrupt_of, ref_of = (
        api["drain"],
        api["scope"],
        api["post"],
        api["interrupt"],
        api["ref"],
    )
    out: dict[str, float] = {}

    def turns_of(ch: Any) -> Callable[[int], None]:
        drain, scope = drain_of(ch), scope_of(ch)

        def turns(n: int) -> None:
            for _ in range(n):
                drain()
                with scope():
                    pass

        return turns

    async with open_channel() as ch:
        out["turn_no_ref_us"] = per_op_us(turns_of(ch), TURNS)

    async with open_channel() as ch:
        ref = ref_of(ch)
        drain, scope, post, interrupt = drain_of(ch), scope_of(ch), post_of(ref), interrupt_of(ref)
        item = make_msg("x")

        def post_drain(n: int) -> None:
            for _ in range(n):
                post(item)
                drain()

        # a ref exists (so posts are thread-safe and scopes interruptible), nobody subscribed
        out["post_drain_us"] = per_op_us(post_drain, POSTS)
        unsubscribe = api["subscribe"](ref)
        out["turn_with_producer_us"] = per_op_us(turns_of(ch), TURNS)
        out["post_drain_subscribed_us"] = per_op_us(post_drain, POSTS)
        unsubscribe()

        before = rss_mib()
        post_drain(POSTS)
        out["rss_growth_after_1M_items_mib"] = round(rss_mib() - before, 2)

        lat: list[float] = []
        ready = anyio.Event()
        t0 = 0.0

        async def producer() -> None:
            nonlocal ready, t0
            for _ in range(INTERRUPTS):
                await ready.wait()
                ready = anyio.Event()
                cancel = make_cancel()
                t0 = time.perf_counter()
                interrupt(cancel)

        async with anyio.create_task_group() as tg:
            tg.start_soon(producer)
            for _ in range(INTERRUPTS):
                try:
                    with scope():
                        ready.set()
                        await anyio.sleep_forever()
                except Interrupted:
                    lat.append((time.perf_counter() - t0) * 1e6)
                drain()
        out["interrupt_p50_us"] = statistics.median(lat)
        out["interrupt_p99_us"] = percentile(lat, 0.99)
    return out


def ours() -> dict[str, Any]:
    import agent_channel as ac

    return {
        "open_channel": ac.open_channel,
        "Interrupted": ac.AgentInterrupted,
        "message": lambda t: ac.UserMessage(t),
        "cancel": lambda: ac.Cancel(),
        "drain": lambda ch: ch.drain,
        "scope": lambda ch: ch.scope,
        "post": lambda ref: ref.post,
        "interrupt": lambda ref: ref.interrupt,
        "ref": lambda ch: ch.ref(),
        "subscribe": lambda ref: ref.subscribe(lambda e: None),
    }


async def baseline() -> dict[str, float]:
    """The same work with no channel: raw anyio cancel scopes and a bare deque."""
    out: dict[str, float] = {}
    q: deque[object] = deque()

    def turns(n: int) -> None:
        for _ in range(n):
            if q:
                q.popleft()
            with anyio.CancelScope():  # noqa: ASYNC100 (the cost of the scope is the point)
                pass

    out["turn_us"] = per_op_us(turns, TURNS)
    item = object()

    def post_drain(n: int) -> None:
        for _ in range(n):
            q.append(item)
            [q.popleft() for _ in range(len(q))]

    out["post_drain_us"] = per_op_us(post_drain, POSTS)

    lat: list[float] = []
    ready = anyio.Event()
    holder: list[anyio.CancelScope] = []
    t0 = 0.0

    async def producer() -> None:
        nonlocal ready, t0
        for _ in range(INTERRUPTS):
            await ready.wait()
            ready = anyio.Event()
            t0 = time.perf_counter()
            holder[-1].cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(producer)
        for _ in range(INTERRUPTS):
            with anyio.CancelScope() as cs:
                holder.append(cs)
                ready.set()
                await anyio.sleep_forever()
            lat.append((time.perf_counter() - t0) * 1e6)
    out["cancel_p50_us"] = statistics.median(lat)
    out["cancel_p99_us"] = percentile(lat, 0.99)
    return out


def reference_in_venv(backend: str) -> dict[str, float] | str:
    """Run the workloads on Inspect AI's channel in a throwaway venv (optional)."""
    venv = Path(tempfile.gettempdir()) / "agent-channel-bench-inspect"
    py = venv / "bin" / "python"
    if not py.exists():
        r = subprocess.run(
            ["uv", "venv", "-q", "--python", sys.executable, str(venv)], capture_output=True
        )
        r = (
            r
            if r.returncode
            else subprocess.run(
                ["uv", "pip", "install", "-q", "--python", str(py), "inspect-ai==0.3.285", "trio"],
                capture_output=True,
            )
        )
        if r.returncode:
            return f"could not install inspect-ai: {r.stderr.decode()[-300:]}"
    r = subprocess.run(
        [str(py), __file__, "--as-reference", "--backend", backend], capture_output=True, text=True
    )
    return json.loads(r.stdout) if r.returncode == 0 else f"reference run failed: {r.stderr[-500:]}"


def inspect_api() -> dict[str, Any]:
    from inspect_ai.agent._channel.channel import AgentChannel  # type: ignore[import-not-found]
    from inspect_ai.agent._channel.exceptions import AgentInterrupted  # type: ignore[import-not-found]
    from inspect_ai.agent._channel.items import Cancel, UserMessage  # type: ignore[import-not-found]
    from inspect_ai.model import ChatMessageUser  # type: ignore[import-not-found]

    class _Open:
        async def __aenter__(self) -> Any:
            return AgentChannel()

        async def __aexit__(self, *exc: object) -> None:
            return None

    return {
        "open_channel": _Open,
        "Interrupted": AgentInterrupted,
        "message": lambda t: UserMessage(message=ChatMessageUser(content=t)),
        "cancel": lambda: Cancel(reason="user_cancel"),
        "drain": lambda ch: ch._drain,
        "scope": lambda ch: ch.turn_scope,
        "post": lambda ref: ref.post,
        "interrupt": lambda ref: ref.interrupt,
        "ref": lambda ch: ch._ref(),
        "subscribe": lambda ref: ref._channel.subscribe_turn_state(lambda s: None),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", default="asyncio", choices=["asyncio", "trio"])
    parser.add_argument(
        "--reference", action="store_true", help="also measure Inspect AI's channel"
    )
    parser.add_argument("--as-reference", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.as_reference:
        print(json.dumps(anyio.run(measure, inspect_api(), backend=args.backend)))
        return
    result: dict[str, Any] = {"backend": args.backend, "python": sys.version.split()[0]}
    result["ours"] = anyio.run(measure, ours(), backend=args.backend)
    result["baseline"] = anyio.run(baseline, backend=args.backend)
    o, b = result["ours"], result["baseline"]
    result["ratios_vs_baseline"] = {
        "turn_with_producer / raw cancel-scope turn": o["turn_with_producer_us"] / b["turn_us"],
        "post_drain / bare deque": o["post_drain_us"] / b["post_drain_us"],
        "interrupt_p99 / raw cancel p99": o["interrupt_p99_us"] / b["cancel_p99_us"],
    }
    ref = reference_in_venv(args.backend) if args.reference else None
    result["reference"] = ref if ref is not None else {"quoted": REFERENCE_QUOTED}
    r = (
        ref
        if isinstance(ref, dict)
        else {
            "turn_with_producer_us": REFERENCE_QUOTED["turn_us"],
            "interrupt_p99_us": REFERENCE_QUOTED["interrupt_p99_us"],
            "post_drain_us": REFERENCE_QUOTED["post_drain_us"],
        }
    )
    result["ratios_vs_reference"] = {
        "turn_with_producer": o["turn_with_producer_us"] / r["turn_with_producer_us"],
        "interrupt_p99": o["interrupt_p99_us"] / r["interrupt_p99_us"],
        "post_drain": o["post_drain_us"] / r["post_drain_us"],
    }
    result["targets"] = {
        "turn_no_ref_us <= 1": o["turn_no_ref_us"] <= 1.0,
        "turn_with_producer <= 0.6x reference": result["ratios_vs_reference"]["turn_with_producer"]
        <= 0.6,
        "interrupt_p99 <= 0.6x reference": result["ratios_vs_reference"]["interrupt_p99"] <= 0.6,
        "post_drain <= 1.2x reference": result["ratios_vs_reference"]["post_drain"] <= 1.2,
        "memory flat after 1M items (< 1 MiB)": o["rss_growth_after_1M_items_mib"] < 1.0,
    }
    print(json.dumps(result, indent=2, default=lambda x: round(x, 3)))


if __name__ == "__main__":
    main()
