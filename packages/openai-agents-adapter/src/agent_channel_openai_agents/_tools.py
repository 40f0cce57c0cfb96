"""Tool calls seen and stopped from outside, and ``ask_user``.

The adapter runs a clone of the author's agent whose function tools are the author's own,
each invocation wrapped (the agent object and its tools are never changed): around each
call it opens a keyed region (``ref.cancel_region(call id)`` stops that call alone),
publishes the call's start and end, and asks the execution's approver first when one is
routed (``--approve``). Around the invocation rather than through the SDK's
``needs_approval``: that ends the run with interruptions to ask, and an operator answers
within the turn.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import agent_channel
import anyio
from agent_channel import AgentChannel, ToolCall, ToolCallFinished, ToolCallStarted
from agents import Agent, FunctionTool, RunContextWrapper, function_tool
from agents.tool_context import ToolContext

REJECTED = "Tool call rejected by the operator."
CANCELLED_ALONE = "Tool call cancelled by the operator."
ASKING = "ask_user"
"""The question tool's name: asking needs no approval (it has no effect outside the run)."""


def arguments(raw: str) -> dict[str, Any]:
    """A call's JSON arguments as a dict (``{}`` when they are not an object)."""
    try:
        parsed = json.loads(raw or "{}")
    except ValueError:
        return {}
    return dict(parsed) if isinstance(parsed, dict) else {}  # pyright: ignore[reportUnknownArgumentType]


def channelled(agent: Agent[Any], ch: AgentChannel) -> Agent[Any]:
    """A clone of ``agent`` whose function tools run as regions with events and approval."""
    tools = [_wrap(t, ch) if isinstance(t, FunctionTool) else t for t in agent.tools]
    return agent.clone(tools=tools)


def _wrap(tool: FunctionTool, ch: AgentChannel) -> FunctionTool:
    invoke = tool.on_invoke_tool

    async def on_invoke_tool(ctx: ToolContext[Any], raw: str) -> Any:
        observed = ch.observed
        tc = ToolCall(id=ctx.tool_call_id, name=tool.name, arguments=arguments(raw))
        try:
            with ch.region(tc.id) as region:
                if observed:  # from inside the region: a client seeing it can stop it
                    title = tool.description.splitlines()[0] if tool.description else None
                    ch.publish(
                        ToolCallStarted(
                            tool_call_id=tc.id,
                            name=tc.name,
                            arguments=tc.arguments,
                            title=title,
                            kind="think" if tc.name == ASKING else "other",
                        )
                    )
                approver = ch.approver  # read per call: a producer may route one meanwhile
                if tc.name != ASKING and approver is not None and not await approver(tc):
                    _finished(ch, tc, "failed", REJECTED, REJECTED)
                    return REJECTED
                result = await invoke(ctx, raw)
        except BaseException as e:
            if observed:
                cancelled = isinstance(e, anyio.get_cancelled_exc_class())
                status = "cancelled" if cancelled else "failed"
                _finished(ch, tc, status, "", None if cancelled else f"{type(e).__name__}: {e}")
            raise
        if region.cancelled:  # stopped alone: the turn goes on, the model reads why
            _finished(ch, tc, "cancelled", CANCELLED_ALONE, CANCELLED_ALONE)
            return CANCELLED_ALONE
        if observed:
            _finished(ch, tc, "completed", str(result), None)
        return result

    return replace(tool, on_invoke_tool=on_invoke_tool)


def _finished(ch: AgentChannel, tc: ToolCall, status: Any, content: str, error: str | None) -> None:
    if ch.observed:
        ch.publish(
            ToolCallFinished(
                tool_call_id=tc.id, name=tc.name, status=status, content=content, error=error
            )
        )


async def _ask_user(
    ctx: RunContextWrapper[Any], question: str, choices: list[str] | None = None
) -> str:
    """Ask the person operating this run a question and wait for the answer. Use it for a
    decision or a fact only they have, never for what you can look up.

    Args:
        question: The question, complete and short.
        choices: The answers to choose from, when there are a few.
    """
    answer = await agent_channel.ask_user(question, tuple(choices or ()))
    return answer.for_model()


ask_user: FunctionTool = function_tool(_ask_user, name_override=ASKING)
"""The question tool an author adds to an agent's ``tools`` (the adapter adds none)."""
