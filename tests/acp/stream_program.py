"""An attach server (``attachable()``) whose one execution streams numbered messages fast.

``python stream_program.py SOCKET COUNT`` serves one execution that appends ``COUNT`` user
messages ``m0``, ``m1``, ... (a few per loop step, so binds land between and within steps),
then waits. Prints ``READY <socket> <execution id>``; serves until stdin closes.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from agent_channel import ChatMessageUser, MessageAppended, agent_channel
from agent_channel_acp import attachable

PER_STEP = 7


async def main() -> None:
    socket, count = Path(sys.argv[1]), int(sys.argv[2])
    go = asyncio.Event()

    async def body() -> None:
        ch = agent_channel()
        await go.wait()
        for i in range(count):
            ch.publish(MessageAppended(message=ChatMessageUser(content=f"m{i}"), index=i))
            if i % PER_STEP == PER_STEP - 1:
                await asyncio.sleep(0)
        await asyncio.Event().wait()

    async with attachable(socket_path=socket) as served:
        run = asyncio.ensure_future(served.run(body, title="stream"))
        while not served.executions():  # noqa: ASYNC110 (run adds it at its first step)
            await asyncio.sleep(0)
        sys.stdout.write(f"READY {served.where} {served.executions()[0]['id']}\n")
        sys.stdout.flush()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.buffer.readline)  # "go"
        go.set()
        await loop.run_in_executor(None, sys.stdin.buffer.read)
        run.cancel()


if __name__ == "__main__":
    asyncio.run(main())
    os._exit(0)
