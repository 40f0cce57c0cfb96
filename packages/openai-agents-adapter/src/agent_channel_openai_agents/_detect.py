"""The entry point the producer calls on a loaded object (``agent_channel.adapters``).

Import-light on purpose: the producer may call it on any object, and an object can only be
an Agents SDK agent if the SDK is imported already. The SDK's package is named ``agents``,
a name other modules use too, so the test is its ``agents.agent`` module, not ``agents``.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any, cast

SUPPORTED = ((0, 24), (0, 25))
"""The openai-agents versions served: at least the first, below the second (the range the
tests run, pinned in this distribution's requirements)."""
RANGE = "openai-agents >=0.24,<0.25"

Body = Callable[[], Awaitable[object]]


def supported(version: str) -> bool:
    """Whether openai-agents ``version`` is in :data:`SUPPORTED`."""
    try:
        found = tuple(int(p) for p in version.split(".")[:2])
    except ValueError:
        return False
    return SUPPORTED[0] <= found < SUPPORTED[1]


def adapt(obj: object) -> Callable[[str | None], Body] | None:
    """The factory that serves ``obj`` when it is an Agents SDK ``Agent``, else ``None``.

    Raises ``RuntimeError`` (one line) for an agent of an SDK version outside
    :data:`SUPPORTED`: its seams may have moved.
    """
    if sys.modules.get("agents.agent") is None:
        return None
    from agents import Agent

    if not isinstance(obj, Agent):
        return None
    sdk = sys.modules["agents"]
    version = str(getattr(sdk, "__version__", "unknown"))
    if not supported(version):
        raise RuntimeError(f"agent-channel-openai-agents serves {RANGE}; found {version}")
    from ._serve import factory

    return factory(cast("Agent[Any]", obj))
