"""Benchmarks for the react consumer (not tests; not run in CI). Prints JSON.

1. Per-turn overhead of the loop with a zero-latency scripted model, against
   the same loop with no channel at all (measured interleaved, in the same
   process): inside a channel with a producer attached (a ref taken, so every
   turn runs in a real cancel scope), target ratio <= 1.05; and with that
   producer also subscribed (every event built and delivered), target <= 1.3.
   Wall-clock medians, and (``cpu_*``) the least disturbed run's CPU time, which a
   busy machine inflates less.
   ``breakdown`` says where the difference goes, measured in the same run: one
   channel scope (each turn runs in one), one keyed region (each tool call runs in
   one, so an operator can cancel it alone), and building and publishing the
   events of one observed turn to a subscriber that does nothing.
2. Interrupt of a blocking tool: from ``ref.interrupt()`` to the repaired
   conversation being ready (the repair result appended). Target p99 <= 1 ms.

Both backends run in one invocation; ``ratios`` puts their figures side by side.

Run: .venv/bin/python benchmarks/react_overhead.py [--backend asyncio|trio|both] [--profile]
(``--profile``: the subscribed loop's top functions by own time, on stderr).
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import json
import pstats
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import anyio
from agent_channel import (
    AgentRef,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageTool,
    ChatMessageUser,
    ExecutionEvent,
    MessageAppended,
    ModelCallFinished,
    ModelCallStarted,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    Usage,
    UserMessage,
    open_channel,
)
from agent_channel_react import (
    AgentState,
    ModelOutput,
    ScriptStep,
    call,
    react,
    tool,
    tool_call,
)


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


_ids = itertools.count()
_USAGE = Usage(input_tokens=10, output_tokens=3, total_tokens=13)


def _forever(messages: Sequence[ChatMessage], tools: object) -> ModelOutput:
    # A ready-made output: the scripted model's own work (streaming pieces, counting
    # the whole conversation's words for usage) would otherwise grow with every turn
    # and hide the loop's per-turn cost, which is what this benchmark compares.
    call_ = ToolCall(id=f"c{next(_ids)}", name="add", arguments={"a": 1, "b": 2})
    message = ChatMessageAssistant(content="Adding.", tool_calls=(call_,))
    return ModelOutput(message=message, usage=_USAGE)


def _agent(turns: int) -> Any:
    from agent_channel_react import ScriptedModel

    return react(model=ScriptedModel(_forever), tools=[add], max_turns=turns)


def _state() -> AgentState:
    return AgentState(messages=[ChatMessageUser(content="Go.")])


async def _bare(turns: int) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one run."""
    agent = _agent(turns)
    t, c = time.perf_counter(), time.process_time()
    await agent(_state())
    return time.perf_counter() - t, time.process_time() - c


async def _attached(turns: int, subscribe: bool) -> tuple[float, float]:
    agent = _agent(turns)
    async with open_channel() as ch:
        ref = ch.ref()
        if subscribe:
            ref.subscribe(lambda e: None)
        t, c = time.perf_counter(), time.process_time()
        await agent(_state())
        return time.perf_counter() - t, time.process_time() - c


async def overhead(turns: int = 200, rounds: int = 40) -> dict[str, Any]:
    bare: list[tuple[float, float]] = []
    attached: list[tuple[float, float]] = []
    observed: list[tuple[float, float]] = []
    for _ in range(3):  # warm up
        await _bare(turns)
        await _attached(turns, False)
    for _ in range(rounds):  # interleaved, so drift hits all three alike
        bare.append(await _bare(turns))
        attached.append(await _attached(turns, False))
        observed.append(await _attached(turns, True))
    b, a, o = (statistics.median(x[0] for x in r) / turns * 1e6 for r in (bare, attached, observed))
    # CPU time, least disturbed run: on a busy machine the wall clock also counts the
    # time other processes held the core, which the CPU clock leaves out.
    bc, ac, oc = (min(x[1] for x in r) / turns * 1e6 for r in (bare, attached, observed))
    return {
        "turns_per_run": turns,
        "runs": rounds,
        "per_turn_us_no_channel": round(b, 2),
        "per_turn_us_producer_attached": round(a, 2),
        "per_turn_us_producer_attached_and_subscribed": round(o, 2),
        "ratio_attached_vs_no_channel": round(a / b, 3),
        "ratio_subscribed_vs_no_channel": round(o / b, 3),
        "cpu_per_turn_us_no_channel": round(bc, 2),
        "cpu_ratio_attached_vs_no_channel": round(ac / bc, 3),
        "cpu_ratio_subscribed_vs_no_channel": round(oc / bc, 3),
        "target_ratio_attached": 1.05,
        "target_ratio_subscribed": 1.3,
    }


