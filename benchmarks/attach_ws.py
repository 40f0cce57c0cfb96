"""Attach over WebSocket vs the unix socket: the same client, the same server, two paths.

    uv run python benchmarks/attach_ws.py [--attaches 200] [--events 20000] [--reps 5]

One attach server runs as a subprocess (this file with ``--serve``), listening on a unix
socket and over WebSocket (``hosting._asgi.WsEndpoint``, as ``serve --ws``). One raw
JSON-RPC client in this process speaks newline-delimited frames over either stream: the
unix socket, or the verbs' WebSocket client (``wire._ws.ws_streams``). The two transports
alternate within each repetition, so machine noise hits both.

- **bind to first event**: an execution streams a piece a millisecond with 100 events in
  its ring; a fresh connection ``initialize``s and binds with ``session/load``, timed from
  the request to the first live event after the replay. p50 and p99 per transport.
- **update throughput**: a second execution publishes ``--events`` text pieces as fast as
  it can once one client is bound, then an end marker; the client's time from bind to the
  marker gives updates a second.

Prints ws/unix ratios (bind p99: lower is better, 1.0 is parity; throughput: higher is
better), then one JSON object. Not run in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _attach import frame, pct, start_server

END = "END-OF-FLOOD"


# -- the server side (run with --serve) ----------------------------------------------


async def serve(events: int) -> None:
    from agent_channel_acp import AttachServer
    from agent_channel_acp.hosting._asgi import WsEndpoint, WsOptions

    server = AttachServer()
    runs = [
        asyncio.ensure_future(server.run(_stream_body(), title="stream")),
        asyncio.ensure_future(server.run(_flood_body(server, events), title="flood")),
    ]
    while len(server.executions()) < 2:  # noqa: ASYNC110 (each run adds itself)
        await asyncio.sleep(0)
    path = Path(tempfile.mkdtemp(prefix="acp-bench-")) / "sock"
    listener = await asyncio.start_unix_server(server.serve_connection, path, limit=1 << 24)
    endpoint = WsEndpoint(server.serve_connection, WsOptions(0))
    await endpoint.start()
    ids = {e["title"]: e["id"] for e in server.executions()}
    t = endpoint.transport
    print(f"READY {path} {t['url']} {t.get('token')} {ids['stream']} {ids['flood']}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)
    listener.close()
    endpoint.stop_accepting()
    await server.aclose()
    await endpoint.close()
    for r in runs:
        r.cancel()


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


def _flood_body(server: Any, events: int) -> Any:
    from agent_channel import ModelDelta, agent_channel, new_id

    def clients() -> int:
        return next(e["clients"] for e in server.executions() if e["title"] == "flood")

    async def body() -> None:
        ch = agent_channel()
        while True:
            while clients() < 1:  # noqa: ASYNC110 (a client binds from another process)
                await asyncio.sleep(0.001)
            for i in range(events):
                ch.publish(ModelDelta(call_id="f", message_id=new_id(), kind="text", text="w"))
                if i % 64 == 0:
                    await asyncio.sleep(0)
            ch.publish(ModelDelta(call_id="f", message_id=new_id(), kind="text", text=END))
            while clients() > 0:  # noqa: ASYNC110
                await asyncio.sleep(0.001)

    return body


# -- the client side -------------------------------------------------------------------


class Target:
    def __init__(self, line: list[str]) -> None:
        self.path, self.url, self.token, self.stream, self.flood = line[1:6]

    async def open(self, kind: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if kind == "unix":
            reader, writer = await asyncio.open_unix_connection(self.path, limit=1 << 24)
            hello: dict[str, Any] = {"protocolVersion": 1}
        else:
            from agent_channel_acp.wire._ws import ws_streams

            reader, writer = await ws_streams(self.url, reader=asyncio.StreamReader(1 << 24))
            hello = {"protocolVersion": 1, "_meta": {"agent_channel.token": self.token}}
        writer.write(frame(1, "initialize", hello))
        await writer.drain()
        await reader.readline()
        return reader, writer


def _live(f: dict[str, Any]) -> dict[str, Any] | None:
    if f.get("method") != "session/update":
        return None
    update = f["params"]["update"]
    return None if (update.get("_meta") or {}).get("agent_channel.replay") else update


async def bind_once(target: Target, kind: str) -> float:
    reader, writer = await target.open(kind)
    load = {"sessionId": target.stream, "cwd": "/", "mcpServers": []}
    t = time.perf_counter()
    writer.write(frame(2, "session/load", load))
    await writer.drain()
    snapshot = False
    while True:
        f = json.loads(await reader.readline())
        if f.get("method") == "_agent_channel/turn_state":
            snapshot = True
        elif snapshot and _live(f) is not None:
            took = time.perf_counter() - t
            break
    writer.close()
    return took


async def flood_once(target: Target, kind: str, events: int) -> float:
    reader, writer = await target.open(kind)
    load = {"sessionId": target.flood, "cwd": "/", "mcpServers": []}
    t = time.perf_counter()
    writer.write(frame(2, "session/load", load))
    await writer.drain()
    while True:
        update = _live(json.loads(await reader.readline()))
        if update is not None and END in (update.get("content") or {}).get("text", ""):
            took = time.perf_counter() - t
            break
    writer.close()
    await _left(target)  # the next flood starts only for the next client
    return events / took


async def _left(target: Target) -> None:
    """Poll the listing until the flood execution has no client left."""
    reader, writer = await target.open("unix")
    try:
        for i in range(3, 100000):
            writer.write(frame(i, "_agent_channel/list", {}))
            await writer.drain()
            while "result" not in (f := json.loads(await reader.readline())):
                pass
            flood = next(e for e in f["result"]["executions"] if e["id"] == target.flood)
            if flood["clients"] == 0:
                return
            await asyncio.sleep(0.001)
    finally:
        writer.close()


async def main(args: argparse.Namespace) -> dict[str, Any]:
    proc, line = await start_server(__file__, str(args.events))
    assert proc.stdin is not None
    target = Target(line)
    kinds = ("unix", "ws")
    binds: dict[str, list[float]] = {k: [] for k in kinds}
    rates: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(args.attaches):
        for k in kinds:
            binds[k].append(await bind_once(target, k))
    for _ in range(args.reps):
        for k in kinds:
            rates[k].append(await flood_once(target, k, args.events))
    proc.stdin.close()
    await proc.wait()
    result: dict[str, Any] = {"attaches": args.attaches, "events": args.events, "reps": args.reps}
    for k in kinds:
        result[k] = {
            "bind_ms_p50": round(1000 * pct(binds[k], 0.5), 3),
            "bind_ms_p99": round(1000 * pct(binds[k], 0.99), 3),
            "updates_per_s": round(pct(rates[k], 0.5)),
        }
    result["ratio_ws_to_unix"] = {
        "bind_p50": round(result["ws"]["bind_ms_p50"] / result["unix"]["bind_ms_p50"], 2),
        "bind_p99": round(result["ws"]["bind_ms_p99"] / result["unix"]["bind_ms_p99"], 2),
        "throughput": round(result["ws"]["updates_per_s"] / result["unix"]["updates_per_s"], 2),
    }
    return result


def report(r: dict[str, Any]) -> None:
    for k in ("unix", "ws"):
        row = r[k]
        print(
            f"{k:>4}: bind to first event p50 {row['bind_ms_p50']} ms, p99 {row['bind_ms_p99']} ms;"
            f" {row['updates_per_s']} updates/s"
        )
    q = r["ratio_ws_to_unix"]
    print(
        f"ws / unix: bind p50 {q['bind_p50']}x, bind p99 {q['bind_p99']}x, "
        f"throughput {q['throughput']}x"
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        asyncio.run(serve(int(sys.argv[2])))
        os._exit(0)
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--attaches", type=int, default=200)
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--reps", type=int, default=5)
    result = asyncio.run(main(parser.parse_args()))
    report(result)
    print(json.dumps(result, indent=2))
