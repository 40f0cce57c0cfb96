"""The ``ask_user`` tool: the model asks the operator and its turn waits for the answer (Q1).

A thin tool over the core's :func:`agent_channel.ask_user`: the question goes to the
resolver a producer routed on the top-level execution (a child's names the child), and
with none the model reads at once that no one can answer, so an unattended run never
hangs. It needs no approval: asking has no effect outside the conversation.
"""

from __future__ import annotations

import dataclasses

import agent_channel

from ._tool import Tool, tool


async def _ask_user(
    question: str, choices: list[str] | None = None, fields: list[str] | None = None
) -> str:
    """Ask the person operating this run a question and wait for the answer. Use it when
    you need a decision or a fact only they have; do not use it for what you can look up.

    Args:
        question: The question, complete and short.
        choices: The answers to choose from, when there are a few.
        fields: Names of values to fill in (a small form), when you need several at once.
    """
    form = tuple(agent_channel.QuestionField(name) for name in fields or ())
    answer = await agent_channel.ask_user(question, choices or (), form)
    return answer.for_model()


ask_user: Tool = dataclasses.replace(
    tool(name="ask_user", kind="think", title="Asking: {question}")(_ask_user),
    needs_approval=False,
)
"""Give it to :func:`react` in ``tools=[...]`` to let the model ask the operator."""
