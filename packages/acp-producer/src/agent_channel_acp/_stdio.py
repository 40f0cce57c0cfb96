"""Serving over the process's own stdin/stdout (POSIX pipes).

stdout is reserved for protocol frames: the real stdout descriptor is
duplicated for the protocol and descriptor 1 is pointed at stderr, so a stray
``print`` in an agent, a tool or a library (even from C) lands in the log
instead of corrupting the stream.
"""

from __future__ import annotations

import asyncio
import os
import sys
from asyncio.streams import FlowControlMixin

from ._server import AcpServer, serve

_LIMIT = 1 << 20


async def stdio_streams() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Protocol streams on stdin and on a private copy of stdout."""
    loop = asyncio.get_running_loop()
    sys.stdout.flush()
    out_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr  # Python-level prints too, unbuffered with the logs
    reader = asyncio.StreamReader(limit=_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out = os.fdopen(out_fd, "wb", buffering=0)
    transport, protocol = await loop.connect_write_pipe(FlowControlMixin, out)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return reader, writer


async def serve_stdio(server: AcpServer) -> None:
    """Serve ``server`` on stdio until stdin reaches EOF."""
    reader, writer = await stdio_streams()
    await serve(server, reader, writer)


def run_stdio(server: AcpServer) -> int:
    """Run the stdio server to completion; the exit status.

    The loop is not closed on purpose: closing it joins executor threads, and a
    tool stuck in a thread must not keep the process alive after EOF.
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(serve_stdio(server))
    except KeyboardInterrupt:
        return 130
    return 0
