"""The picker: how a client session that is bound to nothing chooses an execution (A3).

Exists apart from the connection handler because it is a small text protocol of its own:
the targets listed as a numbered text chunk (running ones first, the targets themselves
in ``_meta``), and a reply that is a number or an execution id (or a prefix of one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar
from uuid import uuid4

from ...stream import _mapping as m
from ...stream._items import META
from ...wire._frames import ChunkUpdate

MIN_PREFIX = 4
"""Characters an execution id prefix needs (shorter digit strings are picker numbers)."""


class Choice(Protocol):
    """What the picker reads of an execution."""

    @property
    def id(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def status(self) -> str: ...

    @property
    def clients(self) -> int: ...

    def describe(self) -> dict[str, Any]: ...


C = TypeVar("C", bound=Choice)


def listing(targets: Sequence[Choice], prefix: str = "") -> ChunkUpdate:
    """The picker's text chunk (an ``agent_message_chunk`` update) for ``targets``."""
    if targets:
        lines = [
            f"{i}. {h.title} [{h.id}] ({h.status}, {h.clients} client(s))"
            for i, h in enumerate(targets, 1)
        ]
        text = "Choose an execution: reply with its number or id.\n" + "\n".join(lines)
    else:
        text = "No executions are being served yet. Reply with anything to see the list again."
    update = m.chunk_json("text", f"{prefix}{text}\n", f"picker-{uuid4().hex[:12]}")
    update["_meta"] = {f"{META}targets": [h.describe() for h in targets]}
    return update


def pick(targets: Sequence[C], text: str) -> C | None:
    """The target a reply names: its number in the list, its id, or an unambiguous prefix."""
    if text.isdigit() and len(text) < MIN_PREFIX:
        if 1 <= int(text) <= len(targets):
            return targets[int(text) - 1]
        return None
    if len(text) >= MIN_PREFIX:
        matches = [h for h in targets if h.id == text] or [
            h for h in targets if h.id.startswith(text)
        ]
        return matches[0] if len(matches) == 1 else None
    return None
