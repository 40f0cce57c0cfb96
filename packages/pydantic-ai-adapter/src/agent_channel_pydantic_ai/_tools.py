"""Tool calls seen and stopped from outside: the adapter's capability, and ``ask_user``.

:class:`Channelled` is a pydantic-ai capability the adapter adds to each run it drives
(``iter(capabilities=[...])``); the agent's own tools are never changed. Around each tool's
execution it opens a keyed region (``ref.cancel_region(call id)`` stops that call alone),
publishes the call's start and end, and asks the execution's approver first when one is
routed (``--approve``): around execution, because pydantic-ai's deferred approvals end the
run to ask, and an operator answers within it.
"""

from __future__ import annotations

from typing import Any

import agent_channel
from agent_channel import AgentChannel, ToolCall, ToolCallFinished, ToolCallStarted
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import RunContext, ToolDefinition

REJECTED = "Tool call rejected by the operator."
CANCELLED_ALONE = "Tool call cancelled by the operator."
ASKING = "ask_user"
"""The question tool's name: asking needs no approval (it has no effect outside the run)."""


class Channelled(AbstractCapability[Any]):
    """Each tool call as a keyed region with its events and its approval."""

    def __init__(self, ch: AgentChannel) -> None:
        self.ch = ch

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
        handler: Any,
    ) -> Any:
        ch = self.ch
        observed = ch.observed
        tc = ToolCall(id=call.tool_call_id, name=call.tool_name, arguments=call.args_as_dict())
        try:
            with ch.region(tc.id) as region:
                if observed:  # from inside the region: a client seeing it can stop it
                    ch.publish(
                        ToolCallStarted(
                            tool_call_id=tc.id,
                            name=tc.name,
                            arguments=tc.arguments,
                            title=tool_def.description.splitlines()[0]
                            if tool_def.description
                            else None,
                            kind="think" if tc.name == ASKING else "other",
                        )
                    )
                approver = ch.approver  # read per call: a producer may route one meanwhile
                if tc.name != ASKING and approver is not None and not await approver(tc):
                    _finished(ch, tc, "failed", REJECTED, REJECTED)
                    return REJECTED
                result = await handler(args)
        except BaseException as e:
            if observed:
                cancelled = isinstance(e, agent_channel_cancelled())
                status = "cancelled" if cancelled else "failed"
                _finished(ch, tc, status, "", None if cancelled else f"{type(e).__name__}: {e}")
            raise
        if region.cancelled:  # stopped alone: the turn goes on, the model reads why
            _finished(ch, tc, "cancelled", CANCELLED_ALONE, CANCELLED_ALONE)
            return CANCELLED_ALONE
        if observed:
            _finished(ch, tc, "completed", str(result), None)
        return result


def agent_channel_cancelled() -> type[BaseException]:
    import anyio

    return anyio.get_cancelled_exc_class()


def _finished(ch: AgentChannel, tc: ToolCall, status: Any, content: str, error: str | None) -> None:
    if ch.observed:
        ch.publish(
            ToolCallFinished(
                tool_call_id=tc.id, name=tc.name, status=status, content=content, error=error
            )
        )


async def ask_user(question: str, choices: list[str] | None = None) -> str:
    """Ask the person operating this run a question and wait for the answer. Use it for a
    decision or a fact only they have, never for what you can look up.

    Args:
        question: The question, complete and short.
        choices: The answers to choose from, when there are a few.
    """
    answer = await agent_channel.ask_user(question, tuple(choices or ()))
    return answer.for_model()
