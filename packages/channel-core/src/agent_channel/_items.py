"""What producers send a channel: an open, serialisable union of items.

Every item class names itself with a ``type`` literal. Subclassing
:class:`ChannelItem` registers the class, so another package adds an item
type without touching the core, and :func:`parse_item` (or validating a
``ChannelItem`` field) turns its JSON back into the right class.

Deliberately not implemented yet: ``Announce`` (a child execution reporting
its result) and ``Steer`` (a supervisor redirecting a child). Their names are
reserved for that work.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    SerializeAsAny,
    model_validator,
)

from ._content import Content, ContentText, content_text
from ._messages import new_id

_REGISTRY: dict[str, type[ChannelItem]] = {}


class ChannelItem(BaseModel):
    """Base of every item a channel carries."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    type: str
    id: str = Field(default_factory=new_id)

    item_type: ClassVar[str] = ""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        default = cls.model_fields["type"].default
        if not isinstance(default, str) or not default:
            raise TypeError(f"{cls.__name__} must declare `type: Literal['name'] = 'name'`")
        known = _REGISTRY.get(default)
        if known is not None:
            raise TypeError(
                f"channel item type {default!r} is already taken by "
                f"{known.__module__}.{known.__qualname__}; give {cls.__name__} its own name"
            )
        cls.item_type = default
        _REGISTRY[default] = cls

    @model_validator(mode="wrap")
    @classmethod
    def _dispatch(cls, data: Any, handler: ModelWrapValidatorHandler[ChannelItem]) -> ChannelItem:
        if cls is ChannelItem and isinstance(data, dict):
            kind = cast(dict[str, Any], data).get("type")
            sub = _REGISTRY.get(kind) if isinstance(kind, str) else None
            if sub is None:
                raise ValueError(f"unknown channel item type {kind!r}; known: {sorted(_REGISTRY)}")
            return sub.model_validate(data)
        return handler(data)


AnyItem = SerializeAsAny[ChannelItem]
"""A field type for "some channel item": serialises with the subclass's fields."""


def parse_item(data: Any) -> ChannelItem:
    """Validate JSON-like ``data`` into the registered item class its ``type`` names."""
    return ChannelItem.model_validate(data)


class UserMessage(ChannelItem):
    """A cooperative message for the agent, folded in at its next boundary."""

    type: Literal["user_message"] = "user_message"  # pyright: ignore[reportIncompatibleVariableOverride]
    content: str | tuple[Content, ...]
    source: str = "operator"

    def __init__(self, content: str | tuple[Content, ...] | None = None, /, **data: Any) -> None:
        if content is not None:
            data["content"] = content
        super().__init__(**data)

    @property
    def text(self) -> str:
        """The message's plain text."""
        return content_text(self.content)

    @property
    def parts(self) -> tuple[Content, ...]:
        """The content as parts (a plain string becomes one text part)."""
        c = self.content
        return (ContentText(text=c),) if isinstance(c, str) else c


CancelReason = Literal["user_cancel", "limit", "system"]


class Cancel(ChannelItem):
    """The control-plane item: stop the work in progress."""

    type: Literal["cancel"] = "cancel"  # pyright: ignore[reportIncompatibleVariableOverride]
    reason: CancelReason = "user_cancel"

    def __init__(self, reason: CancelReason | None = None, /, **data: Any) -> None:
        if reason is not None:
            data["reason"] = reason
        super().__init__(**data)
