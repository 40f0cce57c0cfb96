"""Deep-freezing of JSON-like values, so snapshots handed to producers stay read-only."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, cast

from pydantic import AfterValidator, PlainSerializer


def freeze(value: Any) -> Any:
    """Return ``value`` with every dict made a read-only mapping and every list a tuple."""
    if isinstance(value, Mapping):
        items = cast(Mapping[Any, Any], value).items()
        return MappingProxyType({k: freeze(v) for k, v in items})
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    return value


def thaw(value: Any) -> Any:
    """Plain dicts and lists from a frozen snapshot (tool arguments), for JSON and for tools."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, tuple):
        return [thaw(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value


FrozenJsonObject = Annotated[
    dict[str, Any],
    AfterValidator(freeze),
    PlainSerializer(thaw, return_type=dict[str, Any]),
]
"""A JSON object that validates from a dict and is stored as a read-only mapping."""
