"""Agent factories in the shape producers load by dotted path.

A factory is ``factory(model: str | None = None) -> body``; ``body()`` runs
one execution on the ambient channel (the producer opened it). Test suites of
other packages use :func:`scripted_agent_factory` to get a react agent driven
by a script, without knowing anything else about this package.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agent_channel import ChatMessage

from ._react import react
from ._scripted import ScriptedModel, ScriptFunction, ScriptItem
from ._state import AgentState
from ._tool import Tool

Body = Callable[[], Awaitable[AgentState]]
"""An execution body: runs the agent on the ambient channel and returns its state."""


class ScriptedAgentFactory:
    """Builds a fresh scripted react agent per call; keeps each model for assertions."""

    def __init__(
        self,
        script: Sequence[ScriptItem] | ScriptFunction,
        *,
        tools: Sequence[Tool] = (),
        input: Sequence[ChatMessage] = (),
        submit: bool = False,
        prompt: str | None = None,
        **react_options: Any,
    ) -> None:
        self.script = script
        self.tools = tuple(tools)
        self.input = tuple(input)
        self.submit = submit
        self.prompt = prompt
        self.react_options = react_options
        self.models: list[ScriptedModel] = []
        """One per body built, in order: ``models[-1].calls`` shows what the model saw."""

    def __call__(self, model: str | None = None) -> Body:
        scripted = ScriptedModel(self.script)
        self.models.append(scripted)
        agent = react(
            model=scripted,
            tools=self.tools,
            submit=self.submit,
            prompt=self.prompt,
            **self.react_options,
        )

        async def body() -> AgentState:
            return await agent(AgentState(messages=list(self.input)))

        return body


def scripted_agent_factory(
    script: Sequence[ScriptItem] | ScriptFunction,
    *,
    tools: Sequence[Tool] = (),
    input: Sequence[ChatMessage] = (),
    submit: bool = False,
    prompt: str | None = None,
    **react_options: Any,
) -> ScriptedAgentFactory:
    """A producer-loadable factory whose agents play ``script`` (interactive by default)."""
    return ScriptedAgentFactory(
        script, tools=tools, input=input, submit=submit, prompt=prompt, **react_options
    )
