# pyright: reportPrivateUsage=false
# (a question climbs from a child's channel to its top level through the supervisors)
"""Questions: the model asks the operator, and its turn waits for the answer (Q1-Q4).

A question never travels through the channel (there is no answer item): it goes to a
:data:`Resolver` that a producer routes onto the top-level execution's ref, beside the
approver (:meth:`AgentRef.route_questions`). A child's question climbs to its top level
and names the child. With no resolver anywhere the answer is "no one can answer" at once,
so an unattended run never hangs. The wait is an ordinary ``await`` inside the asking
turn, so an interrupt of that turn cancels it (and the resolver's ``finally`` tells its
client the question is void).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ._channel import _InertChannel, agent_channel
from ._messages import new_id

if TYPE_CHECKING:
    from ._channel import AgentChannel

FieldKind = Literal["string", "number", "integer", "boolean"]

NO_ONE = "no one can answer questions in this run"
"""The reason of the answer a question gets when no resolver is routed (Q1)."""


@dataclass(frozen=True, slots=True)
class QuestionField:
    """One entry of a small form: a name, what to show, its type, whether it must be given."""

    name: str
    title: str = ""
    kind: FieldKind = "string"
    required: bool = True


@dataclass(frozen=True, slots=True)
class Question:
    """What the model asks: free text, one of ``choices``, or a small form (``fields``)."""

    text: str
    choices: tuple[str, ...] = ()
    fields: tuple[QuestionField, ...] = ()
    id: str = field(default_factory=new_id)
    child_id: str | None = None
    """The asking child (``None``: the top-level execution itself)."""
    child_name: str | None = None

    @property
    def asker(self) -> str:
        """Who asks, for a person: ``"child researcher (c-12ab)"`` or ``"the agent"``."""
        if self.child_id is None:
            return "the agent"
        return f"child {self.child_name or self.child_id} ({self.child_id})"


@dataclass(frozen=True, slots=True)
class Answer:
    """The operator's reply; ``text`` is ``None`` when there was none, and ``reason`` says why
    (declined, no one can answer). ``values`` holds a form's fields."""

    text: str | None
    values: Mapping[str, object] = field(default_factory=dict[str, object])
    reason: str | None = None

    @property
    def answered(self) -> bool:
        return self.text is not None

    def for_model(self) -> str:
        """The answer as the model reads it (a tool result)."""
        if self.text is None:
            return f"No answer: {self.reason or 'the question was not answered'}."
        if self.values and not self.text:
            return "\n".join(f"{k}: {v}" for k, v in self.values.items())
        return self.text


Resolver = Callable[[Question], Awaitable[Answer]]
"""Answers questions: routed onto a top-level execution by a producer
(:meth:`AgentRef.route_questions`). Awaited in the asking turn; it may be cancelled there."""

_lock = threading.Lock()
_routed: weakref.WeakKeyDictionary[AgentChannel, tuple[Resolver, ...]] = weakref.WeakKeyDictionary()


def route(channel: AgentChannel, resolver: Resolver) -> Callable[[], None]:
    """Route ``resolver`` onto ``channel`` (the last routed wins); returns the release."""
    if not callable(resolver):
        raise TypeError(f"route_questions() takes an async callable, not {resolver!r:.60}")
    if isinstance(channel, _InertChannel):
        return lambda: None
    with _lock:
        _routed[channel] = (*_routed.get(channel, ()), resolver)
    released = False

    def release() -> None:
        nonlocal released
        with _lock:
            if released:
                return
            released = True
            routed = list(_routed.get(channel, ()))
            if resolver in routed:
                del routed[len(routed) - 1 - routed[::-1].index(resolver)]
            _routed[channel] = tuple(routed)

    return release


def _top(channel: AgentChannel) -> tuple[AgentChannel, str | None, str | None]:
    """The top-level channel above ``channel``, and the child that asks (if a child asks)."""
    child_id = child_name = None
    sup = channel._supervisor
    while sup is not None and sup._owner is not None and sup.parent is not None:
        if child_id is None:
            child_id, child_name = sup._owner.id, sup._owner.name
        channel = sup.parent._channel
        sup = channel._supervisor
    return channel, child_id, child_name


def resolver_for(channel: AgentChannel) -> Resolver | None:
    """The resolver that answers ``channel``'s questions: its top level's last routed one."""
    top = _top(channel)[0]
    with _lock:
        routed = _routed.get(top, ())
    return routed[-1] if routed else None


async def ask_user(
    text: str,
    choices: tuple[str, ...] | list[str] = (),
    fields: tuple[QuestionField, ...] | list[QuestionField] = (),
) -> Answer:
    """Ask the operator of the current execution and wait for the answer (Q1).

    Goes to the resolver routed on the top-level execution, naming the asking child; with
    none, returns at once an answer whose ``reason`` is :data:`NO_ONE`. Cancelled with the
    asking turn (an interrupt), like any other ``await`` in it.
    """
    if not isinstance(text, str) or not text.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ValueError("ask_user() needs the question's text")
    top, child_id, child_name = _top(agent_channel())
    with _lock:
        routed = _routed.get(top, ())
    question = Question(
        text,
        tuple(choices),
        tuple(fields),
        child_id=child_id,
        child_name=child_name,
    )
    if not routed:
        return Answer(None, reason=NO_ONE)
    return await routed[-1](question)
