"""ACP over stdio: our producer next to a bare SDK agent, one run, JSON out.

    uv run python benchmarks/acp_stdio.py [--runs 200] [--chunks 2000]

Both agents run as subprocesses and are driven by the SDK's client side:
- ``bare``: a minimal agent written on the SDK here (echoes a prompt in three chunks;
  a ``block`` prompt waits until cancelled), the floor for the SDK and the pipes;
- ``ours``: ``agent-channel-acp stdio`` serving a react agent with a zero-latency
  scripted model (``block`` runs a tool that waits until cancelled, ``hang`` is a model
  call that never ends).

Measured: startup to ``initialize`` answered, prompt round trip, cancel to the
``cancelled`` response (ours: during a blocking tool and during a model call), and
update throughput (chunks per second to one client). Not run in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


# -- the bare SDK agent (run with --bare-agent) --------------------------------------


class BareAgent:
    """Just enough of an ACP agent: sessions, chunked echo, cancellable waits."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.waits: dict[str, asyncio.Event] = {}
        self.n = 0

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> Any:
        from acp import InitializeResponse

        return InitializeResponse(protocol_version=1)

    async def new_session(self, cwd: str, **kwargs: Any) -> Any:
        from acp import NewSessionResponse

        self.n += 1
        return NewSessionResponse(session_id=f"s{self.n}")

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> Any:
        from acp import PromptResponse, update_agent_message_text

        text = prompt[0].text
        words = text.split()
        if words[0] == "block":
            await self.conn.session_update(session_id, update_agent_message_text("waiting"))
            wait = self.waits[session_id] = asyncio.Event()
            await wait.wait()
            return PromptResponse(stop_reason="cancelled")
        count = int(words[1]) if words[0] == "chunks" else 3
        for i in range(count):
            await self.conn.session_update(session_id, update_agent_message_text(f"w{i} w w "))
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        wait = self.waits.pop(session_id, None)
        if wait is not None:
            wait.set()


def bare_main() -> None:
    import acp

    asyncio.run(acp.run_agent(BareAgent()))  # pyright: ignore[reportArgumentType]


# -- our agent (loaded by the producer as acp_stdio:ours) ----------------------------


def ours(model: str | None = None) -> Any:
    import anyio
    from agent_channel import ChatMessage, ChatMessageTool, ChatMessageUser
    from agent_channel_react import (
        AgentState,
        ScriptedModel,
        call,
        react,
        reply,
        tool,
        tool_call,
    )

    @tool(kind="execute")
    async def block(why: str) -> str:
        """Wait until cancelled.

        Args:
            why: Why.
        """
        await anyio.sleep_forever()
        return ""

    def script(messages: Sequence[ChatMessage], tools: Any) -> Any:
        last = messages[-1]
        words = last.text.split() if isinstance(last, ChatMessageUser) else []
        if isinstance(last, ChatMessageTool):
            return reply("done")
        if words[:1] == ["block"]:
            return call(tool_call("block", why="bench"), content="waiting")
        if words[:1] == ["chunks"]:
            return reply("w w w " * int(words[1]))  # three words a chunk
        return reply("w0 w w w1 w w w2 w w")

    class Model:
        def __init__(self) -> None:
            self.inner = ScriptedModel(script)
            self.name: str | None = "bench"

        async def generate(self, messages: Any, tools: Any, config: Any, stream: Any) -> Any:
            last = messages[-1]
            if isinstance(last, ChatMessageUser) and last.text == "hang":
                stream.text("waiting")
                await anyio.sleep_forever()
            return await self.inner.generate(messages, tools, config, stream)

    agent = react(model=Model(), tools=[block], prompt=None, submit=False)

    async def body() -> Any:
        return await agent(AgentState())

    return body


# -- the client ----------------------------------------------------------------------


class Client:
    def __init__(self) -> None:
        self.chunks = 0
        self.marker = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        kind = update.session_update
        if kind == "agent_message_chunk":
            self.chunks += 1
        if kind == "tool_call" or (
            kind == "agent_message_chunk" and getattr(update.content, "text", "") == "waiting"
        ):
            self.marker.set()

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def stats(samples: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples)
    p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    return {"median_ms": round(statistics.median(ms), 3), "p99_ms": round(p99, 3), "n": len(ms)}


