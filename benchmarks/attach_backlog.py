"""Attach mode: one client stops reading for 10 s while 49 others read.

    uv run python benchmarks/attach_backlog.py [--clients 50] [--stall 10] [--rate 1500]

A server (this file with ``--serve``) runs one execution that streams text at ``--rate``
KB/s (pieces of 2 KB) to ``--clients`` bound clients (raw JSON-RPC over its unix socket).
After a warm-up, client 0 stops reading for ``--stall`` seconds, then reads again. Measured:

- **the stated bound** on what the stalled client can cost the server:
  ``backlog_limit`` (queued updates, 8 MiB) + the replay ring (2 MiB, sent at bind) + one
  loop step's output (written before the stall was visible) + the kernel's socket buffers
  (the server's send buffer and the client's receive buffer, read from the sockets);
- **the server's memory** (``VmRSS``, sampled every 100 ms): its rise over the warm-up
  level, peak, against the bound;
- **the pace of the other clients**: bytes a second each received during the stall, as a
  ratio to the same clients before it (target: about 1.0), and the slowest of them;
- **the drop**: when the stalled client reads again, it finds the text it missed cut off
  and ``_agent_channel/dropped`` with the reason, and the server has let it go (its
  ``clients`` count in ``_agent_channel/list``).

Prints readable lines, then one JSON object. Not run in CI. On a busy machine the
readers compete with the server for the cores: compare the ratios, not the rates.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _attach import frame, start_server

PIECE = 2048


# -- the server side (run with --serve) ----------------------------------------------


async def serve(rate_kb: int) -> None:
    from agent_channel import ModelDelta, agent_channel, new_id
    from agent_channel_acp import AttachServer  # the public name: a --baseline-src of any layout

    server = AttachServer()

    async def body() -> None:
        ch = agent_channel()
        text = "w" * (PIECE - 1) + " "
        pause = PIECE / (rate_kb * 1024)
        message_id = new_id()
        start = time.perf_counter()
        sent = 0
        while True:
            ch.publish(ModelDelta(call_id="c", message_id=message_id, kind="text", text=text))
            sent += 1
            if sent % 512 == 0:
                message_id = new_id()  # a new message now and then (a new ring slot)
            ahead = sent * pause - (time.perf_counter() - start)
            await asyncio.sleep(max(0.0, ahead))

    run = asyncio.ensure_future(server.run(body, title="stream"))
    while not server.executions():  # noqa: ASYNC110
        await asyncio.sleep(0)
    path = Path(tempfile.mkdtemp(prefix="acp-bench-")) / "sock"
    listener = await asyncio.start_unix_server(server.serve_connection, path, limit=1 << 24)
    print(f"READY {path} {server.executions()[0]['id']}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)
    listener.close()
    await server.aclose()
    run.cancel()


# -- the client side -------------------------------------------------------------------


class Reader:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.received = 0
        self.paused = asyncio.Event()
        self.paused.set()  # set: reading
        self.tail = b""

    async def run(self) -> None:
        while True:
            await self.paused.wait()
            data = await self.reader.read(1 << 16)
            if not data:
                return
            self.received += len(data)
            self.tail = (self.tail + data)[-(1 << 20) :]


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def main(args: argparse.Namespace) -> dict[str, Any]:
    # stderr discarded: the drop's warning line, teardown noise
    proc, line = await start_server(__file__, str(args.rate), quiet=True)
    assert proc.stdin is not None
    path, execution = line[1], line[2]
    clients: list[Reader] = []
    for _ in range(args.clients):
        r, w = await asyncio.open_unix_connection(path, limit=1 << 24)
        w.write(frame(1, "initialize", {"protocolVersion": 1}))
        load = {"sessionId": execution, "cwd": "/", "mcpServers": []}
        w.write(frame(2, "session/load", load))
        await w.drain()
        clients.append(Reader(r, w))
    tasks = [asyncio.ensure_future(c.run()) for c in clients]
    stalled, others = clients[0], clients[1:]
    sock = stalled.writer.get_extra_info("socket")
    kernel = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    kernel += sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)  # about the server's too
    samples: list[tuple[float, int]] = []

    async def sample() -> None:
        while True:
            samples.append((time.perf_counter(), rss_kb(proc.pid)))
            await asyncio.sleep(0.1)

    sampler = asyncio.ensure_future(sample())
    await asyncio.sleep(args.warmup)
    before = [c.received for c in others]
    t0 = time.perf_counter()
    await asyncio.sleep(args.stall / 4)  # the pace before: a quarter of the stall's length
    t1 = time.perf_counter()
    pace_before = [(c.received - b) / (t1 - t0) for c, b in zip(others, before, strict=True)]
    base_rss = statistics.median(kb for _, kb in samples[-5:])
    stalled.paused.clear()
    stalled.writer.transport.pause_reading()  # nothing more leaves the kernel's buffers
    start = [c.received for c in others]
    t2 = time.perf_counter()
    await asyncio.sleep(args.stall)
    t3 = time.perf_counter()
    pace_during = [(c.received - s) / (t3 - t2) for c, s in zip(others, start, strict=True)]
    peak_rss = max(kb for t, kb in samples if t >= t2)
    stalled.writer.transport.resume_reading()
    stalled.paused.set()
    writer = stalled.writer
    writer.write(frame(3, "_agent_channel/list", {}))
    await writer.drain()
    deadline = time.perf_counter() + 30
    while b"_agent_channel/dropped" not in stalled.tail and time.perf_counter() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    dropped = b"_agent_channel/dropped" in stalled.tail
    reason = ""
    for raw in stalled.tail.split(b"\n"):
        if b"_agent_channel/dropped" in raw:
            reason = json.loads(raw)["params"]["reason"]
    probe_r, probe_w = await asyncio.open_unix_connection(path, limit=1 << 24)
    probe_w.write(frame(1, "initialize", {"protocolVersion": 1}))
    probe_w.write(frame(2, "_agent_channel/list", {}))
    await probe_w.drain()
    await probe_r.readline()
    listed = json.loads(await probe_r.readline())["result"]["executions"][0]
    sampler.cancel()
    for c in clients:
        c.writer.close()
    probe_w.close()
    for t in tasks:
        t.cancel()
    proc.stdin.close()
    await proc.wait()
    bound = {
        "backlog_limit_kb": 8 * 1024,
        "replay_ring_kb": 2 * 1024,
        "kernel_buffers_kb": kernel // 1024,
        "one_step_kb": PIECE // 1024,
    }
    ratios = [d / b for d, b in zip(pace_during, pace_before, strict=True) if b > 0]
    return {
        "clients": args.clients,
        "rate_kb_s": args.rate,
        "stall_s": args.stall,
        "bound_kb": {**bound, "total": sum(bound.values())},
        "server_rss_kb": {"before": int(base_rss), "peak_during_stall": peak_rss},
        "server_rss_rise_kb": int(peak_rss - base_rss),
        "others_pace": {
            "before_kb_s_median": round(statistics.median(pace_before) / 1024, 1),
            "during_kb_s_median": round(statistics.median(pace_during) / 1024, 1),
            "ratio_median": round(statistics.median(ratios), 3),
            "ratio_slowest": round(min(ratios), 3),
        },
        "stalled_client": {
            "dropped": dropped,
            "reason": reason,
            "clients_bound_after": listed["clients"],
        },
    }


def report(r: dict[str, Any]) -> None:
    b = r["bound_kb"]
    print(
        f"{r['clients']} clients, {r['rate_kb_s']} KB/s of text each;"
        f" one stops reading for {r['stall_s']} s"
    )
    print(
        f"  stated bound for the stalled client: {b['total']} KB = backlog {b['backlog_limit_kb']}"
        f" + ring {b['replay_ring_kb']} + kernel buffers {b['kernel_buffers_kb']}"
        f" + one loop step {b['one_step_kb']}"
    )
    print(
        f"  server RSS: {r['server_rss_kb']['before']} KB before, peak"
        f" {r['server_rss_kb']['peak_during_stall']} KB during (rise {r['server_rss_rise_kb']} KB)"
    )
    p = r["others_pace"]
    print(
        f"  the other {r['clients'] - 1}: {p['before_kb_s_median']} KB/s before,"
        f" {p['during_kb_s_median']} KB/s during; ratio median {p['ratio_median']},"
        f" slowest {p['ratio_slowest']}"
    )
    s = r["stalled_client"]
    print(
        f"  the stalled client: dropped={s['dropped']} ({s['reason']!r});"
        f" clients bound after: {s['clients_bound_after']}"
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        asyncio.run(serve(int(sys.argv[2])))
        os._exit(0)
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--stall", type=float, default=10.0)
    parser.add_argument("--rate", type=int, default=1500, help="KB/s of streamed text")
    parser.add_argument("--warmup", type=float, default=2.0)
    result = asyncio.run(main(parser.parse_args()))
    report(result)
    print(json.dumps(result, indent=2))
