"""Starting one top-level execution from an agent's body, for either mode.

Exists so both servers start executions alike: the body's checks (callable, returns an
awaitable), the channel opened around it, the execution made live (an operator surface
is attached: an interactive agent waits for messages instead of ending), and the bound
on what one session may queue for a client that does not read.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

Body = Callable[[], Awaitable[object]]
"""An execution body, as an agent factory returns it."""

BACKLOG_LIMIT = 8 * 1024 * 1024
"""Bytes of updates one session may queue for a client that is not reading (see ``_outbox``)."""


class NotRunnable(TypeError):
    """The factory's body cannot be run; the message says what it was instead."""
