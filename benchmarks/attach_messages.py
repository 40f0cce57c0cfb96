"""Attach mode: ``messages --tail 20`` on a 10,000-message conversation (A19).

    uv run python benchmarks/attach_messages.py [--messages 10000] [--requests 200] [--verbs 5]

A server (this file with ``--serve``, through the library's ``attachable()``) serves one
execution whose shared conversation holds ``--messages`` messages. Measured side by side:

- **request**: ``_agent_channel/messages {tail: 20}`` round trips on one connection (raw
  JSON-RPC, so the client costs as little as it can), against ``_agent_channel/list`` on
  the same connection as the baseline round trip; p50 / p99 (target: <= 50 ms).
- **verb**: ``agent-channel-acp messages ID --tail 20`` as a fresh process, as a shell
  runs it, against ``python -c "import acp"`` and ``python -c "pass"``: a verb is a new
  interpreter that imports the ACP SDK, which is most of its time.

Prints readable lines, then one JSON object. Not run in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# -- the server side (run with --serve) ----------------------------------------------


async def serve(count: int, socket: Path) -> None:
    from agent_channel import ChatMessage, ChatMessageAssistant, ChatMessageUser, open_channel
    from agent_channel_acp import attachable

    messages: list[ChatMessage] = []
    for i in range(count):
        text = f"message {i}: " + "some words of a conversation " * 4
        kind = ChatMessageUser if i % 2 else ChatMessageAssistant
        messages.append(kind(content=text))
    async with attachable(socket_path=socket) as served, open_channel() as ch:
        ch.share(messages)
        execution = served.add(ch.ref(), title="long conversation")
        print(f"READY {served.where} {execution}", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)


# -- the client side -------------------------------------------------------------------


def frame(msg_id: int, method: str, params: dict[str, Any]) -> bytes:
    data = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
    return json.dumps(data).encode() + b"\n"


async def round_trips(path: str, execution: str, n: int) -> dict[str, list[float]]:
    reader, writer = await asyncio.open_unix_connection(path, limit=1 << 24)
    writer.write(frame(0, "initialize", {"protocolVersion": 1}))
    await reader.readline()
    times: dict[str, list[float]] = {"messages": [], "list": []}
    requests = {
        "messages": ("_agent_channel/messages", {"sessionId": execution, "tail": 20}),
        "list": ("_agent_channel/list", {}),
    }
    for i in range(1, n + 1):
        for name, (method, params) in requests.items():  # alternate: noise hits both
            t = time.perf_counter()
            writer.write(frame(i, method, params))
            reply = json.loads(await reader.readline())
            times[name].append(time.perf_counter() - t)
            if name == "messages":
                assert len(reply["result"]["messages"]) == 20, reply
    writer.close()
    return times


def wall(argv: list[str], env: dict[str, str], n: int) -> list[float]:
    out: list[float] = []
    for _ in range(n):
        t = time.perf_counter()
        run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        out.append(time.perf_counter() - t)
        assert run.returncode == 0, run.stderr
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(value: float) -> float:
    return round(1000 * value, 2)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    rt = Path(tempfile.mkdtemp(prefix="acp-bench-rt-"))  # 0700 already
    env = {**os.environ, "AGENT_CHANNEL_RUNTIME_DIR": str(rt), "AGENT_CHANNEL_ACP_LOG": "ERROR"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--serve",
        str(args.messages),
        str(rt / "bench.sock"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None and proc.stdin is not None
    line = (await proc.stdout.readline()).decode().split()
    assert line[0] == "READY", line
    path, execution = line[1], line[2]
    times = await round_trips(path, execution, args.requests)
    verb = [sys.executable, "-m", "agent_channel_acp", "messages", execution, "--tail", "20"]
    verbs = wall(verb, env, args.verbs)
    imports = wall([sys.executable, "-c", "import acp"], env, args.verbs)
    bare = wall([sys.executable, "-c", "pass"], env, args.verbs)
    proc.stdin.close()
    await proc.wait()
    m, lst = times["messages"], times["list"]
    return {
        "messages": args.messages,
        "request": {
            "messages_tail20_ms_p50": ms(pct(m, 0.5)),
            "messages_tail20_ms_p99": ms(pct(m, 0.99)),
            "list_ms_p50": ms(pct(lst, 0.5)),
            "ratio_p50_to_list": round(pct(m, 0.5) / pct(lst, 0.5), 2),
        },
        "verb": {
            "messages_verb_ms_median": ms(statistics.median(verbs)),
            "python_import_acp_ms_median": ms(statistics.median(imports)),
            "python_bare_ms_median": ms(statistics.median(bare)),
            "verb_minus_import_acp_ms": ms(statistics.median(verbs) - statistics.median(imports)),
        },
    }


def report(result: dict[str, Any]) -> None:
    r, v = result["request"], result["verb"]
    print(f"messages --tail 20 on a {result['messages']}-message conversation")
    print(
        f"  the request:  p50 {r['messages_tail20_ms_p50']} ms,"
        f" p99 {r['messages_tail20_ms_p99']} ms"
        f"  (a list round trip: p50 {r['list_ms_p50']} ms; ratio {r['ratio_p50_to_list']})"
    )
    print(
        f"  the verb:     {v['messages_verb_ms_median']} ms a run (a fresh interpreter);"
        f" `import acp` alone {v['python_import_acp_ms_median']} ms,"
        f" `python -c pass` {v['python_bare_ms_median']} ms"
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        asyncio.run(serve(int(sys.argv[2]), Path(sys.argv[3])))
        os._exit(0)
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--verbs", type=int, default=5)
    result = asyncio.run(main(parser.parse_args()))
    report(result)
    print(json.dumps(result, indent=2))
