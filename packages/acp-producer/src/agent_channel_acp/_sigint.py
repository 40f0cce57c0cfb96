"""Ctrl-C for the commands that run an asyncio loop in the foreground.

The kernel hands a process's SIGINT to any one of its threads. Python runs the
handler in the main thread, but only once that thread runs again: one asleep in
the loop's ``select()`` while a worker thread (a log writer, asyncio's child
watcher) took the signal sleeps on, and Ctrl-C is lost until the next timer,
which in an idle agent may never come. A handler added through the loop also
writes the signal to the loop's wake-up pipe, so the loop wakes whichever
thread took it.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Coroutine
from typing import Any, NoReturn, TypeVar

T = TypeVar("T")


def deliver_sigint(loop: asyncio.AbstractEventLoop) -> None:
    """Make Ctrl-C raise ``KeyboardInterrupt`` out of ``loop``, from any thread's signal.

    Only where Python's own handler is in place, as ``asyncio.run`` does: a SIGINT the
    process was started ignoring (a background job of a script) stays ignored.
    """
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return
    with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):  # not main thread
        loop.add_signal_handler(signal.SIGINT, _interrupt)


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, with Ctrl-C delivered (see :func:`deliver_sigint`)."""
    with asyncio.Runner() as runner:
        deliver_sigint(runner.get_loop())
        return runner.run(main)


def _interrupt() -> NoReturn:
    raise KeyboardInterrupt
