"""The ids of sessions no longer kept, remembered (within a bound) to say so.

Exists so both modes answer a request for a session they let go the same way ("it
finished and is no longer kept", -32002) rather than "unknown", with one bound.
"""

from __future__ import annotations

from collections import OrderedDict

FORGOTTEN = 4096
"""Ids of sessions let go that a server still recognises (the oldest are forgotten)."""


class Forgotten:
    """A set of the last :data:`FORGOTTEN` ids added."""

    __slots__ = ("_ids",)

    def __init__(self) -> None:
        self._ids: OrderedDict[str, None] = OrderedDict()

    def add(self, session_id: str) -> None:
        ids = self._ids
        ids[session_id] = None
        ids.move_to_end(session_id)
        if len(ids) > FORGOTTEN:
            ids.popitem(last=False)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._ids
