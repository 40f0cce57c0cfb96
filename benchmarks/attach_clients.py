"""Attach mode: what attached clients cost the agent, and how fast an attach starts streaming.

    uv run python benchmarks/attach_clients.py [--turns 300] [--reps 3] [--attaches 200]
                                               [--baseline-src DIR]

Each measurement starts an attach server as a subprocess (this file with ``--serve``) and
drives it over its unix socket with raw JSON-RPC clients in this process (they read and
discard everything, so the client side costs as little as it can):

- **throughput**: one execution of a react agent on a zero-latency scripted model runs
  ``--turns`` turns (each: a model call streaming ten pieces, then a tool call), timed in
  the server from its first step to its end, with 0, 1, 10 and 50 clients bound. The
  client counts alternate within each repetition, so machine noise hits all of them; the
  result is the median turns per second and its ratio to 0 clients (target: >= 0.90 at 50),
  and the server's CPU time per turn (the clients run on the same machine and compete for
  its cores: the CPU ratio is the server's own cost).
- **attach**: an execution with 100 events in its ring keeps streaming (a piece a
  millisecond); ``--attaches`` times a fresh connection binds with ``session/load``. Timed
  from the request to the ``turn_state`` snapshot (the preamble with the 100-event replay
  done) and to the first live event after it; p50 and p99, and the ratio of each to an
  ``initialize`` round trip on the same connection (target: p99 <= 50 ms).

``--baseline-src DIR`` runs every throughput measurement a second time with ``DIR`` first
on the server's ``PYTHONPATH`` (another version of ``agent_channel_acp``, e.g. ``git
archive`` of an older commit's ``packages/acp-producer/src``), interleaved with this one,
and reports both side by side.

Prints readable lines, then one JSON object. Not run in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _attach import frame, pct, start_server

COUNTS = (0, 1, 10, 50)
LISTENING = asyncio.Event()


# -- the server side (run with --serve) ----------------------------------------------


async def serve(kind: str, turns: int, clients: int) -> None:
    from agent_channel_acp import AttachServer  # the public name: a --baseline-src of any layout

    server = AttachServer()
    body = _throughput_body(server, turns, clients) if kind == "throughput" else _stream_body()
    run = asyncio.ensure_future(server.run(body, title=kind))
    while not server.executions():  # noqa: ASYNC110 (run adds it at its first step)
        await asyncio.sleep(0)
    path = Path(tempfile.mkdtemp(prefix="acp-bench-")) / "sock"
    listener = await asyncio.start_unix_server(server.serve_connection, path, limit=1 << 24)
    print(f"READY {path} {server.executions()[0]['id']}", flush=True)
    LISTENING.set()
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)
    listener.close()
    await server.aclose()
    run.cancel()
    sys.stdout.flush()


def _throughput_body(server: Any, turns: int, clients: int) -> Any:
    from agent_channel import ChatMessageUser
    from agent_channel_react import call, scripted_agent_factory, tool, tool_call

    @tool(kind="read", title="Step {n}")
    async def step(n: int) -> str:
        """One step.

        Args:
            n: Its number.
        """
        return f"step {n} done"

    pieces = " ".join(f"w{i}" for i in range(10))

    calls = [0]

    def script(messages: Any, tools: Any) -> Any:
        done = calls[0]
        calls[0] += 1
        if done >= turns:
            return call(tool_call("submit", answer="finished"), content="submitting")
        return call(tool_call("step", n=done), content=pieces)

    factory = scripted_agent_factory(
        script, tools=[step], submit=True, input=[ChatMessageUser(content="go", source="task")]
    )
    inner = factory(None)

    async def body() -> object:
        await LISTENING.wait()
        while server.executions()[0]["clients"] < clients:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        start, cpu = time.perf_counter(), time.process_time()
        result = await inner()
        took, used = time.perf_counter() - start, time.process_time() - cpu
        print(json.dumps({"turns": turns, "seconds": took, "cpu": used}), flush=True)
        return result

    return body


def _stream_body() -> Any:
    from agent_channel import ChatMessageUser, MessageAppended, ModelDelta, agent_channel, new_id

    async def body() -> None:
        ch = agent_channel()
        for i in range(100):  # 100 ring slots
            ch.publish(MessageAppended(message=ChatMessageUser(content=f"m{i}"), index=i))
        while True:
            ch.publish(ModelDelta(call_id="c", message_id=new_id(), kind="text", text="piece"))
            await asyncio.sleep(0.001)

    return body


# -- the client side -------------------------------------------------------------------


class Served:
    def __init__(self, proc: asyncio.subprocess.Process, path: str, execution: str) -> None:
        self.proc, self.path, self.execution = proc, path, execution

    @classmethod
    async def start(
        cls, kind: str, turns: int = 0, clients: int = 0, src: str | None = None
    ) -> Served:
        # stderr discarded: teardown noise of a cut connection
        proc, line = await start_server(
            __file__, kind, str(turns), str(clients), quiet=True, src=src
        )
        return cls(proc, line[1], line[2])

    async def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        await self.proc.wait()


async def bind(path: str, execution: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_unix_connection(path, limit=1 << 24)
    writer.write(frame(1, "initialize", {"protocolVersion": 1}))
    writer.write(frame(2, "session/load", {"sessionId": execution, "cwd": "/", "mcpServers": []}))
    await writer.drain()
    return reader, writer


async def discard(reader: asyncio.StreamReader) -> None:
    while await reader.read(1 << 16):
        pass


async def throughput_once(turns: int, clients: int, src: str | None) -> tuple[float, float]:
    served = await Served.start("throughput", turns, clients, src)
    readers = [await bind(served.path, served.execution) for _ in range(clients)]
    drains = [asyncio.ensure_future(discard(r)) for r, _ in readers]
    assert served.proc.stdout is not None
    result = json.loads(await served.proc.stdout.readline())
    for _, w in readers:
        w.close()
    await asyncio.gather(*drains, return_exceptions=True)
    await served.stop()
    return result["turns"] / result["seconds"], result["cpu"] / result["turns"]


async def attach_once(served: Served) -> tuple[float, float, float]:
    reader, writer = await asyncio.open_unix_connection(served.path, limit=1 << 24)
    t = time.perf_counter()
    writer.write(frame(1, "initialize", {"protocolVersion": 1}))
    await writer.drain()
    await reader.readline()
    rtt = time.perf_counter() - t
    t = time.perf_counter()
    writer.write(
        frame(2, "session/load", {"sessionId": served.execution, "cwd": "/", "mcpServers": []})
    )
    await writer.drain()
    snapshot = first_live = 0.0
    replayed = 0
    while True:
        f = json.loads(await reader.readline())
        method = f.get("method")
        if method == "_agent_channel/turn_state" and not snapshot:
            snapshot = time.perf_counter() - t
        elif method == "session/update":
            meta = f["params"]["update"].get("_meta") or {}
            if meta.get("agent_channel.replay"):
                replayed += 1
            elif snapshot:
                first_live = time.perf_counter() - t
                break
    assert replayed == 100, replayed
    writer.close()
    return rtt, snapshot, first_live


def _table(rates: dict[int, list[float]], cpus: dict[int, list[float]]) -> dict[str, Any]:
    base = statistics.median(rates[0])
    base_cpu = statistics.median(cpus[0])
    return {
        str(k): {
            "turns_per_s": round(statistics.median(v), 1),
            "ratio_to_0": round(statistics.median(v) / base, 3),
            "server_cpu_ms_per_turn": round(1000 * statistics.median(cpus[k]), 3),
            "cpu_ratio_to_0": round(statistics.median(cpus[k]) / base_cpu, 2),
        }
        for k, v in rates.items()
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    versions: dict[str, str | None] = {"this": None}
    if args.baseline_src:
        versions["baseline"] = args.baseline_src
    rates = {v: {k: list[float]() for k in COUNTS} for v in versions}
    cpus = {v: {k: list[float]() for k in COUNTS} for v in versions}
    for _ in range(args.reps):
        for k in COUNTS:
            for name, src in versions.items():  # interleaved: noise hits every version
                rate, cpu = await throughput_once(args.turns, k, src)
                rates[name][k].append(rate)
                cpus[name][k].append(cpu)
    throughput = {name: _table(rates[name], cpus[name]) for name in versions}
    served = await Served.start("stream")
    samples = [await attach_once(served) for _ in range(args.attaches)]
    await served.stop()
    rtts = [s[0] for s in samples]
    attach: dict[str, Any] = {"initialize_rtt_ms_p50": round(1000 * pct(rtts, 0.5), 3)}
    for name, i in (("to_snapshot", 1), ("to_first_live", 2)):
        values = [s[i] for s in samples]
        attach[f"{name}_ms_p50"] = round(1000 * pct(values, 0.5), 3)
        attach[f"{name}_ms_p99"] = round(1000 * pct(values, 0.99), 3)
        attach[f"{name}_p99_ratio_to_rtt"] = round(pct(values, 0.99) / pct(rtts, 0.5), 1)
    return {"turns": args.turns, "reps": args.reps, "throughput": throughput, "attach": attach}


def report(result: dict[str, Any]) -> None:
    print(f"turn throughput, zero-latency scripted model, {result['turns']} turns, median of")
    print(f"{result['reps']} (ratio to 0 clients; server CPU ms a turn):")
    for name, table in result["throughput"].items():
        cells = "  ".join(
            f"{k}: {row['ratio_to_0']:.2f} ({row['server_cpu_ms_per_turn']:.2f} ms)"
            for k, row in table.items()
        )
        print(f"  {name:>8}  {cells}   [0 clients: {table['0']['turns_per_s']} turns/s]")
    a = result["attach"]
    print(
        f"attach with a 100-event replay: to first live p50 {a['to_first_live_ms_p50']} ms,"
        f" p99 {a['to_first_live_ms_p99']} ms"
        f" (initialize round trip {a['initialize_rtt_ms_p50']} ms)"
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        asyncio.run(serve(sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
        os._exit(0)
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--attaches", type=int, default=200)
    parser.add_argument("--baseline-src", help="another agent_channel_acp to compare with")
    result = asyncio.run(main(parser.parse_args()))
    report(result)
    print(json.dumps(result, indent=2))
