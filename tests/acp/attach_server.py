"""A stand-in for ``agent-channel-acp serve`` in the attach suite: an AttachServer on a unix
socket, running ``--count`` executions of an agent factory, each started on ``--input``;
with ``--ws`` also over WebSocket (the same listener path as ``serve --ws``).

Prints ``READY <socket path> <execution id>...`` on stdout once it listens (after
``WS <url> <token>`` with ``--ws``); serves until
its stdin closes, then ends every execution and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from agent_channel import UserMessage, agent_channel
from agent_channel_acp.agent.attach._server import AttachServer
from agent_channel_acp.cli._main import load_factory


def _body(factory: Any, text: str | None) -> Any:
    inner = factory(None)

    async def body() -> object:
        if text:
            agent_channel().post(UserMessage(text, source="task"))
        return await inner()

    return body


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agent", default="agents:attach_agent")
    parser.add_argument("--input", action="append", default=[])
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--replay", type=int, default=100)
    parser.add_argument("--approve", action="store_true")
    parser.add_argument("--backlog-limit", type=int, default=None)
    parser.add_argument("--title", default="agent")
    parser.add_argument("--ws", action="store_true", help="also over WebSocket (WS url token)")
    args = parser.parse_args()
    options: dict[str, Any] = {"replay": args.replay, "approve": args.approve}
    if args.backlog_limit:
        options["backlog_limit"] = args.backlog_limit
    server = AttachServer(**options)
    factory = load_factory(args.agent)
    runs: list[asyncio.Task[str]] = []
    for i in range(args.count):
        text = args.input[i] if i < len(args.input) else (args.input[-1] if args.input else None)
        title = args.title if args.count == 1 else f"{args.title} {i + 1}"
        runs.append(asyncio.ensure_future(server.run(_body(factory, text), title=title)))
    while len(server.executions()) < args.count:  # noqa: ASYNC110 (each run adds its own)
        await asyncio.sleep(0)
    path = Path(tempfile.mkdtemp(prefix="acp-attach-")) / "sock"
    listener = await asyncio.start_unix_server(server.serve_connection, path, limit=1 << 24)
    endpoint = None
    if args.ws:
        from agent_channel_acp.hosting._asgi import WsEndpoint, WsOptions

        endpoint = WsEndpoint(server.serve_connection, WsOptions(0))
        await endpoint.start()
        sys.stdout.write(f"WS {endpoint.transport['url']} {endpoint.transport['token']}\n")
    ids = " ".join(e["id"] for e in server.executions())
    sys.stdout.write(f"READY {path} {ids}\n")
    sys.stdout.flush()
    loop = asyncio.get_running_loop()
    stdin_closed = loop.run_in_executor(None, sys.stdin.buffer.read)
    await stdin_closed
    listener.close()
    if endpoint is not None:
        endpoint.stop_accepting()
    await server.aclose()
    if endpoint is not None:
        await endpoint.close()
    for t in runs:
        t.cancel()
    await asyncio.gather(*runs, return_exceptions=True)


if __name__ == "__main__":
    logging.basicConfig(level=os.environ.get("AGENT_CHANNEL_ACP_LOG", "WARNING"), stream=sys.stderr)
    asyncio.run(main())
    os._exit(0)
