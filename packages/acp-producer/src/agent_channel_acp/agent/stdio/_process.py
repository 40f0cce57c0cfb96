"""Serving stdio mode over the process's own stdin/stdout (see ``wire/_stdio.py``)."""

from __future__ import annotations

import asyncio

from ..._sigint import deliver_sigint
from ...wire._stdio import stdio_streams
from ._server import AcpServer, serve


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
    deliver_sigint(loop)
    try:
        loop.run_until_complete(serve_stdio(server))
    except KeyboardInterrupt:
        return 130
    return 0
