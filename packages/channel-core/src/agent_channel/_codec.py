"""What the store keeps of items, messages and children: their JSON, and back.

One adapter per shape, built when first needed and kept (building one costs
milliseconds: a commit with children and every restore paid it before).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import TypeAdapter

    from ._events import ChildInfo
    from ._items import ChannelItem
    from ._messages import ChatMessage


@cache
def _adapter(kind: str) -> TypeAdapter[Any]:
    from pydantic import TypeAdapter

    from ._events import ChildInfo
    from ._items import ChannelItem
    from ._messages import ChatMessage

    if kind == "items":
        return TypeAdapter(list[ChannelItem])
    if kind == "messages":
        return TypeAdapter(list[ChatMessage])
    return TypeAdapter(list[ChildInfo])


def items(bodies: Sequence[str]) -> list[ChannelItem]:
    """Items from their stored JSON, each as the registered class its ``type`` names."""
    return _adapter("items").validate_json(f"[{','.join(bodies)}]")


def messages(bodies: Sequence[str]) -> list[ChatMessage]:
    return _adapter("messages").validate_json(f"[{','.join(bodies)}]")


def children(text: str | None) -> list[ChildInfo]:
    return _adapter("children").validate_json(text) if text else []


def children_json(rows: Sequence[ChildInfo]) -> str:
    return _adapter("children").dump_json(list(rows)).decode()
