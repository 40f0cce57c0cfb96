"""A process running the demo's interactive react agent on a store, for a parent that kills
it with SIGKILL and starts it again (test_durable_hammer).

``durable_child.py STORE post N``: a thread posts ``msg N``, ``msg N+1`` ... at random
moments and prints ``ack K`` once the post of ``msg K`` returned; it runs until killed.
``durable_child.py STORE settle 0``: posts ``msg END`` only; once it is answered (every
message queued before it is, then) it exits 0.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time

import anyio
from agent_channel import (
    AgentRef,
    ChannelClosed,
    ChannelFull,
    ChatMessageAssistant,
    UserMessage,
    open_channel,
)
from agent_channel_react import AgentState
from agent_channel_react.demo import demo_agent
from agent_channel_sqlite import open_store

EID = "exec-1"  # tests/durable.py's


def poster(ref: AgentRef, start: int) -> None:
    n = start
    rng = random.Random()
    while True:
        try:
            ref.post(UserMessage(f"msg {n}"))
        except (ChannelClosed, ChannelFull):
            return
        print(f"ack {n}", flush=True)
        n += 1
        time.sleep(rng.uniform(0, 0.01))


async def main(path: str, mode: str, start: int) -> None:
    store = open_store(path)
    async with open_channel(journal=store.journal(EID)) as ch, anyio.create_task_group() as tg:
        ref = ch.ref()
        ref.mark_live()
        if mode == "post":
            threading.Thread(target=poster, args=(ref, start), daemon=True).start()
        else:
            tg.start_soon(settle, ref)
        await demo_agent()(AgentState())


async def settle(ref: AgentRef) -> None:
    """Post a last message; once it is answered (and so checkpointed), exit."""
    ref.post(UserMessage("msg END"))
    while True:
        await anyio.sleep(0.02)
        messages = ref.messages()
        last = messages[-1]
        if (
            isinstance(last, ChatMessageAssistant)
            and not last.tool_calls
            and any("msg END" in m.text for m in messages if m.role == "user")
        ):
            os._exit(0)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))
