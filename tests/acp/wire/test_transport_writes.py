"""The transport's coalesced writes: what is written within one loop iteration goes out as
one write, in the order written, whoever wrote it (a hub's step, the SDK's answer, an
error of the transport's own); past ``COALESCE`` bytes it is handed over at once, so a
peer that does not read shows as not ready at the same moment it did before.

A real socket pair, the transport on one end, the bytes read on the other.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
from agent_channel_acp.wire._transport import COALESCE, LineTransport
from conftest import GUARD

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def pair(buffer: int | None = None) -> AsyncIterator[tuple[LineTransport, socket.socket]]:
    """The transport over one end of a socket pair; the other end, blocking, to read."""
    ours, theirs = socket.socketpair()
    if buffer is not None:
        for s in (ours, theirs):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer)
    reader, writer = await asyncio.open_connection(sock=ours)
    try:
        yield LineTransport(reader, writer), theirs
    finally:
        writer.close()
        theirs.close()


def read_lines(sock: socket.socket, n: int) -> list[bytes]:
    f = sock.makefile("rb")
    return [f.readline() for _ in range(n)]


async def test_writes_of_one_iteration_reach_the_wire_in_the_order_written() -> None:
    async with pair() as (t, theirs):
        t.write_bytes(b'{"n":1}\n')  # a hub's step
        t.write_frame({"n": 2})
        assert t.ready()  # waiting for this iteration's write is not a backlog
        await t.send({"jsonrpc": "2.0", "method": "x", "params": {"n": 3}})  # the SDK's
        t.write_bytes(b'{"n":4}\n')
        t.write_bytes(b'{"n":5}\n')
        theirs.settimeout(GUARD)
        with anyio.fail_after(GUARD):
            lines = await asyncio.to_thread(read_lines, theirs, 5)
    seen = [json.loads(x).get("n", json.loads(x).get("params", {}).get("n")) for x in lines]
    assert seen == [1, 2, 3, 4, 5]


async def test_a_written_frame_is_on_the_wire_by_the_next_iteration_without_a_drain() -> None:
    async with pair() as (t, theirs):
        t.write_bytes(b'{"n":1}\n')
        t.write_bytes(b'{"n":2}\n')
        theirs.setblocking(False)
        with pytest.raises(BlockingIOError):
            theirs.recv(1)  # not yet: it waits for the rest of this iteration's writes
        got = b""
        with anyio.fail_after(GUARD):
            while got.count(b"\n") < 2:
                await asyncio.sleep(0)  # the next iterations: handed to the kernel there
                try:
                    got += theirs.recv(1 << 16)
                except BlockingIOError:
                    continue
        assert got == b'{"n":1}\n{"n":2}\n'  # one write: both frames


async def test_past_the_coalescing_bound_frames_go_at_once_and_backpressure_shows() -> None:
    async with pair(buffer=4096) as (t, _theirs):  # the peer never reads
        frame = b'{"pad":"' + b"p" * 1000 + b'"}\n'
        written = 0
        while t.ready():  # synchronously: no iteration passes
            t.write_bytes(frame)
            written += len(frame)
            assert written <= COALESCE + 2 * len(frame) + (64 << 10), written
        # not ready within the same iteration: what waited was handed to the transport,
        # which holds what the kernel did not take (a slow client is seen as before)
        assert written >= COALESCE


async def test_close_writes_what_waits() -> None:
    async with pair() as (t, theirs):
        t.write_bytes(b'{"n":1}\n')
        await t.close()
        theirs.settimeout(GUARD)
        with anyio.fail_after(GUARD):
            rest = await asyncio.to_thread(theirs.makefile("rb").read)
        assert rest == b'{"n":1}\n'


async def test_a_frame_over_what_clients_read_is_never_written() -> None:
    """Clients read lines of at most ``MAX_OUT_FRAME`` bytes (our own: 16 MiB, as the fuzzer):
    an answer past it goes out as an error under its id, a notification is left out, and
    the frames after them arrive (a fuzz run saw its reader die of one such line)."""
    from agent_channel_acp.wire._transport import MAX_OUT_FRAME

    huge = "\U0001f600" * (MAX_OUT_FRAME // 8)  # 4 UTF-8 bytes, 12 once JSON-escaped
    async with pair() as (t, theirs):
        t.write_frame({"jsonrpc": "2.0", "id": 7, "result": {"text": huge}})
        t.write_frame({"jsonrpc": "2.0", "method": "session/update", "params": {"t": huge}})
        t.write_bytes(
            b'{"jsonrpc":"2.0","method":"session/update","params":{"t":"'
            + b"x" * MAX_OUT_FRAME
            + b'"}}\n{"n":1}\n'
        )
        t.write_frame({"n": 2})
        theirs.settimeout(GUARD)
        reading = asyncio.ensure_future(asyncio.to_thread(read_lines, theirs, 3))
        with anyio.fail_after(GUARD):
            await t.drain()  # the reader takes what is written meanwhile
            lines = await reading
    assert all(len(line) <= MAX_OUT_FRAME for line in lines)
    error, one, two = (json.loads(line) for line in lines)
    assert error["id"] == 7 and "frame limit" in error["error"]["data"]["reason"]
    assert (one, two) == ({"n": 1}, {"n": 2})
