"""A program that starts agents itself and serves them with ``agent_channel_acp.attachable``.

``python library_program.py SOCKET [--approve]`` serves four executions, each started a
different way, and prints one JSON line ``{"socket", "record", "ids": {title: id}}`` once
they are all served:

- ``run``: ``served.run(body)``, the server opens its channel (``gate=g_run start``);
- ``here``: the program's own channel on this loop, ``served.add(ref)``; a task that ends
  by itself with nobody attached (operators are optional);
- ``there``: an execution on another thread, under trio, ``served.add(ref)`` from here
  before it starts; live and interactive (``gate=g_there start``, then it waits for
  operators);
- ``late``: the program's own on this loop, added only once its first tool call runs
  (``gate=g_late start``): a client still gets that call's card.

Serves until its stdin closes, then leaves the block and exits.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import sys
import threading
from pathlib import Path
from typing import Any

import trio
from agent_channel import AgentRef, UserMessage, agent_channel, open_channel
from agent_channel_acp import attachable
from agents import attach_agent, task_agent


def _with_input(text: str) -> Any:
    inner = attach_agent(None)

    async def body() -> object:
        agent_channel().post(UserMessage(text, source="task"))
        return await inner()

    return body


def _thread(refs: queue.Queue[AgentRef], added: threading.Event) -> None:
    """Another thread, another event loop (trio): the program's own execution there."""

    async def main() -> None:
        async with open_channel() as ch:
            ref = ch.ref()
            ref.mark_live()  # operators may message it: it waits for them between turns
            refs.put(ref)
            await trio.to_thread.run_sync(added.wait)  # this loop stays free meanwhile
            await _with_input("gate=g_there start")()

    trio.run(main)


async def _own(
    body: Any, refs: asyncio.Queue[AgentRef], go: asyncio.Event | None, live: bool
) -> None:
    """One of the program's own executions on this loop: its ref goes to ``refs``; it
    starts when ``go`` is set (None: at once)."""
    async with open_channel() as ch:
        ref = ch.ref()
        if live:
            ref.mark_live()
        running = asyncio.Event()
        ref.subscribe(lambda e: running.set() if e.type == "tool_call_started" else None)
        if go is None:  # handed over once its first tool call runs
            task = asyncio.ensure_future(body())
            await running.wait()
            await refs.put(ref)
            await task
            return
        await refs.put(ref)
        await go.wait()
        await body()


async def main() -> None:
    socket = Path(sys.argv[1])
    approve = "--approve" in sys.argv
    async with attachable(socket_path=socket, approve=approve) as served:
        ids: dict[str, str] = {}
        runs: list[asyncio.Future[Any]] = [
            asyncio.ensure_future(served.run(_with_input("gate=g_run start"), title="run"))
        ]
        while not served.executions():  # noqa: ASYNC110 (run adds it at its first step)
            await asyncio.sleep(0)
        ids["run"] = served.executions()[0]["id"]

        refs: asyncio.Queue[AgentRef] = asyncio.Queue()
        go = asyncio.Event()
        runs.append(asyncio.ensure_future(_own(task_agent(None), refs, go, live=False)))
        ids["here"] = served.add(await refs.get(), title="here")
        go.set()

        thread_refs: queue.Queue[AgentRef] = queue.Queue()
        added = threading.Event()
        threading.Thread(target=_thread, args=(thread_refs, added), daemon=True).start()
        ids["there"] = served.add(await asyncio.to_thread(thread_refs.get), title="there")
        added.set()

        late = _with_input("gate=g_late start")
        runs.append(asyncio.ensure_future(_own(late, refs, None, live=True)))
        ids["late"] = served.add(await refs.get(), title="late")

        line = {"socket": served.where, "record": str(served.record), "ids": ids}
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)
        for task in runs:
            task.cancel()
        await asyncio.gather(*runs, return_exceptions=True)


if __name__ == "__main__":
    asyncio.run(main())
    sys.stdout.flush()
    os._exit(0)  # the trio thread's execution is the program's; it is not waited for
