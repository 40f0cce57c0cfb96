"""A program whose execution runs on another thread under trio, served with
``agent_channel_acp.attachable``, and whose model asks the operator at once (Q4 across
threads): ``python question_program.py SOCKET TASK [--approve]`` prints ``{"socket", "id"}``
once served and serves until its stdin closes."""

from __future__ import annotations

import asyncio
import json
import queue
import sys
import threading
from pathlib import Path

import trio
from agent_channel import AgentRef, UserMessage, agent_channel, open_channel
from agent_channel_acp import attachable
from question_agents import asking_agent


def _thread(task: str, refs: queue.Queue[AgentRef], added: threading.Event) -> None:
    async def main() -> None:
        async with open_channel() as ch:
            refs.put(ch.ref())
            await trio.to_thread.run_sync(added.wait)
            agent_channel().post(UserMessage(task, source="task"))
            await asking_agent(None)()

    trio.run(main)


async def main() -> None:
    socket, task = Path(sys.argv[1]), sys.argv[2]
    async with attachable(socket_path=socket, approve="--approve" in sys.argv) as served:
        refs: queue.Queue[AgentRef] = queue.Queue()
        added = threading.Event()
        threading.Thread(target=_thread, args=(task, refs, added), daemon=True).start()
        execution_id = served.add(await asyncio.to_thread(refs.get), title="there")
        added.set()
        sys.stdout.write(json.dumps({"socket": served.where, "id": execution_id}) + "\n")
        sys.stdout.flush()
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)


if __name__ == "__main__":
    asyncio.run(main())
