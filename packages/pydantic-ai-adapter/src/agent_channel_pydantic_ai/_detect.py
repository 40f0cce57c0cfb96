"""The entry point the producer calls on a loaded object (``agent_channel.adapters``).

Import-light on purpose: the producer may call it on any object, and an object can only be
a pydantic-ai agent if ``pydantic_ai`` is imported already, so a program that never imported
it pays nothing here.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any, cast

SUPPORTED = ((2, 78), (2, 79))
"""The pydantic-ai-slim versions served: at least the first, below the second (the range
the tests run, pinned in this distribution's requirements)."""
RANGE = "pydantic-ai-slim >=2.78,<2.79"

Body = Callable[[], Awaitable[object]]


def supported(version: str) -> bool:
    """Whether pydantic-ai ``version`` is in :data:`SUPPORTED`."""
    try:
        found = tuple(int(p) for p in version.split(".")[:2])
    except ValueError:
        return False
    return SUPPORTED[0] <= found < SUPPORTED[1]


def adapt(obj: object) -> Callable[[str | None], Body] | None:
    """The factory that serves ``obj`` when it is a pydantic-ai agent, else ``None``.

    Raises ``RuntimeError`` (one line) for an agent of a pydantic-ai version outside
    :data:`SUPPORTED`: its seams may have moved.
    """
    pai = sys.modules.get("pydantic_ai")
    if pai is None:
        return None
    from pydantic_ai.agent import AbstractAgent

    if not isinstance(obj, AbstractAgent):
        return None
    version = str(getattr(pai, "__version__", "unknown"))
    if not supported(version):
        raise RuntimeError(f"agent-channel-pydantic-ai serves {RANGE}; found {version}")
    from ._serve import factory

    return factory(cast("AbstractAgent[Any, Any]", obj))
