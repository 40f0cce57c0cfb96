"""Starting one top-level execution from an agent's body, for either mode.

Exists so both servers start executions alike: the body's checks (callable, returns an
awaitable), the channel opened around it, the execution made live (an operator surface
is attached: an interactive agent waits for messages instead of ending), and the bound
on what one session may queue for a client that does not read.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable

from agent_channel import AgentChannel, Journal, open_channel

Body = Callable[[], Awaitable[object]]
"""An execution body, as an agent factory returns it."""

BACKLOG_LIMIT = 8 * 1024 * 1024
"""Bytes of updates one session may queue for a client that is not reading (see ``_outbox``)."""


class NotRunnable(TypeError):
    """The factory's body cannot be run; the message says what it was instead."""


async def run(
    body: Body,
    started: Callable[[AgentChannel, asyncio.Future[object]], object],
    journal: Journal | None = None,
) -> None:
    """Run ``body`` as one live top-level execution, until it ends.

    A channel is opened around it and marked live; once the body's awaitable runs as a
    task, ``started(channel, task)`` is called (a hub watches the channel from there: it
    sees every event of the execution; cancelling the task ends the execution). Raises
    :class:`NotRunnable` when ``body`` is not callable, calling it raises, or it returns no
    awaitable; the execution's own failure or cancellation propagates. With a ``journal``
    the execution is durable (a store's; see ``docs/durability.md``), restored when the
    journal says so.
    """
    if not callable(body):
        raise NotRunnable(f"{body!r} is not callable")
    async with open_channel(journal=journal) as ch:
        release = ch.ref().mark_live()
        try:
            try:
                awaitable = body()
            except Exception as e:
                raise NotRunnable(f"calling the body raised {e!r}") from e
            if not inspect.isawaitable(awaitable):
                raise NotRunnable(f"calling the body returned {awaitable!r}, not an awaitable")
            task = asyncio.ensure_future(awaitable)
            try:
                started(ch, task)
            except BaseException:
                task.cancel()
                raise
            await task
        finally:
            release()
