"""Running one assistant message's tool calls, concurrently, with their events.

Every failure becomes a tool result with an error: an unknown tool, arguments
that do not fit, a rejection by the approver, an exception in the tool. Each
call runs in its own keyed region (``ch.region(call.id)``), so an operator can
cancel that one call (``ref.cancel_region``): its result then says so and the
turn goes on. Only the turn's cancellation propagates, and an in-flight call
reports itself cancelled on the way out, before the enclosing scope exits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import anyio
from agent_channel import (
    AgentChannel,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageTool,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    cancelled_result,
    thaw,
)

from ._tool import Tool, ToolError, ToolOutput, render_result

REJECTED = "rejected by the operator"
INTERRUPTED = "interrupted by a restart"
"""The error of a call a crash cut off (D4), when its tool is not idempotent."""

Status = Literal["completed", "failed", "cancelled"]


async def execute_tools(
    ch: AgentChannel,
    message: ChatMessageAssistant,
    tools: Mapping[str, Tool],
    conversation: Sequence[ChatMessage],
    append: Callable[[ChatMessageTool], None],
    extra: list[ChatMessage],
    late: list[ChatMessageTool],
) -> list[ChatMessageTool]:
    """Run ``message``'s tool calls and append their results in call order.

    If the calls are cancelled, the ones that had finished still count (their
    work is real): those before the first unfinished call are appended, those
    after it go to ``late``, for the caller's repair to put in their place
    among the synthetic results, so results stay in call order. Messages a tool
    adds besides its result (a handoff's replies) go to ``extra`` for the caller
    to append once every call has its result, repaired ones included: the
    results of one message must follow it with nothing between them.
    """
    calls = message.tool_calls
    done: list[tuple[ChatMessageTool, tuple[ChatMessage, ...]] | None] = [None] * len(calls)
    # A region key must be unique while active: a model that repeats a call id gets the
    # repeat run, just not cancellable on its own (the id cannot address it anyway).
    keys: list[str | None] = []
    for c in calls:
        keys.append(None if c.id in keys else c.id)

    async def run(i: int, call: ToolCall) -> None:
        done[i] = await _run_call(ch, call, tools.get(call.name), conversation, keys[i])

    try:
        if len(calls) == 1:
            await run(0, calls[0])
        else:
            async with anyio.create_task_group() as tg:
                for i, call in enumerate(calls):
                    tg.start_soon(run, i, call)
    finally:
        gap = False
        for out in done:
            if out is None:
                gap = True
                continue
            (late.append if gap else append)(out[0])
            extra.extend(out[1])
    return [out[0] for out in done if out is not None]


async def _run_call(
    ch: AgentChannel,
    call: ToolCall,
    tool: Tool | None,
    conversation: Sequence[ChatMessage],
    key: str | None,
) -> tuple[ChatMessageTool, tuple[ChatMessage, ...]]:
    observed = ch.observed  # one call's events are all published, or none
    content = ""
    error: str | None = None
    extra: tuple[ChatMessage, ...] = ()
    cancelled = False
    try:
        if key is None:
            _started(ch, call, tool, observed)
            content, error, extra = await _invoke(ch, call, tool, conversation)
        else:
            with ch.region(key) as region:
                # Announced from inside the region: a producer that sees the card can
                # cancel the call at once (outside it, cancel_region would answer False).
                _started(ch, call, tool, observed)
                content, error, extra = await _invoke(ch, call, tool, conversation)
            cancelled = region.cancelled
    except anyio.get_cancelled_exc_class():
        if observed:
            ch.publish(ToolCallFinished(tool_call_id=call.id, name=call.name, status="cancelled"))
        raise
    status: Status
    if cancelled:
        # Cancelled alone: whatever the body managed is dropped (the operator asked for
        # it not to count), and the model reads why on its next call.
        result, extra, status = cancelled_result(call), (), "cancelled"
    else:
        result = ChatMessageTool(
            tool_call_id=call.id, function=call.name, content=content, error=error
        )
        status = "completed" if error is None else "failed"
    if observed:
        ch.publish(
            ToolCallFinished(
                tool_call_id=call.id,
                name=call.name,
                status=status,
                content=result.text,
                error=result.error,
            )
        )
    return result, extra


def _started(ch: AgentChannel, call: ToolCall, tool: Tool | None, observed: bool) -> None:
    if observed:
        # The call's own frozen arguments: the event takes them as they are (no copy).
        ch.publish(
            ToolCallStarted(
                tool_call_id=call.id,
                name=call.name,
                arguments=call.arguments,
                title=tool.describe(call.arguments) if tool else None,
                kind=tool.kind if tool else "other",
            )
        )


async def _invoke(
    ch: AgentChannel, call: ToolCall, tool: Tool | None, conversation: Sequence[ChatMessage]
) -> tuple[str, str | None, tuple[ChatMessage, ...]]:
    """Approve and run one call: its content, its error and the messages it adds."""
    try:
        if tool is None:
            raise ToolError(f"unknown tool {call.name!r}")
        approver = ch.approver  # read per call: a producer may route approvals meanwhile
        if tool.needs_approval and approver is not None and not await approver(call):
            return "", REJECTED, ()
        arguments: dict[str, Any] = thaw(call.arguments)  # tools get plain dicts and lists
        kwargs = tool.validate(arguments)
        if tool.wants_conversation:
            kwargs["conversation"] = tuple(conversation)
        value = await tool.fn(**kwargs)
    except ToolError as e:
        return "", str(e), ()
    except Exception as e:
        return "", f"{type(e).__name__}: {e}", ()
    if isinstance(value, ToolOutput):
        return value.content, None, value.messages
    return render_result(value), None, ()


def interrupted_result(call_id: str, function: str | None) -> ChatMessageTool:
    """The result of a call that was in flight when the execution's process died (D4).

    Its tool is not idempotent, so it is not run again: it may or may not have taken
    effect, and the model reads that it was cut off (as :func:`cancelled_result` tells it
    of a call an operator stopped).
    """
    return ChatMessageTool(
        tool_call_id=call_id,
        function=function,
        content="Tool call interrupted by a restart.",
        error=INTERRUPTED,
    )