async def measure(name: str, argv: list[str], runs: int, chunks: int) -> dict[str, Any]:
    import acp

    env = {k: v for k in ("PATH", "HOME", "LANG") if (v := os.environ.get(k))}
    env["PYTHONPATH"] = str(HERE)
    out: dict[str, Any] = {}

    startups: list[float] = []
    for _ in range(5):
        t = time.perf_counter()
        async with acp.spawn_agent_process(
            Client(), sys.executable, *argv, env=env, transport_kwargs={"stderr": None}
        ) as (conn, _proc):
            await conn.initialize(protocol_version=1)
            startups.append(time.perf_counter() - t)
    out["startup_to_initialize"] = stats(startups)

    client = Client()
    async with acp.spawn_agent_process(
        client, sys.executable, *argv, env=env, transport_kwargs={"stderr": None}
    ) as (conn, _proc):
        await conn.initialize(protocol_version=1)

        async def session() -> str:
            return (await conn.new_session(cwd="/", mcp_servers=[])).session_id

        sid = await session()
        for _ in range(20):  # warm up
            await conn.prompt(session_id=sid, prompt=[acp.text_block("hello")])
        rt: list[float] = []
        for i in range(runs):
            if i % 50 == 0:
                sid = await session()  # keep the conversation short
            t = time.perf_counter()
            await conn.prompt(session_id=sid, prompt=[acp.text_block("hello")])
            rt.append(time.perf_counter() - t)
        out["prompt_round_trip"] = stats(rt)

        async def cancels(word: str) -> dict[str, float]:
            samples: list[float] = []
            sid = await session()
            for i in range(runs):
                if i % 50 == 49:
                    sid = await session()
                client.marker.clear()
                task = asyncio.ensure_future(
                    conn.prompt(session_id=sid, prompt=[acp.text_block(word)])
                )
                await client.marker.wait()
                t = time.perf_counter()
                await conn.cancel(session_id=sid)
                r = await task
                samples.append(time.perf_counter() - t)
                assert r.stop_reason == "cancelled", r
            return stats(samples)

        out["cancel_to_cancelled"] = await cancels("block")
        if name == "ours":
            out["cancel_during_model_call"] = await cancels("hang")

        sid = await session()
        client.chunks = 0
        t = time.perf_counter()
        await conn.prompt(session_id=sid, prompt=[acp.text_block(f"chunks {chunks}")])
        dt = time.perf_counter() - t
        out["throughput"] = {"chunks": client.chunks, "chunks_per_s": round(client.chunks / dt)}
    return out


async def main(runs: int, chunks: int) -> dict[str, Any]:
    bare = await measure("bare", [str(Path(__file__)), "--bare-agent"], runs, chunks)
    producer = ["-m", "agent_channel_acp", "stdio", "--agent", "acp_stdio:ours"]
    mine = await measure("ours", producer, runs, chunks)
    return {
        "runs": runs,
        "bare_sdk": bare,
        "ours": mine,
        "ratios": {
            "cancel_median": round(
                mine["cancel_to_cancelled"]["median_ms"] / bare["cancel_to_cancelled"]["median_ms"],
                2,
            ),
            "cancel_p99": round(
                mine["cancel_to_cancelled"]["p99_ms"] / bare["cancel_to_cancelled"]["p99_ms"], 2
            ),
            "throughput": round(
                mine["throughput"]["chunks_per_s"] / bare["throughput"]["chunks_per_s"], 2
            ),
        },
    }


if __name__ == "__main__":
    if "--bare-agent" in sys.argv:
        bare_main()
    else:
        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("--runs", type=int, default=200)
        parser.add_argument("--chunks", type=int, default=2000)
        args = parser.parse_args()
        print(json.dumps(asyncio.run(main(args.runs, args.chunks)), indent=2))
