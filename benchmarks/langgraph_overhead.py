"""Benchmarks for the LangGraph adapter (not tests; not run in CI). Prints JSON.

1. Per-turn cost of a compiled LangGraph graph (its prebuilt ``create_react_agent``) served
   through its adapter, a producer subscribed (every event built and delivered), against
   the same graph run bare by LangGraph on the same scripted workload: N tool-call turns of
   a zero-latency streaming chat model; the per-turn figure is the slope between two N (a
   run's fixed cost cancels), medians of interleaved rounds. Bare is measured two ways:
   ``astream(stream_mode=["messages", "updates"])`` on a copy with a checkpointer, read to
   its end (what the adapter drives, less its pauses: the like-for-like figure, target
   ratio <= 1.05) and ``ainvoke`` without a checkpointer (LangGraph's plainest run).
2. Interrupt during a tool: from ``ref.interrupt()`` to the repaired conversation holding the
   call's cancelled result, p99, against the ReAct loop's on the same measure
   (``react_overhead.interrupt_latency``), target ratio <= 1.2. Beside it LangGraph's own
   floor: a task reading a bare ``astream`` cancelled in the same tool, to its end.
3. Memory per running execution: K served executions parked for their operator (each has
   answered one prompt), traced allocations per execution.

Run: .venv/bin/python benchmarks/langgraph_overhead.py
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
from agent_channel import (
    UserMessage,
    open_channel,
)
from agent_channel_langgraph import factory
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

sys.path.insert(0, str(Path(__file__).parent))
from _adapter_bench import interrupt_latency as served_interrupt_latency
from _adapter_bench import overhead_figure, per_turn_us, percentiles
from _adapter_memory import memory
from react_overhead import interrupt_latency as react_interrupt_latency

warnings.simplefilter("ignore", DeprecationWarning)  # create_react_agent: moved, still served


class Model(BaseChatModel):
    """Calls ``name`` until ``turns`` results are in, then answers (streamed, no latency)."""

    turns: int = 1
    name_: str = "add"

    @property
    def _llm_type(self) -> str:
        return "bench"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Model:  # type: ignore[override]
        return self

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        raise NotImplementedError

    async def _agenerate(
        self, messages: list[BaseMessage], *args: Any, **kwargs: Any
    ) -> ChatResult:
        chunks = [c.message async for c in self._astream(messages)]
        merged = chunks[0]
        for c in chunks[1:]:
            merged = merged + c
        assert isinstance(merged, AIMessageChunk)
        answer = AIMessage(content=merged.content, tool_calls=merged.tool_calls)
        return ChatResult(generations=[ChatGeneration(message=answer)])

    async def _astream(
        self, messages: list[BaseMessage], *args: Any, **kwargs: Any
    ) -> AsyncIterator[ChatGenerationChunk]:
        done = sum(1 for m in messages if isinstance(m, ToolMessage))
        if done >= self.turns:
            yield ChatGenerationChunk(message=AIMessageChunk(content="Done."))
            return
        call = tool_call_chunk(name=self.name_, args='{"a": 1, "b": 2}', id=f"c{done}", index=0)
        yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[call]))


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _workload(turns: int) -> Any:
    return create_react_agent(Model(turns=turns), [add])


async def _bare_invoke(graph: Any) -> None:
    await graph.ainvoke({"messages": [HumanMessage("go")]}, {"recursion_limit": 1000})


async def _bare_stream(graph: Any) -> None:
    mine = graph.copy(update={"checkpointer": InMemorySaver()})
    config = {"configurable": {"thread_id": "1"}, "recursion_limit": 1000}
    async for _ in mine.astream(
        {"messages": [HumanMessage("go")]}, config, stream_mode=["messages", "updates"]
    ):
        pass


async def _served(graph: Any) -> None:
    async with open_channel() as ch:
        ref = ch.ref()
        ref.subscribe(lambda e: None)  # a producer subscribed: every event built and delivered
        ref.post(UserMessage("go"))
        await factory(graph)(None)()  # not live: ends after the prompt


async def overhead(small: int = 5, large: int = 25, rounds: int = 11) -> dict[str, Any]:
    ways = {"bare_invoke": _bare_invoke, "bare_stream": _bare_stream, "served": _served}
    per = await per_turn_us(ways, _workload, small, large, rounds)
    return overhead_figure(per, small, large)


@tool
async def block() -> str:
    """Wait until cancelled."""
    await anyio.sleep_forever()
    return ""


def _blocking() -> Any:
    return create_react_agent(Model(turns=10**9, name_="block"), [block])


async def interrupt_latency(samples: int = 200) -> dict[str, Any]:
    """From ``ref.interrupt()`` during a tool to the call's cancelled result appended."""
    return await served_interrupt_latency(factory(_blocking())(None), samples)


async def bare_cancel(samples: int = 200) -> dict[str, Any]:
    """LangGraph alone: the task reading ``astream`` cancelled in a tool, to its end."""
    graph = _blocking()
    latencies: list[float] = []
    for _ in range(samples):
        in_tool = asyncio.Event()

        async def read(in_tool: asyncio.Event = in_tool) -> None:
            async for mode, chunk in graph.astream(
                {"messages": [HumanMessage("go")]}, stream_mode=["messages", "updates"]
            ):
                if mode == "updates" and "agent" in chunk:
                    in_tool.set()

        task = asyncio.ensure_future(read())
        await in_tool.wait()
        for _ in range(3):
            await asyncio.sleep(0)  # the tool starts
        t0 = time.perf_counter()
        task.cancel()
        await asyncio.wait((task,))
        latencies.append(time.perf_counter() - t0)
    return percentiles(latencies)


async def main() -> dict[str, Any]:
    ours = await interrupt_latency()
    react = await react_interrupt_latency(samples=300)
    return {
        "overhead": await overhead(),
        "interrupt_during_tool": {
            "langgraph": ours,
            "react": {k: react[k] for k in ("samples", "p50_ms", "p99_ms", "max_ms")},
            "langgraph_bare_cancel": await bare_cancel(),
            "ratio_p99_vs_react": round(ours["p99_ms"] / react["p99_ms"], 3),
            "target_ratio_p99": 1.2,
        },
        "memory_per_execution": await memory(lambda: factory(_workload(1))(None)),
    }


if __name__ == "__main__":
    print(json.dumps(anyio.run(main), indent=2))
