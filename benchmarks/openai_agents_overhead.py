"""Benchmarks for the OpenAI Agents SDK adapter (not tests; not run in CI). Prints JSON.

1. Per-turn cost of an ``agents.Agent`` served through its adapter, a producer subscribed
   (every event built and delivered), against the same agent run bare by the SDK on the same
   scripted workload: N tool-call turns of the SDK's own ``ScriptedModel`` (zero latency);
   the per-turn figure is the slope between two N (a run's fixed cost cancels), medians of
   interleaved rounds. Bare is ``Runner.run_streamed`` with its events read (what the adapter
   drives: target ratio <= 1.05) and ``Runner.run`` (not streamed).
2. Interrupt during a tool: from ``ref.interrupt()`` to the repaired conversation holding the
   call's cancelled result, p99, against the ReAct loop's on the same measure, target ratio
   <= 1.2; beside it the SDK's own floor: a bare streamed run's ``cancel()`` in the same tool
   to its task's end.
3. Memory per running execution: K served executions parked for their operator (each has
   answered one prompt), traced allocations per execution.

Tracing is off. Run: .venv/bin/python benchmarks/openai_agents_overhead.py
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

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
from agent_channel_openai_agents import factory
from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

sys.path.insert(0, str(Path(__file__).parent))
from _adapter_memory import memory
from react_overhead import interrupt_latency as react_interrupt_latency

set_tracing_disabled(True)


def _model(answer: Any) -> ScriptedModel:
    """A ScriptedModel that never runs out: each step's responder ``answer(input)`` queues
    the next."""

    def step(call: Any) -> Any:
        model.enqueue(ModelStep.respond(step))
        return answer(call.input)

    model = ScriptedModel([ModelStep.respond(step)])
    return model


@function_tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _outputs(items: Any) -> int:
    return sum(1 for i in items if isinstance(i, dict) and i.get("type") == "function_call_output")


def _workload(turns: int) -> Agent[Any]:
    """An agent whose model calls ``add`` ``turns`` times, then answers."""

    def answer(items: Any) -> Any:
        done = _outputs(items)
        if done >= turns:
            return [assistant_message("Done.")]
        return [function_call("add", {"a": 1, "b": 2}, call_id=f"c{done}")]

    return Agent(name="bench", model=_model(answer), tools=[add])


async def _bare_run(agent: Agent[Any]) -> None:
    await Runner.run(agent, "go", max_turns=100)


async def _bare_stream(agent: Agent[Any]) -> None:
    result = Runner.run_streamed(agent, "go", max_turns=100)
    async for _ in result.stream_events():
        pass


async def _served(agent: Agent[Any]) -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        ref.subscribe(lambda e: None)  # a producer subscribed: every event built and delivered
        ref.post(UserMessage("go"))
        await factory(agent)(None)()  # not live: ends after the prompt


async def overhead(small: int = 5, large: int = 25, rounds: int = 11) -> dict[str, Any]:
    ways = {"bare_run": _bare_run, "bare_stream": _bare_stream, "served": _served}
    agents = {n: _workload(n) for n in (small, large)}
    times: dict[tuple[str, int], list[float]] = {(w, n): [] for w in ways for n in agents}
    for way in ways.values():  # warm-up: imports, schema building
        await way(agents[small])
    for _ in range(rounds):  # interleaved, so a busy moment hits every way alike
        for w, way in ways.items():
            for n, agent in agents.items():
                t0 = time.perf_counter()
                await way(agent)
                times[(w, n)].append(time.perf_counter() - t0)

    def slope(w: str) -> float:
        a, b = statistics.median(times[(w, small)]), statistics.median(times[(w, large)])
        return (b - a) / (large - small) * 1e6

    per = {w: slope(w) for w in ways}
    return {
        "turns": [small, large],
        "per_turn_us": {w: round(v, 1) for w, v in per.items()},
        "ratio_served_vs_bare_stream": round(per["served"] / per["bare_stream"], 3),
        "ratio_served_vs_bare_run": round(per["served"] / per["bare_run"], 3),
        "target_ratio": 1.05,
    }


@function_tool
async def block() -> str:
    """Wait until cancelled."""
    await anyio.sleep_forever()
    return ""


def _blocking_agent() -> Agent[Any]:
    counter = iter(range(10**9))
    return Agent(
        name="blocking",
        model=_model(lambda items: [function_call("block", {}, call_id=f"b{next(counter)}")]),
        tools=[block],
    )


async def interrupt_latency(samples: int = 200) -> dict[str, Any]:
    """From ``ref.interrupt()`` during a tool to the call's cancelled result appended."""
    agent = _blocking_agent()
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
        tg.start_soon(factory(agent)(None))
        await finished.wait()
        tg.cancel_scope.cancel()
    ms = sorted(x * 1e3 for x in latencies)
    return {
        "samples": len(ms),
        "p50_ms": round(ms[len(ms) // 2], 4),
        "p99_ms": round(ms[int(len(ms) * 0.99) - 1], 4),
        "max_ms": round(ms[-1], 4),
    }


async def bare_cancel(samples: int = 200) -> dict[str, Any]:
    """The SDK alone: a streamed run ``cancel()``ed in a tool, to its task's end."""
    agent = _blocking_agent()
    latencies: list[float] = []
    for _ in range(samples):
        result = Runner.run_streamed(agent, "go")
        async for event in result.stream_events():
            if getattr(event, "name", "") == "tool_called":
                await asyncio.sleep(0)  # the tool starts
                t0 = time.perf_counter()
                result.cancel()
                task = result.run_loop_task
                if task is not None:
                    await asyncio.wait((task,))
                latencies.append(time.perf_counter() - t0)
                break
    ms = sorted(x * 1e3 for x in latencies)
    return {"samples": len(ms), "p50_ms": round(ms[len(ms) // 2], 4), "p99_ms": round(ms[-3], 4)}


async def main() -> dict[str, Any]:
    ours = await interrupt_latency()
    react = await react_interrupt_latency(samples=300)
    return {
        "overhead": await overhead(),
        "interrupt_during_tool": {
            "openai_agents": ours,
            "react": {k: react[k] for k in ("samples", "p50_ms", "p99_ms", "max_ms")},
            "openai_agents_bare_cancel": await bare_cancel(),
            "ratio_p99_vs_react": round(ours["p99_ms"] / react["p99_ms"], 3),
            "target_ratio_p99": 1.2,
        },
        "memory_per_execution": await memory(lambda: factory(_workload(1))(None)),
    }


if __name__ == "__main__":
    print(json.dumps(anyio.run(main), indent=2))
