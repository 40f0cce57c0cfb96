"""The items of one execution's rendered stream, and the two small protocols around them.

Exists so the hub (which renders an execution once) and the bindings (which write it to
each client session) share a vocabulary without importing each other: the hub hands
:class:`Live` and :class:`Chunk` items to :class:`Sink` objects, a binding reads what it
needs of its execution through :class:`Target`. No ``acp`` schema import: items are the
updates' JSON already.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from acp.schema import PermissionOption, ToolCallUpdate
from agent_channel import ToolKind

META = "agent_channel."
"""The prefix of our keys in ``_meta``."""

Card = tuple[str, ToolKind]
"""A tool call's title and kind, as its live card showed them (S16)."""

Payload = Mapping[str, object]
"""A JSON object the stream hands on: an update (the SDK's schema serialised, or a shape of
``wire._frames`` built directly) or an extension notification's params."""


@dataclass(slots=True)
class Live:
    """One item of the live stream: a ``session/update`` (``method`` None) or an extension
    notification. ``payload`` is the update, or the notification's params without the
    session id; a binding adds its own wire session id."""

    method: str | None
    payload: Payload
    size: int = 0
    keep: bool = False
    """Never shed (approval cards: the request that follows refers to them)."""
    encoded: bytes | None = None
    """``payload`` as JSON, made once for every binding that writes it."""
    card: str | None = None
    """For a card's later update: its tool call id (a binding that never got the card
    gets a minimal one first)."""


@dataclass(slots=True)
class Chunk:
    """Streamed model text (merged while a slow client's outbox holds it)."""

    message_id: str
    kind: str
    text: str
    encoded: bytes | None = None
    """The chunk's update as JSON, made once for every binding that writes it."""


Item = Live | Chunk


class Target(Protocol):
    """What a binding reads of the execution it is bound to (never an action on it)."""

    @property
    def id(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def running(self) -> bool: ...

    @property
    def cards(self) -> Mapping[str, Card]: ...

    @property
    def card_seq(self) -> Mapping[str, int]: ...


class Sink(Protocol):
    """What a hub asks of each client session bound to it (a binding)."""

    @property
    def is_driver(self) -> bool: ...

    @property
    def alive(self) -> bool: ...

    @property
    def dropped(self) -> bool:
        """It fell too far behind and was shed: the hub lets it go."""
        ...

    def attached(
        self, target: Target, replay: list[dict[str, object]] | None, snapshot: Live
    ) -> None:
        """Bound: its preamble (A5), then every live item; ``replay`` None: a resume (D5)."""
        ...

    @property
    def wire_id(self) -> str:
        """Its ACP session id (the execution's, unless it was picked: A3)."""
        ...

    def in_sync(self, cards: set[str]) -> bool:
        """Whether it takes a loop step's items as one write (the bytes shared by every
        session with the execution's id)."""
        ...

    def encode(self, step: list[Item]) -> bytes: ...

    def write_step(self, data: bytes) -> None: ...

    def take(self, step: Sequence[Item]) -> None:
        """The step item by item (queued, merged or shed as this session needs)."""
        ...

    async def ask_permission(
        self, request: ToolCallUpdate, options: list[PermissionOption]
    ) -> object | None:
        """The client's outcome; None when it left before answering."""
        ...

    async def left(self) -> None:
        """Until it leaves (a question asked of it moves on to the next driver)."""
        ...

    def mark(self, run: Callable[[], object]) -> None:
        """Run ``run`` once everything handed to it so far is written (see ``_binding``)."""
        ...

    async def flush(self) -> None:
        """Wait until everything handed to it so far is written."""
        ...
