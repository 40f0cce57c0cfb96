"""``attachable().run(agent)`` with a plain Agents SDK agent (its own process: the SDK's
package name, ``agents``, is this suite's module's in the test process). Prints ``READY
<execution id>`` once served; serves until its stdin closes."""

from __future__ import annotations

import sys

import anyio
import oai_agents
from agent_channel_acp import attachable


async def main() -> None:
    async with attachable() as served, anyio.create_task_group() as tg:
        tg.start_soon(lambda: served.run(oai_agents.agent, title="oai"))
        while not served.executions():  # noqa: ASYNC110 (the run adds it)
            await anyio.sleep(0.01)
        (sid,) = [e["id"] for e in served.executions()]
        print(f"READY {sid}", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.read)
        tg.cancel_scope.cancel()


anyio.run(main)
