"""The entry point the producer calls on a loaded object (``agent_channel.adapters``).

Import-light on purpose: the producer may call it on any object, and an object can only be
a compiled LangGraph graph if ``langgraph.pregel`` is imported already, so a program that
never imported LangGraph pays nothing here.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any, cast

SUPPORTED = ((1, 2, 24), (1, 3))
"""The langgraph versions served: at least the first, below the second (the range the tests
run, pinned in this distribution's requirements; ``RunControl``, the seam operators'
messages go in by, is in 1.2.24)."""
RANGE = "langgraph >=1.2.24,<1.3"
MESSAGES = "messages"
"""The state key the graph's conversation lives in (LangGraph's ``MessagesState``)."""

Body = Callable[[], Awaitable[object]]


def supported(version: str) -> bool:
    """Whether langgraph ``version`` is in :data:`SUPPORTED`."""
    try:
        found = tuple(int(p) for p in version.split(".")[:3])
    except ValueError:
        return False
    return SUPPORTED[0] <= found < SUPPORTED[1]


def adapt(obj: object) -> Callable[[str | None], Body] | None:
    """The factory that serves ``obj`` when it is a compiled LangGraph graph, else ``None``.

    Raises ``RuntimeError`` (one line) for a graph of a langgraph version outside
    :data:`SUPPORTED` (its seams may have moved), a graph whose state holds no
    ``messages``, or a graph builder that was never compiled.
    """
    if sys.modules.get("langgraph.pregel") is None:
        return None
    from langgraph.graph import StateGraph  # pyright: ignore[reportMissingTypeStubs]
    from langgraph.pregel import Pregel  # pyright: ignore[reportMissingTypeStubs]

    if isinstance(obj, StateGraph):
        raise RuntimeError("it is a StateGraph, not compiled: serve graph.compile()")
    if not isinstance(obj, Pregel):
        return None
    import langgraph.version

    version = str(getattr(langgraph.version, "__version__", "") or "unknown")
    if not supported(version):
        raise RuntimeError(f"agent-channel-langgraph serves {RANGE}; found {version}")
    graph = cast("Any", obj)  # a Pregel of any state
    channels: dict[str, object] = graph.channels
    if MESSAGES not in channels:
        keys = ", ".join(sorted(k for k in channels if not k.startswith(("__", "branch:"))))
        raise RuntimeError(
            f"its state has no {MESSAGES!r} key (found: {keys or 'none'}): "
            "expected a graph whose state holds the conversation, e.g. MessagesState"
        )
    from ._serve import factory

    return factory(graph)
