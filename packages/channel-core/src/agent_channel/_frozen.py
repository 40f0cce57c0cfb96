"""Deep-freezing of JSON-like values, so snapshots handed to producers stay read-only."""

from __future__ import annotations

import gc
from collections.abc import Iterable, Mapping
from types import MappingProxyType, NoneType
from typing import Annotated, Any

from pydantic import PlainSerializer, ValidatorFunctionWrapHandler, WrapValidator

_SCALARS = frozenset({str, int, float, bool, NoneType})
"""Exact types returned as they are without asking the (slow) ``Mapping`` ABC."""


class _FrozenDict(dict[Any, Any]):
    """The dict inside every proxy :func:`freeze` makes: it marks the proxy as deep-frozen.

    Nothing but that proxy refers to it, so nobody can change it, and everything in it
    was frozen first.
    """

    __slots__ = ()


def _made_here(value: object) -> bool:
    """True for a read-only mapping :func:`freeze` made (so deep-frozen already)."""
    if type(value) is not MappingProxyType:
        return False
    # A proxy does not expose its mapping; its gc referents are exactly that mapping.
    # Anywhere that answers differently, the value is simply frozen again.
    inner = gc.get_referents(value)
    return len(inner) == 1 and type(inner[0]) is _FrozenDict


def _frozen_dict(items: Iterable[tuple[Any, Any]]) -> MappingProxyType[Any, Any]:
    return MappingProxyType(_FrozenDict({k: freeze(v) for k, v in items}))


# The hot paths below test exact types first (the Mapping ABC's isinstance is slow) and
# make no typing.cast calls (each is a call, and builds its generic alias, per value).


def freeze(value: Any) -> Any:
    """Return ``value`` with every dict made a read-only mapping and every list a tuple.

    A read-only mapping this function made is already deep-frozen and is returned as it is.
    """
    t = type(value)  # pyright: ignore[reportUnknownVariableType]
    if t in _SCALARS:
        return value
    if t is dict:
        return _frozen_dict(value.items())  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    if t is list or t is tuple:
        return tuple([freeze(v) for v in value])  # pyright: ignore[reportUnknownVariableType]
    if _made_here(value):
        return value
    if isinstance(value, Mapping):
        return _frozen_dict(value.items())  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    if isinstance(value, list | tuple):
        return tuple([freeze(v) for v in value])  # pyright: ignore[reportUnknownVariableType]
    return value


def thaw(value: Any) -> Any:
    """Plain dicts and lists from a frozen snapshot (tool arguments), for JSON and for tools."""
    t = type(value)  # pyright: ignore[reportUnknownVariableType]
    if t in _SCALARS:
        return value
    if t is MappingProxyType or t is dict or isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if isinstance(value, tuple):
        return [thaw(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value


def _validate(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    if _made_here(value):  # e.g. a ToolCall's arguments, passed on into an event
        return value
    return freeze(handler(value))


FrozenJsonObject = Annotated[
    dict[str, Any],
    WrapValidator(_validate),
    PlainSerializer(thaw, return_type=dict[str, Any]),
]
"""A JSON object that validates from a dict and is stored as a read-only mapping."""
