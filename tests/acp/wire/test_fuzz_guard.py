"""The wire fuzzer's own hang guard: an answer the server never sends fails the fuzz run
with what was owed, once, instead of holding the suite (``test_fuzz_stdio_short`` once
waited 17 minutes in ``Wire.settled``).

The server here is a small one of our own on a socket pair that answers every request but
one, so the lost answer is certain; the guard is shortened so the test does not sit out
the real one (it bounds a hang; nothing here measures time).
"""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from fuzz_checker import Wire
from fuzz_frames import Pool
from fuzz_runs import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

LOST = "fz-lost"
GUARD = 0.2
"""The shortened settle guard: long enough for a local socket pair's answers."""


async def _forgetful_server(sock: socket.socket) -> None:
    """Answer every request on ``sock`` except the one with id :data:`LOST`."""
    reader, writer = await asyncio.open_connection(sock=sock)
    while line := await reader.readline():
        frame = json.loads(line)
        if frame.get("id") != LOST:
            writer.write(json.dumps({"jsonrpc": "2.0", "id": frame["id"], "result": {}}).encode())
            writer.write(b"\n")
            await writer.drain()
    writer.close()


def test_a_lost_answer_fails_the_fuzz_run_once_naming_what_was_owed() -> None:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    run = loop.run_until_complete
    ours, theirs = socket.socketpair()
    server = loop.create_task(_forgetful_server(theirs))
    reader, writer = run(asyncio.open_connection(sock=ours))
    wire = Wire(reader, writer, Pool())
    wire.start()
    batches = 0
    try:

        @fuzz_settings(20)
        @given(st.data())
        def example(data: st.DataObject) -> None:
            nonlocal batches
            batches += 1
            size = data.draw(st.integers(1, 5))
            ids = [f"fz-{batches}-{i}" for i in range(size)]
            if batches == 3:
                ids.append(LOST)
            frames = [
                json.dumps({"jsonrpc": "2.0", "id": i, "method": "x/ping", "params": {}}).encode()
                + b"\n"
                for i in ids
            ]
            run(wire.send(frames, []))
            run(wire.settled(guard=GUARD))

        with pytest.raises(AssertionError) as failed:
            example()
        assert LOST in str(failed.value) and "x/ping" in str(failed.value)
        # The wire's debt outlives the example: every replay after the loss fails the same
        # way after the whole guard, so the run stops there (no shrinking) and reports it:
        # the failing batch once more at most.
        assert batches <= 4, f"{batches} batches ran after the loss"
    finally:
        run(wire.stop())
        writer.close()
        server.cancel()
        run(asyncio.gather(server, return_exceptions=True))
        loop.close()
        asyncio.set_event_loop(None)
