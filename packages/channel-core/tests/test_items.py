"""Items are an open, serialisable union."""

from __future__ import annotations

from typing import Literal

import pydantic
import pytest
from agent_channel import (
    Cancel,
    ChannelItem,
    ContentImage,
    ContentText,
    UserMessage,
    parse_item,
)


class Nudge(ChannelItem):
    """An item type another package adds, without touching the core."""

    type: Literal["test_nudge"] = "test_nudge"  # pyright: ignore[reportIncompatibleVariableOverride]
    strength: int


def test_items_round_trip_by_their_type() -> None:
    items: list[ChannelItem] = [
        UserMessage("plain"),
        UserMessage((ContentText(text="see"), ContentImage(mime_type="image/png", data="AAAA"))),
        Cancel("limit"),
        Nudge(strength=3),
    ]
    for item in items:
        assert parse_item(item.model_dump(mode="json")) == item


def test_unknown_item_types_are_refused_clearly() -> None:
    with pytest.raises(pydantic.ValidationError, match="unknown channel item type 'nope'"):
        parse_item({"type": "nope"})


def test_an_item_type_name_cannot_be_taken_twice() -> None:
    with pytest.raises(TypeError, match="already taken"):

        class Impostor(ChannelItem):
            type: Literal["cancel"] = "cancel"  # pyright: ignore[reportIncompatibleVariableOverride]


def test_items_are_immutable_and_validated() -> None:
    with pytest.raises(pydantic.ValidationError):
        Cancel("whenever")  # type: ignore[arg-type]
    msg = UserMessage("x", source="supervisor")
    with pytest.raises(pydantic.ValidationError):
        msg.source = "operator"  # type: ignore[misc]
    assert msg.text == "x" and msg.parts == (ContentText(text="x"),)
