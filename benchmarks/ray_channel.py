"""Issue 20's figures for executions on Ray: 200 of them on a local 2-CPU cluster.

    uv run python benchmarks/ray_channel.py [--executions 200] [--hosts 4] [--rounds 3]

A cluster is started in this process (``start_cluster(num_cpus=2)``: the loopback, no
dashboard). ``--executions`` executions run on ``--hosts`` pooled ``ExecutionHost`` actors
(one actor per execution is ~60 MB and a process each: see docs/decisions.md). This process
is the other process: every call crosses to an actor. Per round, alternating with the
baseline (a bare async actor call, ``ray.get(host.ping.remote())``, on the same hosts):

1. **interrupt**: each execution sits in a scope; ``ref.interrupt()`` from here, one after
   the other, and the body stamps the moment its ``AgentInterrupted`` is caught
   (``time.monotonic``, one clock on Linux across processes); interrupt-to-caught, p50 and
   p99 over the executions.
2. **post**: each execution waits in ``receive()``; ``ref.post(UserMessage)`` from here, and
   the body stamps the moment the item reaches it; post-to-received, p50 and p99. The bodies
   end only at a second message, posted once every figure of the round is sent.

Each p99 is divided by the baseline's p99 of the same round (target <= 1.5x); the median of
the rounds is reported. Memory: the PSS of each host actor's process (``/proc/PID/
smaps_rollup``) with no execution and with its share of the executions parked, per execution
with and without its share of the actor.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")  # read when ray is imported

import agent_channel_ray as acr
import anyio
import ray
from agent_channel import AgentInterrupted, UserMessage, agent_channel


async def wait_interrupt() -> float:
    """Sit in a scope; the moment the interrupt is caught. It ends only at a later message,
    so no run finishes (and no registry entry changes) while others are being measured."""
    ch = agent_channel()
    caught = float("nan")
    try:
        with ch.scope():
            await anyio.sleep_forever()
    except AgentInterrupted:
        caught = time.monotonic()
    await ch.receive()
    return caught


async def wait_post() -> float:
    """Park for a message; the moment it arrives (then wait for the end, as above)."""
    ch = agent_channel()
    await ch.receive()
    received = time.monotonic()
    await ch.receive()
    return received


async def park() -> None:
    """Wait for a message, then end (for the memory figure)."""
    await agent_channel().receive()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _pss(pid: int) -> float:
    """The process's proportional set size, in MB."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no Pss for {pid}")


def _baseline(hosts: list[Any], n: int) -> list[float]:
    times = []
    for i in range(n):
        host = hosts[i % len(hosts)]
        t0 = time.monotonic()
        ray.get(host.ping.remote())
        times.append(time.monotonic() - t0)
    return times


def _wait_started(refs: list[acr.RayRef]) -> None:
    deadline = time.monotonic() + 120
    for ref in refs:
        while ref.turn_state != "started":
            if time.monotonic() > deadline:
                raise TimeoutError("an execution never entered its scope")
            time.sleep(0.001)


def interrupt_round(hosts: list[Any], n: int) -> list[float]:
    refs = [acr.launch(wait_interrupt, host=hosts[i % len(hosts)]) for i in range(n)]
    _wait_started(refs)
    sent = []
    for ref in refs:
        sent.append(time.monotonic())
        ref.interrupt()
    for ref in refs:
        ref.post(UserMessage("end"))
    caught = [ref.result(timeout=120) for ref in refs]
    return [c - s for c, s in zip(caught, sent, strict=True)]


def post_round(hosts: list[Any], n: int) -> list[float]:
    refs = [acr.launch(wait_post, host=hosts[i % len(hosts)]) for i in range(n)]
    for ref in refs:  # parked: receive() publishes nothing, so wait for its scope-less park
        ref.snapshot()
    sent = []
    for ref in refs:
        sent.append(time.monotonic())
        ref.post(UserMessage("go"))
    for ref in refs:
        ref.post(UserMessage("end"))
    received = [ref.result(timeout=120) for ref in refs]
    return [r - s for r, s in zip(received, sent, strict=True)]


def memory(hosts: list[Any], n: int) -> tuple[float, float]:
    pids = ray.get([h.__ray_call__.remote(lambda self: os.getpid()) for h in hosts])
    empty = statistics.mean(_pss(p) for p in pids)
    refs = [acr.launch(park, host=hosts[i % len(hosts)]) for i in range(n)]
    full = sum(_pss(p) for p in pids)
    for ref in refs:
        ref.post(UserMessage("end"))
    for ref in refs:
        ref.result(timeout=120)
    return empty, (full - empty * len(hosts)) / n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--executions", type=int, default=200)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    started = time.monotonic()
    acr.start_cluster(num_cpus=2)
    print(f"cluster started in {time.monotonic() - started:.1f} s")
    hosts = [acr.ExecutionHost.remote() for _ in range(args.hosts)]
    _baseline(hosts, 200)  # warm: workers up, code shipped
    interrupt_round(hosts, 10)
    post_round(hosts, 10)
    figures: dict[str, list[tuple[float, float, float, float]]] = {"interrupt": [], "post": []}
    for _ in range(args.rounds):
        for name, measure in (("interrupt", interrupt_round), ("post", post_round)):
            base = _baseline(hosts, args.executions)
            ours = measure(hosts, args.executions)
            figures[name].append(
                (_pct(ours, 0.5), _pct(ours, 0.99), _pct(base, 0.5), _pct(base, 0.99))
            )
    for name, rows in figures.items():
        p50 = statistics.median(r[0] for r in rows) * 1e3
        p99 = statistics.median(r[1] for r in rows) * 1e3
        b50 = statistics.median(r[2] for r in rows) * 1e3
        b99 = statistics.median(r[3] for r in rows) * 1e3
        ratio = statistics.median(r[1] / r[3] for r in rows)
        print(
            f"{name:9} p50 {p50:6.2f} ms  p99 {p99:6.2f} ms | bare actor call p50 {b50:5.2f} ms"
            f"  p99 {b99:5.2f} ms | p99 ratio {ratio:.2f}x (target <= 1.5x)"
        )
    actor, per_execution = memory(hosts, args.executions)
    share = actor * args.hosts / args.executions
    print(
        f"memory: a host actor {actor:.1f} MB PSS empty; {per_execution * 1024:.0f} KB per "
        f"execution on it; {per_execution + share:.2f} MB per execution with its share of "
        f"{args.hosts} actors; one actor per execution would be ~{actor + per_execution:.0f} MB"
    )
    ray.shutdown()


if __name__ == "__main__":
    main()
