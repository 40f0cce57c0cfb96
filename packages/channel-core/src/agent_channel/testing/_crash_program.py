"""A durable execution in a process of its own, for :func:`run_crash_check` to kill.

    python -m agent_channel.testing._crash_program SPEC BACKEND FIRST

Opens the store ``SPEC`` names (:func:`agent_channel.open_store`). A thread posts operator
messages numbered from FIRST at random moments and prints ``ack N`` once ``post`` returned;
the consumer folds what it drains into its conversation and checkpoints, forever.
Restarted on the same store, it goes on from the restored conversation, as a consumer would.
"""

from __future__ import annotations

import random
import sys
import threading
import time

import anyio

from .. import ChannelClosed, Conversation, UserMessage, fold, open_channel, open_store

EXECUTION = "e1"
"""The one execution the program runs."""


def main(spec: str, backend: str, first: int) -> None:
    store = open_store(spec)
    journal = store.journal(EXECUTION, {"program": "crash_program"})

    async def run() -> None:
        async with open_channel(journal=journal) as ch:
            ref = ch.ref()
            restored = ch.restored
            conv = Conversation(ch, list(restored.messages) if restored else [])
            print("ready", flush=True)

            def producer() -> None:
                rng = random.Random(first)
                n = first
                while True:
                    try:
                        ref.post(UserMessage(str(n), source="operator"))
                    except ChannelClosed:
                        return
                    print(f"ack {n}", flush=True)
                    n += 1
                    time.sleep(rng.choice((0, 0, 0.0005, 0.002)))

            threading.Thread(target=producer, daemon=True).start()
            turns = 0
            while True:
                folded = fold(await ch.receive())
                conv.extend(folded.messages)
                turns += 1
                ch.checkpoint({"turns": turns})
                await anyio.sleep(random.choice((0, 0, 0.001)))

    anyio.run(run, backend=backend)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
