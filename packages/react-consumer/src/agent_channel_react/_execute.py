"""Running one assistant message's tool calls, concurrently, with their events.

Every failure becomes a tool result with an error: an unknown tool, arguments
that do not fit, a rejection by the approver, an exception in the tool. Only
cancellation propagates, and an in-flight call reports itself cancelled on
the way out, before the enclosing scope exits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
from agent_channel import (
    AgentChannel,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageTool,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    thaw,
)

from ._tool import Tool, ToolError, ToolOutput, render_result

REJECTED = "rejected by the operator"


async def execute_tools(
    ch: AgentChannel,
    message: ChatMessageAssistant,
    tools: Mapping[str, Tool],
    conversation: Sequence[ChatMessage],
    append: Callable[[ChatMessage], None],
    extra: list[ChatMessage],
) -> list[ChatMessageTool]:
    """Run ``message``'s tool calls and append their results in call order.

    If the calls are cancelled, the ones that had finished are still appended
    (their work is real); the caller repairs the rest. Messages a tool adds
    besides its result (a handoff's replies) go to ``extra`` for the caller to
    append once every call has its result, repaired ones included: the results
    of one message must follow it with nothing between them.
    """
    calls = message.tool_calls
    done: list[tuple[ChatMessageTool, tuple[ChatMessage, ...]] | None] = [None] * len(calls)

    async def run(i: int, call: ToolCall) -> None:
        done[i] = await _run_call(ch, call, tools.get(call.name), conversation)

    try:
        if len(calls) == 1:
            await run(0, calls[0])
        else:
            async with anyio.create_task_group() as tg:
                for i, call in enumerate(calls):
                    tg.start_soon(run, i, call)
    finally:
        for out in done:
            if out is not None:
                append(out[0])
                extra.extend(out[1])
    return [out[0] for out in done if out is not None]


async def _run_call(
    ch: AgentChannel, call: ToolCall, tool: Tool | None, conversation: Sequence[ChatMessage]
) -> tuple[ChatMessageTool, tuple[ChatMessage, ...]]:
    arguments: dict[str, Any] = thaw(call.arguments)
    observed = ch.observed  # one call's events are all published, or none
    if observed:
        ch.publish(
            ToolCallStarted(
                tool_call_id=call.id,
                name=call.name,
                arguments=arguments,
                title=tool.describe(arguments) if tool else None,
                kind=tool.kind if tool else "other",
            )
        )
    extra: tuple[ChatMessage, ...] = ()
    content, error = "", None
    try:
        if tool is None:
            raise ToolError(f"unknown tool {call.name!r}")
        if tool.needs_approval and ch.approver is not None and not await ch.approver(call):
            error = REJECTED
        else:
            kwargs = tool.validate(arguments)
            if tool.wants_conversation:
                kwargs["conversation"] = tuple(conversation)
            value = await tool.fn(**kwargs)
            if isinstance(value, ToolOutput):
                content, extra = value.content, value.messages
            else:
                content = render_result(value)
    except anyio.get_cancelled_exc_class():
        if observed:
            ch.publish(ToolCallFinished(tool_call_id=call.id, name=call.name, status="cancelled"))
        raise
    except ToolError as e:
        error = str(e)
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
    if observed:
        ch.publish(
            ToolCallFinished(
                tool_call_id=call.id,
                name=call.name,
                status="failed" if error is not None else "completed",
                content=content,
                error=error,
            )
        )
    result = ChatMessageTool(tool_call_id=call.id, function=call.name, content=content, error=error)
    return result, extra
