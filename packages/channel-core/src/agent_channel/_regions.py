"""Keyed regions: one piece of work inside a turn that a producer can stop alone.

The core knows nothing of tools; a consumer wraps whatever it wants stoppable by
name (the react loop: each tool call, keyed by its id) and a producer asks for it
by that key. Stopping a region ends only its body: the turn goes on, no
:class:`AgentInterrupted` is raised and the turn state does not change.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from ._loop import LoopHandle


class Region:
    """``with channel.region(key) as region: ...`` then ``if region.cancelled: ...``.

    ``cancelled`` is true exactly when :meth:`AgentRef.cancel_region` answered true
    for this region, even if the body happened to finish before the stop reached it:
    the producer was told it was stopped, so the consumer must treat it so.
    """

    __slots__ = ("_active", "_cs", "_lock", "_loop", "cancelled", "key")

    def __init__(
        self, key: str, active: dict[str, Region], lock: threading.Lock, loop: LoopHandle
    ) -> None:
        """Made by :meth:`AgentChannel.region`, with its channel's table of active regions
        and the lock that guards it."""
        self._active, self._lock, self._loop = active, lock, loop
        self._cs = loop.cancel_scope()
        self.key = key
        self.cancelled = False
        """A producer stopped this region (set under the channel's lock)."""

    def __enter__(self) -> Region:
        with self._lock:
            if self.key in self._active:
                raise ValueError(f"a region keyed {self.key!r} is already active in this channel")
            self._active[self.key] = self
        self._cs.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        with self._lock:
            del self._active[self.key]
        return bool(self._cs.__exit__(exc_type, exc, tb))

    def stop(self) -> None:
        """End the body (what :meth:`AgentRef.cancel_region` does), on the consumer's loop.

        After the exit it is a no-op: a cancel scope that has exited cancels nothing.
        """
        self._loop.cancel(self._cs)


class NullRegion:
    """A region nobody can stop: no producer holds a ref to the channel."""

    __slots__ = ("key",)

    cancelled: Literal[False] = False

    def __init__(self, key: str) -> None:
        self.key = key

    def __enter__(self) -> NullRegion:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        return False