async def breakdown(n: int = 20000) -> dict[str, Any]:
    """Per-turn costs of the pieces an attached (and subscribed) turn adds, in microseconds."""
    call_ = ToolCall(id="c1", name="add", arguments={"a": 1, "b": 2})
    asked = ChatMessageAssistant(content="Adding.", tool_calls=(call_,))
    result = ChatMessageTool(tool_call_id="c1", function="add", content="3")
    async with open_channel() as ch:
        ch.ref().subscribe(lambda e: None)
        publish = ch.publish
        t = time.perf_counter()
        for _ in range(n):
            with ch.scope():
                pass
        scope = time.perf_counter() - t
        t = time.perf_counter()
        for _ in range(n):
            with ch.region("c1"):
                pass
        region = time.perf_counter() - t
        t = time.perf_counter()
        for i in range(n):
            publish(ModelCallStarted(call_id="m1", model="scripted"))
            publish(ModelCallFinished(call_id="m1", message=asked, usage=_USAGE))
            publish(MessageAppended(message=asked, index=i))
            publish(
                ToolCallStarted(
                    tool_call_id="c1", name="add", arguments=call_.arguments, kind="other"
                )
            )
            publish(
                ToolCallFinished(tool_call_id="c1", name="add", status="completed", content="3")
            )
            publish(MessageAppended(message=result, index=i))
        events = time.perf_counter() - t
    return {
        "per_turn_us_scope": round(scope / n * 1e6, 2),
        "per_turn_us_region": round(region / n * 1e6, 2),
        "per_turn_us_events": round(events / n * 1e6, 2),
    }


def profile(turns: int = 200, rounds: int = 10) -> None:
    """The subscribed loop's top functions by own time, on stderr."""

    async def go() -> None:
        await _attached(turns, True)  # warm up
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(rounds):
            await _attached(turns, True)
        prof.disable()
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(25)

    anyio.run(go)


async def interrupt_latency(samples: int = 2000) -> dict[str, Any]:
    started = anyio.Event()
    box: dict[str, Any] = {"started": started}

    @tool
    async def block() -> str:
        """Blocks until cancelled."""
        box["started"].set()
        await anyio.sleep_forever()
        return ""

    def script(messages: Sequence[ChatMessage], tools: object) -> ScriptStep | str:
        if len(box.get("lat", [])) >= samples:
            return "Done."
        return call(tool_call("block"))

    from agent_channel_react import ScriptedModel

    agent = react(model=ScriptedModel(script), tools=[block], submit=False)
    latencies: list[float] = []
    box["lat"] = latencies
    t0 = 0.0

    def on_event(e: ExecutionEvent) -> None:
        if (
            e.type == "message_appended"
            and isinstance(e.message, ChatMessageTool)
            and e.message.error == "cancelled"
        ):
            latencies.append(time.perf_counter() - t0)

    async def producer(ref: AgentRef) -> None:
        nonlocal t0
        for _ in range(samples):
            await box["started"].wait()
            box["started"] = anyio.Event()
            t0 = time.perf_counter()
            ref.interrupt()
            ref.post(UserMessage("Again."))

    async with open_channel() as ch:
        ref = ch.ref()
        ref.subscribe(on_event)
        async with anyio.create_task_group() as tg:
            tg.start_soon(producer, ref)
            await agent(_state())
    ms = sorted(x * 1e3 for x in latencies)
    return {
        "samples": len(ms),
        "p50_ms": round(ms[len(ms) // 2], 4),
        "p99_ms": round(ms[int(len(ms) * 0.99) - 1], 4),
        "max_ms": round(ms[-1], 4),
        "target_p99_ms": 1.0,
    }


async def main() -> dict[str, Any]:
    return {
        "overhead": await overhead(),
        "breakdown": await breakdown(),
        "interrupt_blocking_tool": await interrupt_latency(),
    }


def _ratios(results: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    keys = (
        "ratio_attached_vs_no_channel",
        "ratio_subscribed_vs_no_channel",
        "cpu_ratio_attached_vs_no_channel",
        "cpu_ratio_subscribed_vs_no_channel",
    )
    table = {k: {b: r["overhead"][k] for b, r in results.items()} for k in keys}
    table["interrupt_p99_ms"] = {
        b: r["interrupt_blocking_tool"]["p99_ms"] for b, r in results.items()
    }
    return table


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--backend", choices=["asyncio", "trio", "both"], default="both")
    p.add_argument("--profile", action="store_true", help="profile the subscribed loop")
    args = p.parse_args()
    if args.profile:
        profile()
    chosen = args.backend
    backends = ["asyncio", "trio"] if chosen == "both" else [chosen]
    results = {b: anyio.run(main, backend=b) for b in backends}
    json.dump(
        {"python": sys.version.split()[0], "ratios": _ratios(results), "backends": results},
        sys.stdout,
        indent=2,
    )
    print()
