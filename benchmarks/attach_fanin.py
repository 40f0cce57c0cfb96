"""Attach server fan-in: update throughput from many executions to one client.

    uv run python benchmarks/attach_fanin.py [--events 40000] [--reps 3] [--many 200] [--few 20]

An attach server (this file with ``--serve N``, a subprocess) runs N executions; each,
once one client has bound every execution, publishes its share of ``--events`` model
deltas (the same total for every N) and an end marker. The client (this process, one
unix-socket connection, raw JSON-RPC, reading and discarding) binds all N with
``session/load`` and times the first live update to the last end marker (the binds are
not in the window: the flood starts only once all are bound). Reported: the
median updates per second for ``--many`` and ``--few`` executions, alternated within each
repetition, and their ratio (target: >= 0.9). Prints readable lines, then one JSON
object. Not run in CI.
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

from _attach import frame, start_server

END = "END-OF-FLOOD"


async def serve(count: int, events: int) -> None:
    from agent_channel_acp import AttachServer

    server = AttachServer()
    share = events // count
    bound = asyncio.Event()

    def body() -> Any:
        from agent_channel import ModelDelta, agent_channel, new_id

        async def run() -> None:
            ch = agent_channel()
            while True:
                await bound.wait()
                for i in range(share):
                    ch.publish(ModelDelta(call_id="f", message_id=new_id(), kind="text", text="w"))
                    if i % 64 == 0:
                        await asyncio.sleep(0)
                ch.publish(ModelDelta(call_id="f", message_id=new_id(), kind="text", text=END))
                await asyncio.Event().wait()

        return run

    runs = [asyncio.ensure_future(server.run(body(), title=f"e{i}")) for i in range(count)]
    while len(server.executions()) < count:  # noqa: ASYNC110 (each run adds itself)
        await asyncio.sleep(0)

    async def watch() -> None:  # the flood starts once the client has bound every execution
        while not all(e["clients"] for e in server.executions()):  # noqa: ASYNC110
            await asyncio.sleep(0.001)
        bound.set()

    watcher = asyncio.ensure_future(watch())
    path = Path(tempfile.mkdtemp(prefix="acp-fanin-")) / "sock"
    listener = await asyncio.start_unix_server(server.serve_connection, path, limit=1 << 24)
    ids = " ".join(e["id"] for e in server.executions())
    print(f"READY {path} {ids}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)
    listener.close()
    watcher.cancel()
    await server.aclose()
    for r in runs:
        r.cancel()


async def once(count: int, events: int) -> float:
    """Updates per second from ``count`` executions to one client."""
    proc, line = await start_server(__file__, str(count), str(events))
    assert proc.stdin is not None
    path, ids = line[1], line[2:]
    reader, writer = await asyncio.open_unix_connection(path, limit=1 << 24)
    writer.write(frame(1, "initialize", {"protocolVersion": 1}))
    await writer.drain()
    await reader.readline()
    for i, sid in enumerate(ids):
        writer.write(frame(2 + i, "session/load", {"sessionId": sid, "cwd": "/", "mcpServers": []}))
    await writer.drain()
    ended, updates = 0, 0
    while ended < count:
        f = json.loads(await reader.readline())
        if f.get("method") != "session/update":
            continue
        update = f["params"]["update"]
        if (update.get("_meta") or {}).get("agent_channel.replay"):
            continue
        if updates == 0:
            t = time.perf_counter()  # the flood starts once every execution is bound
        updates += 1
        if END in (update.get("content") or {}).get("text", ""):
            ended += 1
    took = time.perf_counter() - t
    writer.close()
    proc.stdin.close()
    await proc.wait()
    return updates / took


async def main(args: argparse.Namespace) -> dict[str, Any]:
    rates: dict[int, list[float]] = {args.few: [], args.many: []}
    for _ in range(args.reps):
        for n in (args.few, args.many):
            rates[n].append(await once(n, args.events))
    few, many = statistics.median(rates[args.few]), statistics.median(rates[args.many])
    return {
        "events": args.events,
        "reps": args.reps,
        "few": {"executions": args.few, "updates_per_s": round(few)},
        "many": {"executions": args.many, "updates_per_s": round(many)},
        "ratio_many_to_few": round(many / few, 3),
    }


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        asyncio.run(serve(int(sys.argv[2]), int(sys.argv[3])))
        os._exit(0)
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--events", type=int, default=40000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--many", type=int, default=200)
    parser.add_argument("--few", type=int, default=20)
    result = asyncio.run(main(parser.parse_args()))
    print(
        f"one client, {result['few']['executions']} executions: "
        f"{result['few']['updates_per_s']} updates/s; {result['many']['executions']}: "
        f"{result['many']['updates_per_s']} updates/s; ratio {result['ratio_many_to_few']}"
    )
    print(json.dumps(result, indent=2))
