"""Issue 18's figures for children: spawn, steer, kill, memory, RSS, and post + drain.

    uv run python benchmarks/children.py [--backend asyncio|trio|both] [--rounds N]
        [--reference-python /tmp/inspect-venv/bin/python]

Each figure is a ratio against a baseline measured in the same process, in alternating
rounds (ours, baseline, ours, ...) so a busy moment hits both; per round a p99 (or a
per-item cost), and the median over rounds is reported:

- **spawn**: ``Supervisor.spawn`` to the child's body taking its first step (its first
  ``drain()``), 100 children kept alive, against opening one execution alone: a task
  started in a task group that enters ``open_channel()`` and drains (100 kept alive too).
  Target: p99 <= 2x.
- **steer**: ``Supervisor.steer`` to the child's drain returning the ``Steer``, the child
  busy in a 10 ms tool (a sleep inside its scope) between drains, steered at a random
  moment; against ``ref.post`` of a ``UserMessage`` to a plain execution doing the same
  (the same random moments). Target: p99 <= 1.2x. Also shown: the part after the tool
  ends (the child waking to its drain seeing the item), which is where they can differ.
- **kill**: ``Supervisor.kill`` of a child parked in its scope to the child reporting
  ended (its ``ChildEnded`` event on the parent's channel, as an operator sees it;
  ``await wait(id)`` returning in the parent is shown too), against ``ref.interrupt`` to
  ``AgentInterrupted`` caught in the interrupted execution. Target: p99 <= 1.2x.
- **memory per idle child**: tracemalloc over 1,000 children parked in ``receive()``
  (each: a task, a channel, its own supervisor, its registry row), against 1,000 plain
  executions parked the same way. Target: <= 50 KiB a child.
- **waves**: 1,000 children spawned and ended 8 at a time (each drains, runs two turns
  and returns), the parent draining their announcements, in a fresh interpreter; RSS
  (``/proc/self/statm``) after one warm-up wave and after the 1,000. Twice: all spawned
  by one execution (its registry keeps every child's row: ``max_total`` raised to 1,008),
  and each wave by an execution of its own. Target: within 5%.
- **post + drain** per item (ns): ours with a ref and no subscriber, against a bare
  deque here, and Inspect AI 0.3.285's channel run by ``--reference-python`` (a venv
  with ``inspect_ai==0.3.285``; default ``/tmp/inspect-venv/bin/python`` if present) in
  a subprocess, which also times its own bare deque so the interpreters can be compared.
  Target (issue 18): <= 1.2x the reference. On asyncio only, in the same rounds.

Prints readable lines, then one JSON object. Not run in CI.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

CHILDREN = 100  # alive at once in the spawn figure
STEERS = 60  # per round and side
TOOL_SECONDS = 0.010
KILLS = 200  # per round and side
IDLE = 1_000
WAVE_CHILDREN = 1_000
WAVE = 8
POSTS = 200_000  # per round and side
DEFAULT_REFERENCE = Path("/tmp/inspect-venv/bin/python")

perf = time.perf_counter


def p99(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(0.99 * len(xs)))]


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


# -- spawn -> first step ------------------------------------------------------------------


async def spawn_round(children: bool) -> list[float]:
    """Latency (µs) of each of CHILDREN starts, the earlier ones kept alive."""
    from agent_channel import agent_channel, open_channel, open_supervisor

    box: dict[str, Any] = {}
    out: list[float] = []

    async def body(_input: str) -> None:
        agent_channel().drain()
        box["t1"] = perf()
        box["ev"].set()
        await anyio.sleep_forever()

    async def execution() -> None:
        async with open_channel() as ch:
            ch.drain()
            box["t1"] = perf()
            box["ev"].set()
            await anyio.sleep_forever()

    async with open_channel():
        if children:
            async with open_supervisor(max_running=CHILDREN, max_total=CHILDREN) as sup:
                for _ in range(CHILDREN):
                    box["ev"] = ev = anyio.Event()
                    t0 = perf()
                    sup.spawn(body)
                    await ev.wait()
                    out.append((box["t1"] - t0) * 1e6)
        else:
            async with anyio.create_task_group() as tg:
                for _ in range(CHILDREN):
                    box["ev"] = ev = anyio.Event()
                    t0 = perf()
                    tg.start_soon(execution)
                    await ev.wait()
                    out.append((box["t1"] - t0) * 1e6)
                tg.cancel_scope.cancel()
    return out


# -- steer -> the child's drain sees it -------------------------------------------------


async def steer_round(children: bool, delays: list[float]) -> tuple[list[float], list[float]]:
    """Per steer (or post): µs to the drain that returned it, and µs from the child's tool
    ending to that drain returning."""
    from agent_channel import UserMessage, agent_channel, open_channel, open_supervisor

    box: dict[str, Any] = {"ev": anyio.Event(), "ready": anyio.Event()}
    total: list[float] = []
    tail: list[float] = []

    async def busy(ch: Any) -> None:
        box["woke"] = perf()
        box["ready"].set()
        while True:
            if ch.drain():
                box["t1"], box["woke1"] = perf(), box["woke"]
                box["ev"].set()
            with ch.scope():
                await anyio.sleep(TOOL_SECONDS)  # the tool
            box["woke"] = perf()

    async def body(_input: str) -> None:
        await busy(agent_channel())

    async def execution(task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        async with open_channel() as ch:
            task_status.started(ch.ref())
            await busy(ch)

    def record(t0: float) -> None:
        total.append((box["t1"] - t0) * 1e6)
        tail.append((box["t1"] - max(t0, box["woke1"])) * 1e6)

    async with open_channel():
        if children:
            async with open_supervisor() as sup:
                child = sup.spawn(body)
                await box["ready"].wait()
                for d in delays:
                    await anyio.sleep(d)
                    box["ev"] = ev = anyio.Event()
                    t0 = perf()
                    sup.steer(child, "x")
                    await ev.wait()
                    record(t0)
                sup.kill(child)
        else:
            async with anyio.create_task_group() as tg:
                ref = await tg.start(execution)
                await box["ready"].wait()
                item = UserMessage("x")
                for d in delays:
                    await anyio.sleep(d)
                    box["ev"] = ev = anyio.Event()
                    t0 = perf()
                    ref.post(item)
                    await ev.wait()
                    record(t0)
                tg.cancel_scope.cancel()
    return total, tail


# -- kill -> ended, against interrupt -> AgentInterrupted -----------------------------------


async def kill_round(children: bool) -> tuple[list[float], list[float]]:
    """Per kill: µs to its ChildEnded event and to ``wait`` returning. Per interrupt: µs
    to AgentInterrupted caught (twice, so both lists have a meaning)."""
    from agent_channel import (
        AgentInterrupted,
        ChildEnded,
        agent_channel,
        open_channel,
        open_supervisor,
    )

    box: dict[str, Any] = {}
    first: list[float] = []
    second: list[float] = []

    async def body(_input: str) -> None:
        with agent_channel().scope():
            box["ready"].set()
            await anyio.sleep_forever()

    def on_event(event: Any) -> None:
        if type(event) is ChildEnded:
            box["t1"] = perf()

    async def interrupted(task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        async with open_channel() as ch:
            task_status.started(ch.ref())
            while True:
                try:
                    with ch.scope():
                        box["ready"].set()
                        await anyio.sleep_forever()
                except AgentInterrupted:
                    box["t1"] = perf()
                    box["done"].set()
                ch.drain()

    async with open_channel() as parent:
        if children:
            parent.ref().subscribe(on_event)
            async with open_supervisor(max_total=KILLS + 1) as sup:
                for _ in range(KILLS):
                    box["ready"] = ready = anyio.Event()
                    child = sup.spawn(body)
                    await ready.wait()
                    t0 = perf()
                    sup.kill(child)
                    await sup.wait(child)
                    t2 = perf()
                    first.append((box["t1"] - t0) * 1e6)
                    second.append((t2 - t0) * 1e6)
                parent.drain()
        else:
            box["ready"] = anyio.Event()
            async with anyio.create_task_group() as tg:
                ref = await tg.start(interrupted)
                for _ in range(KILLS):
                    await box["ready"].wait()
                    box["ready"] = anyio.Event()
                    box["done"] = done = anyio.Event()
                    t0 = perf()
                    ref.interrupt()
                    await done.wait()
                    first.append((box["t1"] - t0) * 1e6)
                    second.append((perf() - t0) * 1e6)
                tg.cancel_scope.cancel()
    return first, second


# -- memory per idle child ------------------------------------------------------------------


async def idle_memory(children: bool) -> float:
    """Bytes traced per execution parked in ``receive()``, IDLE of them alive."""
    from agent_channel import agent_channel, open_channel, open_supervisor

    box: dict[str, Any] = {}

    async def body(_input: str) -> None:
        ch = agent_channel()
        box["ev"].set()
        await ch.receive()

    async def execution() -> None:
        async with open_channel() as ch:
            box["ev"].set()
            await ch.receive()

    async def start_all(start: Callable[[], object]) -> float:
        for _ in range(3):
            await anyio.lowlevel.checkpoint()
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(IDLE):
            box["ev"] = ev = anyio.Event()
            start()
            await ev.wait()
        for _ in range(3):
            await anyio.lowlevel.checkpoint()
        gc.collect()
        return (tracemalloc.get_traced_memory()[0] - before) / IDLE

    per = 0.0
    tracemalloc.start()
    try:
        async with open_channel():
            if children:
                async with open_supervisor(max_running=IDLE, max_total=IDLE) as sup:
                    per = await start_all(lambda: sup.spawn(body))
            else:
                async with anyio.create_task_group() as tg:
                    per = await start_all(lambda: tg.start_soon(execution))
                    tg.cancel_scope.cancel()
    finally:
        tracemalloc.stop()
    return per


# -- 1,000 children in waves of 8: RSS --------------------------------------------------------


async def waves(shared: bool) -> dict[str, float]:
    """RSS around WAVE_CHILDREN children ended WAVE at a time: all spawned by one execution
    (``shared``: its registry keeps a row per child, so ``max_total`` is raised to let it
    spawn them all) or each wave by an execution of its own (nothing should stay)."""
    from agent_channel import agent_channel, open_channel, open_supervisor

    async def body(_input: str) -> str:
        ch = agent_channel()
        for _ in range(2):
            ch.drain()
            with ch.scope():
                await anyio.lowlevel.checkpoint()
        return "done"

    async def wave(parent: Any, sup: Any) -> None:
        for _ in range(WAVE):
            sup.spawn(body)
        while sup.running:
            await sup.wait()
        parent.drain()  # the parent reads the announcements

    async def own_execution() -> None:
        async with open_channel() as parent, open_supervisor() as sup:
            await wave(parent, sup)

    out: dict[str, float] = {}
    if shared:
        cap = WAVE_CHILDREN + WAVE
        async with open_channel() as parent, open_supervisor(max_total=cap) as sup:
            await wave(parent, sup)  # warm-up: every path has run once
            gc.collect()
            out["rss_start_mib"] = rss_mib()
            for _ in range(WAVE_CHILDREN // WAVE):
                await wave(parent, sup)
            gc.collect()
            out["rss_end_mib"] = rss_mib()
    else:
        await own_execution()
        gc.collect()
        out["rss_start_mib"] = rss_mib()
        for _ in range(WAVE_CHILDREN // WAVE):
            await own_execution()
        gc.collect()
        out["rss_end_mib"] = rss_mib()
    out["growth_pct"] = (out["rss_end_mib"] - out["rss_start_mib"]) / out["rss_start_mib"] * 100
    return out


def waves_in_fresh_process(backend: str) -> dict[str, dict[str, float]]:
    """Each in a fresh interpreter: here, the earlier figures' freed memory would absorb any
    growth."""
    out: dict[str, dict[str, float]] = {}
    for mode in ("one_execution", "an_execution_per_wave"):
        cmd = [sys.executable, __file__, "--as-waves", mode, "--backend", backend]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
        out[mode] = json.loads(r.stdout)
    return out


# -- post + drain per item --------------------------------------------------------------------


def per_item_ns(fn: Callable[[int], None], n: int) -> float:
    fn(1000)
    gc.collect()
    gc.disable()
    try:
        t = perf()
        fn(n)
        return (perf() - t) / n * 1e9
    finally:
        gc.enable()


def bare_deque_ns() -> float:
    q: deque[object] = deque()
    item = object()

    def run(n: int) -> None:
        for _ in range(n):
            q.append(item)
            [q.popleft() for _ in range(len(q))]

    return per_item_ns(run, POSTS)


async def post_drain_ours() -> float:
    from agent_channel import UserMessage, open_channel

    async with open_channel() as ch:
        post, drain, item = ch.ref().post, ch.drain, UserMessage("x")

        def run(n: int) -> None:
            for _ in range(n):
                post(item)
                drain()

        return per_item_ns(run, POSTS)


async def post_drain_inspect() -> float:
    from inspect_ai.agent._channel.channel import AgentChannel  # type: ignore[import-not-found]
    from inspect_ai.agent._channel.items import UserMessage  # type: ignore[import-not-found]
    from inspect_ai.model import ChatMessageUser  # type: ignore[import-not-found]

    ch: Any = AgentChannel()
    post, drain = ch._ref().post, ch._drain
    item = UserMessage(message=ChatMessageUser(content="x"))

    def run(n: int) -> None:
        for _ in range(n):
            post(item)
            drain()

    return per_item_ns(run, POSTS)


def reference_round(python: Path) -> dict[str, float] | str:
    r = subprocess.run(
        [str(python), __file__, "--as-reference"], capture_output=True, text=True, timeout=300
    )
    return json.loads(r.stdout) if r.returncode == 0 else f"reference failed: {r.stderr[-400:]}"


# -- running ----------------------------------------------------------------------------------


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def backend_figures(backend: str, rounds: int) -> dict[str, Any]:
    """Alternating rounds of ours and the baseline: per round a p99 (the median over rounds is
    the figure) and every sample pooled (its p99 shown beside it: one round's p99 of 100
    samples is their maximum, which one GC pass or a CI burst decides)."""
    rng = random.Random(18)
    r: dict[str, list[float]] = {}
    pool: dict[str, list[float]] = {}

    def add(key: str, samples: list[float]) -> None:
        r.setdefault(key, []).append(p99(samples))
        r.setdefault(f"{key}_p50", []).append(median(samples))
        pool.setdefault(key, []).extend(samples)

    for children in (True, False):  # warm-up: imports and first-call costs, not timed
        anyio.run(spawn_round, children, backend=backend)
        anyio.run(steer_round, children, [0.0] * 3, backend=backend)
        anyio.run(kill_round, children, backend=backend)
    for _ in range(rounds):
        for children in (True, False):
            side = "ours" if children else "base"
            add(f"spawn_{side}", anyio.run(spawn_round, children, backend=backend))
        delays = [rng.uniform(0, TOOL_SECONDS) for _ in range(STEERS)]
        for children in (True, False):
            side = "ours" if children else "base"
            total, tail = anyio.run(steer_round, children, delays, backend=backend)
            add(f"steer_{side}", total)
            add(f"steer_tail_{side}", tail)
        for children in (True, False):
            side = "ours" if children else "base"
            first, second = anyio.run(kill_round, children, backend=backend)
            add(f"kill_{side}", first)
            add(f"kill_wait_{side}", second)
    mem_ours = anyio.run(idle_memory, True, backend=backend)
    mem_base = anyio.run(idle_memory, False, backend=backend)
    wave = waves_in_fresh_process(backend)
    m = {k: median(v) for k, v in r.items()}
    pooled = {k: p99(v) for k, v in pool.items()}
    out: dict[str, Any] = {
        "medians_of_rounds_us": m,
        "pooled_p99_us": pooled,
        "rounds_us": r,
    }
    out["figures"] = {  # (ours, baseline, target, ours pooled, baseline pooled)
        name: (
            m[f"{key}_ours"],
            m[f"{key}_base"],
            target,
            pooled[f"{key}_ours"],
            pooled[f"{key}_base"],
        )
        for name, key, target in (
            ("spawn_first_step_p99", "spawn", 2.0),
            ("steer_seen_p99", "steer", 1.2),
            ("kill_ended_p99", "kill", 1.2),
        )
    }
    out["extra"] = {
        "spawn_first_step_p50": (m["spawn_ours_p50"], m["spawn_base_p50"]),
        "kill_ended_p50": (m["kill_ours_p50"], m["kill_base_p50"]),
        "steer_after_tool_p99": (m["steer_tail_ours"], m["steer_tail_base"]),
        "kill_to_wait_returning_p99 vs interrupt_to_producer_resuming_p99": (
            m["kill_wait_ours"],
            m["kill_wait_base"],
        ),
    }
    out["idle_memory_bytes"] = {"per_child": mem_ours, "per_plain_execution": mem_base}
    out["waves"] = wave
    return out


def post_drain(rounds: int, reference: Path | None) -> dict[str, Any]:
    ours: list[float] = []
    deque_here: list[float] = []
    ref: list[float] = []
    deque_ref: list[float] = []
    note = None
    for _ in range(rounds):
        ours.append(anyio.run(post_drain_ours))
        deque_here.append(bare_deque_ns())
        if reference is not None:
            got = reference_round(reference)
            if isinstance(got, str):
                note, reference = got, None
            else:
                ref.append(got["post_drain_ns"])
                deque_ref.append(got["bare_deque_ns"])
    out: dict[str, Any] = {
        "ours_ns": median(ours),
        "bare_deque_ns": median(deque_here),
        "rounds_ours_ns": ours,
    }
    if ref:
        out |= {
            "reference_ns": median(ref),
            "reference_bare_deque_ns": median(deque_ref),
            "rounds_reference_ns": ref,
            "ratio_vs_reference": median(ours) / median(ref),
        }
    else:
        out["reference"] = note or "no --reference-python: ours stated alone"
    return out


def report(result: dict[str, Any]) -> None:
    print(
        f"load average {result['loadavg']} (at the end {result['loadavg_end']}); "
        f"{result['rounds']} alternating rounds; figures are medians of the rounds' p99s"
    )
    for backend in result["backends"]:
        b = result[backend]
        print(f"[{backend}]")
        for name, (ours, base, target, ours_pool, base_pool) in b["figures"].items():
            ratio = ours / base
            met = "met" if ratio <= target else f"MISSED by {ratio / target - 1:.0%}"
            print(
                f"  {name:21} ours {ours:8.1f} µs  baseline {base:8.1f} µs  "
                f"ratio {ratio:5.2f} (target <= {target}x): {met}; pooled p99 "
                f"{ours_pool:.1f} / {base_pool:.1f} = {ours_pool / base_pool:.2f}"
            )
        for name, (ours, base) in b["extra"].items():
            print(f"  {name}: ours {ours:.1f} µs, baseline {base:.1f} µs, ratio {ours / base:.2f}")
        mem = b["idle_memory_bytes"]
        kib = mem["per_child"] / 1024
        print(
            f"  memory per idle child {kib:.1f} KiB (a plain execution "
            f"{mem['per_plain_execution'] / 1024:.1f} KiB; target <= 50 KiB): "
            + ("met" if kib <= 50 else f"MISSED by {kib / 50 - 1:.0%}")
        )
        for mode, w in b["waves"].items():
            print(
                f"  {WAVE_CHILDREN} children in waves of {WAVE}, {mode.replace('_', ' ')}: RSS "
                f"{w['rss_start_mib']:.1f} -> {w['rss_end_mib']:.1f} MiB "
                f"({w['growth_pct']:+.1f}%; target within 5%): "
                + (
                    "met"
                    if abs(w["growth_pct"]) <= 5
                    else f"MISSED by {w['growth_pct'] - 5:.1f} pt"
                )
            )
    pd = result["post_drain"]
    line = (
        f"post + drain per item: ours {pd['ours_ns']:.0f} ns (bare deque {pd['bare_deque_ns']:.0f})"
    )
    if "reference_ns" in pd:
        ratio = pd["ratio_vs_reference"]
        line += (
            f", Inspect {pd['reference_ns']:.0f} ns (its bare deque "
            f"{pd['reference_bare_deque_ns']:.0f}); ratio {ratio:.2f} (target <= 1.2x): "
            + ("met" if ratio <= 1.2 else f"MISSED by {ratio / 1.2 - 1:.0%}")
        )
    else:
        line += f"; {pd['reference']}"
    print(line)


def rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 2)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(v) for v in value]
    return value


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", default="both", help="asyncio, trio or both (default)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per figure")
    parser.add_argument(
        "--reference-python",
        type=Path,
        default=DEFAULT_REFERENCE if DEFAULT_REFERENCE.exists() else None,
        help="a python with inspect_ai==0.3.285 for the post + drain reference",
    )
    parser.add_argument("--as-reference", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--as-waves", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.as_reference:
        got = {"post_drain_ns": anyio.run(post_drain_inspect), "bare_deque_ns": bare_deque_ns()}
        print(json.dumps(got))
        return
    backends = ["asyncio", "trio"] if args.backend == "both" else args.backend.split(",")
    if args.as_waves:
        shared = args.as_waves == "one_execution"
        print(json.dumps(anyio.run(waves, shared, backend=backends[0])))
        return
    result: dict[str, Any] = {
        "python": sys.version.split()[0],
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "rounds": args.rounds,
        "backends": backends,
    }
    for backend in backends:
        result[backend] = backend_figures(backend, args.rounds)
    result["post_drain"] = post_drain(args.rounds, args.reference_python)
    result["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    report(result)
    print(json.dumps(rounded(result)))


if __name__ == "__main__":
    main()
