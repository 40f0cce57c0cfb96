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
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from agent_channel import (
    UserMessage,
    open_channel,
)
from agent_channel_openai_agents import factory
from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

sys.path.insert(0, str(Path(__file__).parent))
from _adapter_bench import interrupt_latency as served_interrupt_latency
from _adapter_bench import overhead_figure, per_turn_us, percentiles
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
    per = await per_turn_us(ways, _workload, small, large, rounds)
    return overhead_figure(per, small, large)


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
    return await served_interrupt_latency(factory(_blocking_agent())(None), samples)


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
    return percentiles(latencies)


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
