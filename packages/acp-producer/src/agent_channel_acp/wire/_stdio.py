"""Serving over the process's own stdin/stdout (pipes, sockets, terminals, files).

stdout is reserved for protocol frames: the real stdout descriptor is
duplicated for the protocol and descriptor 1 is pointed at stderr, so a stray
``print`` in an agent, a tool or a library (even from C) lands in the log
instead of corrupting the stream.

Pipes, sockets and terminals are served by the event loop directly. A
descriptor the loop cannot poll (a regular file, ``/dev/null``) is read by a
thread and written synchronously (a file never makes a writer wait for a peer),
so ``< requests.jsonl > replies.jsonl`` and ``< /dev/null`` work too. Either
way the reader holds at most about twice its 1 MiB limit; longer frames are
the transport's business (see ``_transport.MAX_FRAME``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import sys
import threading
from asyncio.streams import FlowControlMixin
from typing import Any

_LIMIT = 1 << 20
_CHUNK = 1 << 16


def _pollable(fd: int, events: int) -> bool:
    """Whether the event loop can wait on ``fd`` (files and ``/dev/null`` cannot be polled)."""
    with selectors.DefaultSelector() as sel:
        try:
            sel.register(fd, events)
        except (OSError, ValueError):
            return False
    return True


async def stdio_streams() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Protocol streams on stdin and on a private copy of stdout."""
    loop = asyncio.get_running_loop()
    sys.stdout.flush()
    out_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr  # Python-level prints too, unbuffered with the logs
    reader = asyncio.StreamReader(limit=_LIMIT)
    in_fd = sys.stdin.fileno()
    if _pollable(in_fd, selectors.EVENT_READ):
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    else:
        _read_in_thread(loop, in_fd, reader)
    if _pollable(out_fd, selectors.EVENT_WRITE):
        out = os.fdopen(out_fd, "wb", buffering=0)
        transport, protocol = await loop.connect_write_pipe(FlowControlMixin, out)
    else:
        protocol = FlowControlMixin(loop)
        transport = _FileWriteTransport(out_fd)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)  # pyright: ignore[reportArgumentType]
    return reader, writer


def _read_in_thread(loop: asyncio.AbstractEventLoop, fd: int, reader: asyncio.StreamReader) -> None:
    """Feed ``reader`` from a descriptor the loop cannot poll, ending with EOF.

    Bounded like a pipe: the thread hands over one chunk at a time and waits
    while the reader holds more than twice its limit (the reader pauses its
    transport then), so a long file is never read into memory whole.
    """
    go_on = threading.Event()
    go_on.set()
    reader.set_transport(_ThreadReadTransport(go_on))
    fed = threading.Event()

    def feed(chunk: bytes) -> None:
        reader.feed_data(chunk)  # may pause us: go_on cleared
        fed.set()

    def pump() -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody reads any more
            with contextlib.suppress(OSError):  # unreadable: treat it like the end of input
                while go_on.wait() and (chunk := os.read(fd, _CHUNK)):
                    fed.clear()
                    loop.call_soon_threadsafe(feed, chunk)
                    fed.wait()
            loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=pump, name="acp-stdin", daemon=True).start()


class _ThreadReadTransport(asyncio.ReadTransport):
    """What the reader pauses and resumes when stdin is read by a thread."""

    def __init__(self, go_on: threading.Event) -> None:
        super().__init__()
        self._go_on = go_on

    def pause_reading(self) -> None:
        self._go_on.clear()

    def resume_reading(self) -> None:
        self._go_on.set()

    def is_reading(self) -> bool:
        return self._go_on.is_set()


class _FileWriteTransport(asyncio.WriteTransport):
    """Synchronous writes to a descriptor that never blocks for a reader (a file, /dev/null)."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self._closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:  # pyright: ignore[reportIncompatibleMethodOverride]
        if self._closing:
            return
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            os.close(self._fd)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default
