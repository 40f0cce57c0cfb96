"""Benchmarks for the pydantic-ai adapter (not tests; not run in CI). Prints JSON.

1. Per-turn cost of a pydantic-ai agent served through its adapter, a producer subscribed
   (every event built and delivered), against the same agent run bare by pydantic-ai on the
   same scripted workload: N tool-call turns of a zero-latency ``FunctionModel`` (N under
   pydantic-ai's default request limit of 50); the per-turn figure is the slope between two
   N (so a run's fixed cost cancels), medians of interleaved rounds. Bare is measured two
   ways: ``iter()`` with ``node.stream()`` (what the adapter
   drives: the like-for-like figure, target ratio <= 1.05) and ``agent.run()`` (pydantic-ai's
   non-streamed default).
2. Interrupt during a tool: from ``ref.interrupt()`` to the repaired conversation holding the
   call's cancelled result, p99, against the ReAct loop's on the same measure
   (``react_overhead.interrupt_latency``), target ratio <= 1.2. Beside it, pydantic-ai's own
   floor: a bare ``iter()`` run's task cancelled in the same tool, to the run torn down.
3. Memory per running execution: K served executions parked for their operator (each has
   answered one prompt), traced allocations per execution.

Run: .venv/bin/python benchmarks/pydantic_ai_overhead.py
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
from agent_channel import (
    UserMessage,
    open_channel,
)
from agent_channel_pydantic_ai import factory
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

sys.path.insert(0, str(Path(__file__).parent))
from _adapter_bench import interrupt_latency as served_interrupt_latency
from _adapter_bench import overhead_figure, per_turn_us, percentiles
from _adapter_memory import memory
from react_overhead import interrupt_latency as react_interrupt_latency


def _returns(messages: list[ModelMessage]) -> int:
    return sum(isinstance(p, ToolReturnPart) for m in messages for p in m.parts)


def _workload(turns: int) -> Agent[None, str]:
    """An agent whose model calls ``add`` ``turns`` times, then answers."""

    def whole(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if _returns(messages) >= turns:
            return ModelResponse(parts=[TextPart("Done.")])
        return ModelResponse(parts=[ToolCallPart("add", {"a": 1, "b": 2})])

    async def streamed(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        if _returns(messages) >= turns:
            yield "Done."
            return
        yield {0: DeltaToolCall("add", '{"a": 1, "b": 2}')}

    agent = Agent(FunctionModel(whole, stream_function=streamed))

    @agent.tool_plain
    async def add(a: int, b: int) -> int:
        return a + b

    return agent


async def _bare_run(agent: Agent[None, str]) -> None:
    await agent.run("go")


async def _bare_stream(agent: Agent[None, str]) -> None:
    async with agent.iter("go") as run:
        node = run.next_node
        while not Agent.is_end_node(node):
            if Agent.is_model_request_node(node):
                async with node.stream(run.ctx) as stream:
                    async for _ in stream:
                        pass
            node = await run.next(node)


async def _served(agent: Agent[None, str]) -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        ref.subscribe(lambda e: None)  # a producer subscribed: every event built and delivered
        ref.post(UserMessage("go"))
        await factory(agent)(None)()  # not live: ends after the prompt


async def overhead(small: int = 10, large: int = 45, rounds: int = 21) -> dict[str, Any]:
    ways = {"bare_run": _bare_run, "bare_stream": _bare_stream, "served": _served}
    per = await per_turn_us(ways, _workload, small, large, rounds)
    return overhead_figure(per, small, large)


def _blocking_agent(started: anyio.Event | None = None) -> Agent[None, str]:
    """An agent whose every turn calls ``block``, which waits until cancelled."""

    async def streamed(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        yield {0: DeltaToolCall("block", "{}")}

    agent = Agent(FunctionModel(stream_function=streamed))

    @agent.tool_plain
    async def block() -> str:
        if started is not None:
            started.set()
        await anyio.sleep_forever()
        return ""

    return agent


async def interrupt_latency(samples: int = 300) -> dict[str, Any]:
    """From ``ref.interrupt()`` during a tool to the call's cancelled result appended."""
    return await served_interrupt_latency(factory(_blocking_agent())(None), samples)


async def bare_cancel(samples: int = 300) -> dict[str, Any]:
    """pydantic-ai alone: a run's task cancelled in a tool, to its teardown's end."""
    latencies: list[float] = []
    for _ in range(samples):
        started = anyio.Event()
        agent = _blocking_agent(started)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_bare_stream, agent)
            await started.wait()
            t0 = time.perf_counter()
            tg.cancel_scope.cancel()
        latencies.append(time.perf_counter() - t0)
    return percentiles(latencies)


async def main() -> dict[str, Any]:
    ours = await interrupt_latency()
    react = await react_interrupt_latency(samples=300)
    return {
        "overhead": await overhead(),
        "interrupt_during_tool": {
            "pydantic_ai": ours,
            "react": {k: react[k] for k in ("samples", "p50_ms", "p99_ms", "max_ms")},
            "pydantic_ai_bare_cancel": await bare_cancel(),
            "ratio_p99_vs_react": round(ours["p99_ms"] / react["p99_ms"], 3),
            "target_ratio_p99": 1.2,
        },
        "memory_per_execution": await memory(lambda: factory(_workload(1))(None)),
    }


if __name__ == "__main__":
    print(json.dumps(anyio.run(main), indent=2))
