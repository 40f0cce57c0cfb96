"""What producers send a channel: an open, serialisable union of items.

Every item class names itself with a ``type`` literal. Subclassing
:class:`ChannelItem` registers the class, so another package adds an item
type without touching the core, and :func:`parse_item` (or validating a
``ChannelItem`` field) turns its JSON back into the right class.

Two items belong to children (see ``docs/children.md``): :class:`Steer`, posted into a
child's channel by its supervisor, and :class:`Announce`, posted into the parent's
channel when a child ends. :func:`fold` turns both into user messages marked with
their source.
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
    sender: str | None = None
    """Who posted it, for people (an ACP client's name, say): kept with the item where a
    store keeps it, never shown to the model. None when nobody said."""

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


class Steer(ChannelItem):
    """A redirect for a child execution, from its parent (or an operator, through it).

    Folded at the child's next boundary as a user message whose ``source`` says who
    steered. The steerer learns whether it arrived from the :class:`Steering` that
    :meth:`Supervisor.steer` returned.
    """

    type: Literal["steer"] = "steer"  # pyright: ignore[reportIncompatibleVariableOverride]
    content: str | tuple[Content, ...]
    source: str = "parent"

    def __init__(self, content: str | tuple[Content, ...] | None = None, /, **data: Any) -> None:
        if content is not None:
            data["content"] = content
        super().__init__(**data)

    @property
    def text(self) -> str:
        """The steer's plain text."""
        return content_text(self.content)


ChildEnd = Literal["completed", "failed", "killed", "limit", "parent_ended", "lost"]
"""How a child execution ended: its body returned (``completed``) or raised (``failed``),
its parent or an operator killed it, a limit of its own ended it, its parent's
execution ended first, or it was running when its process died and could not be restored
(``lost``: announced when the parent is restored from a store)."""

LimitName = Literal["turns", "tokens", "time"]
"""Which of a child's limits ended it (see :class:`ChildLimits`)."""


class Announce(ChannelItem):
    """A child execution ended: what its parent's model reads at the next boundary.

    ``result`` is bounded (its first 2,000 characters); ``omitted`` counts
    the characters left out, which :meth:`Supervisor.result` returns whole.
    """

    type: Literal["announce"] = "announce"  # pyright: ignore[reportIncompatibleVariableOverride]
    child_id: str
    name: str
    status: ChildEnd
    result: str = ""
    omitted: int = 0
    reason: str | None = None
    """Why it was killed, what it raised, or the limit it reached."""
    limit: LimitName | None = None

    @property
    def text(self) -> str:
        """The announcement in words, naming the child, how it ended and its result."""
        who = f"Child {self.name} (id {self.child_id})"
        why = f": {self.reason}" if self.reason else ""
        if self.status == "completed":
            head = f"{who} completed."
        elif self.status == "failed":
            head = f"{who} failed{why}."
        elif self.status == "killed":
            head = f"{who} was killed{why}."
        elif self.status == "limit":
            head = f"{who} was stopped by its {self.limit or 'own'} limit{why}."
        elif self.status == "lost":
            head = f"{who} was lost in a restart: its work did not survive its process{why}."
        else:
            head = f"{who} was ended because its parent's execution ended."
        if not self.result:
            return head
        more = (
            f"\n[{self.omitted} more characters not shown: ask for the child's full result]"
            if self.omitted
            else ""
        )
        return f"{head}\n\nResult:\n{self.result}{more}"


RESULT_CHARS = 2_000
"""How much of a child's result (and input) an :class:`Announce` or a :class:`ChildInfo`
carries; the rest is read on demand."""


def bounded(text: str, limit: int = RESULT_CHARS) -> tuple[str, int]:
    """``text`` cut to ``limit`` characters, and how many were cut."""
    if len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit
