"""Nested executions: every child agent runs on a fresh channel of its own.

A child's channel is real and works (whoever gets its ref can post to it and
interrupt it), but nothing attaches to it by default, so it is inert. The
parent's producers hold the parent's ref and have no path to it. A child run
as a tool is awaited inside the parent's scope, so interrupting the parent
stops the child with it. Its tool calls still ask the caller's approver (K9): a
child never runs with wider permissions than its parent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from agent_channel import (
    AgentChannel,
    AgentRef,
    Approver,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    ChildToolCall,
    ToolCall,
    agent_channel,
    new_id,
    open_channel,
)

from ._agent import Agent
from ._state import AgentState
from ._tool import Tool, ToolOutput, tool

OnRef = Callable[[AgentRef], object]
"""Called with the child's ref before the child starts (to post to it or interrupt it)."""


def state_of(input: str | Sequence[ChatMessage] | AgentState) -> AgentState:
    if isinstance(input, AgentState):
        return input
    if isinstance(input, str):
        return AgentState(messages=[ChatMessageUser(content=input)])
    return AgentState(messages=list(input))


async def run(
    agent: Agent,
    input: str | Sequence[ChatMessage] | AgentState,
    *,
    on_ref: OnRef | None = None,
    name: str | None = None,
) -> AgentState:
    """Run ``agent`` as its own execution, on a fresh channel; its tool calls ask the
    caller's approver, if the caller has one, naming it ``name`` (default: the agent's)."""
    state = state_of(input)
    called: str = name or getattr(agent, "name", None) or type(agent).__name__
    async with open_channel(approver=_asking(agent_channel(), called)) as ch:
        if on_ref is not None:
            on_ref(ch.ref())
        return await agent(state)


def _asking(caller: AgentChannel, name: str) -> Approver | None:
    """The nested run's approver: the caller's, read at each call, asked a
    :class:`ChildToolCall` naming the nested agent (``None`` outside any execution)."""
    if type(caller) is not AgentChannel:
        return None
    nested_id = new_id()

    async def approve(call: ToolCall) -> bool:
        above = caller.approver
        if above is None:
            return True
        if not isinstance(call, ChildToolCall):
            call = ChildToolCall(
                id=f"{nested_id}/{call.id}",
                name=call.name,
                arguments=call.arguments,
                child_id=nested_id,
                child_name=name,
                call_id=call.id,
            )
        return await above(call)

    return approve


def answer_of(state: AgentState) -> str:
    return state.output.completion or (state.output.message.text if state.output.message else "")


def as_tool(
    agent: Agent,
    *,
    name: str,
    description: str,
    on_ref: OnRef | None = None,
) -> Tool:
    """``agent`` as a tool: it gets the ``input`` text and its answer is the result."""

    async def delegate(input: str) -> str:
        """Delegate a task.

        Args:
            input: What the agent should do, with everything it needs to know.
        """
        return answer_of(await run(agent, input, on_ref=on_ref, name=name))

    return tool(name=name, description=description, kind="other", title=f"{name}: {{input}}")(
        delegate
    )


def handoff(
    agent: Agent,
    *,
    name: str,
    description: str,
    on_ref: OnRef | None = None,
) -> Tool:
    """Hand the conversation to ``agent``; what it says comes back into the parent's.

    The child sees the parent's conversation (without the parent's system
    message and the pending handoff call). Its replies return as assistant
    text; its own tool traffic stays with it, since the parent's model was
    never offered those tools.
    """

    async def transfer(conversation: tuple[ChatMessage, ...]) -> ToolOutput:
        before = [m for m in conversation if not isinstance(m, ChatMessageSystem)]
        if before and isinstance(before[-1], ChatMessageAssistant):
            last = before[-1]
            before[-1] = last.model_copy(update={"tool_calls": ()})
        state = await run(agent, list(before), on_ref=on_ref, name=name)
        # What the child added, by id: it may have put its own system message first.
        known = {m.id for m in before}
        back: list[ChatMessage] = [
            ChatMessageAssistant(content=f"[{name}] {m.text}", model=m.model)
            for m in state.messages
            if isinstance(m, ChatMessageAssistant) and m.text and m.id not in known
        ]
        return ToolOutput(f"{name} took over and has finished.", tuple(back))

    t = tool(name=name, description=description, kind="other", title=f"handing off to {name}")(
        _no_args
    )
    return dataclasses.replace(t, fn=transfer, wants_conversation=True)


async def _no_args() -> None:
    """Takes no arguments."""
