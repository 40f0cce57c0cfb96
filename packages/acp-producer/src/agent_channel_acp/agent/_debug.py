"""Opt-in diagnostics for leak checks from outside the process.

With ``AGENT_CHANNEL_ACP_DEBUG=1`` in the environment, both servers (stdio and
attach) answer the extension request ``_agent_channel/debug`` with their live
counts: asyncio tasks, threads, and what the server holds (sessions, or
connections, executions and bindings). A test counts before and after a load
and compares; file descriptors it counts itself in ``/proc/<pid>/fd``. Off by
default: the method is then unknown (-32601) like any other, so nothing about
the process is shown to a client that was not asked for.
"""

from __future__ import annotations

import asyncio
import os
import threading

DEBUG_ENV = "AGENT_CHANNEL_ACP_DEBUG"
METHOD = "agent_channel/debug"
"""The extension method's name as the SDK hands it over (the wire name has a leading ``_``)."""


def asked(method: str) -> bool:
    """Whether ``method`` is the debug request and the environment enables it."""
    return method == METHOD and os.environ.get(DEBUG_ENV) == "1"


def counts(**held: int) -> dict[str, int]:
    """The process's live tasks and threads, plus what the caller holds."""
    return {"tasks": len(asyncio.all_tasks()), "threads": threading.active_count(), **held}
