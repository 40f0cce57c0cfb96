"""Questions: the model asks the operator, and its turn waits for the answer (Q1-Q4).

A question never travels through the channel (there is no answer item): it goes to a
resolver that a producer routes onto the top-level execution's ref, beside the approver
(:meth:`AgentRef.route_questions`: ``lowlevel.QUESTIONS``). A child's question climbs to
its top level by the parent links children make (``lowlevel.top``) and names the child.
With no resolver anywhere the answer is "no one can answer" at once, so an unattended run
never hangs. The wait is an ordinary ``await`` inside the asking turn, so an interrupt of
that turn cancels it (and the resolver's ``finally`` tells its client the question is
void). Built on the public names and ``agent_channel.lowlevel`` only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from agent_channel import agent_channel, new_id
from agent_channel.lowlevel import QUESTIONS, link_of, top

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
    channel = agent_channel()
    link = link_of(channel)
    resolver = QUESTIONS.current(top(channel))
    question = Question(
        text,
        tuple(choices),
        tuple(fields),
        child_id=None if link is None else link.id,
        child_name=None if link is None else link.name,
    )
    if resolver is None:
        return Answer(None, reason=NO_ONE)
    return await resolver(question)
