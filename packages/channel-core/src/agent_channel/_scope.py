"""What the kernel hands out per turn: the no-op scope, and the events it builds.

A channel nobody holds a ref to cannot be interrupted, so its scope is one shared object
that does nothing. Field-less events are immutable: one instance each, built when first
published (the models load with the first event, not with the channel). An
:class:`ItemsDrained` is built from items the channel holds, each validated when it was
made: it is not validated again (as ``_trusted`` builds a model).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import anyio

from ._errors import describe

if TYPE_CHECKING:
    from ._events import ItemsDrained, TurnEnded, TurnStarted
    from ._items import ChannelItem

_shared: dict[str, TurnStarted | TurnEnded] = {}
_new = object.__new__
_set = object.__setattr__
_drained: list[type[ItemsDrained]] = []


class NullScope:
    """The scope of a channel nobody can interrupt: enters and leaves, nothing else."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> Literal[False]:
        return False


NULL_SCOPE = NullScope()


def turn_started() -> TurnStarted:
    """The one :class:`TurnStarted`."""
    event = _shared.get("started")
    if event is None:
        from ._events import TurnStarted

        event = _shared["started"] = TurnStarted()
    return event  # pyright: ignore[reportReturnType] (stored under its own key)


def ended_by(exc: BaseException | None) -> TurnEnded:
    """The :class:`TurnEnded` of a scope left with ``exc`` (``None``: normally)."""
    key = "ended" if exc is None else "cancelled"
    if exc is not None and not isinstance(exc, anyio.get_cancelled_exc_class()):
        from ._events import TurnEnded

        return TurnEnded(error=describe(exc))
    event = _shared.get(key)
    if event is None:
        from ._events import TurnEnded

        event = _shared[key] = TurnEnded() if exc is None else TurnEnded(error="cancelled")
    return event  # pyright: ignore[reportReturnType] (stored under its own key)


def items_drained(items: list[ChannelItem]) -> ItemsDrained:
    """The :class:`ItemsDrained` of ``items``, set field by field."""
    if not _drained:
        from ._events import ItemsDrained

        _drained.append(ItemsDrained)
    event = _new(_drained[0])
    _set(event, "__dict__", {"type": "items_drained", "items": tuple(items)})
    _set(event, "__pydantic_fields_set__", {"type", "items"})
    _set(event, "__pydantic_extra__", None)
    _set(event, "__pydantic_private__", None)
    return event
