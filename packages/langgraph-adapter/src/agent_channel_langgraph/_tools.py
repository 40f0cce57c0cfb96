"""Tool calls seen and stopped from outside, and ``ask_user``.

The adapter runs a copy of the author's graph whose ``ToolNode`` nodes are copies of the
author's own with an ``awrap_tool_call`` of the adapter's (LangGraph's own interception
seam) around the author's wrapper, if any; the graph, its nodes and its tools are never
changed. Around each call it opens a keyed region (``ref.cancel_region(call id)`` stops
that call alone), publishes the call's start and end, and asks the execution's approver
first when one is routed (``--approve``): around execution, as the other adapters do, so
an operator answers within the step.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import Any

import agent_channel
import anyio
from agent_channel import AgentChannel, ToolCall, ToolCallFinished, ToolCallStarted
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.prebuilt import ToolNode

REJECTED = "Tool call rejected by the operator."
CANCELLED_ALONE = "Tool call cancelled by the operator."
ASKING = "ask_user"
"""The question tool's name: asking needs no approval (it has no effect outside the run)."""

Execute = Callable[[Any], Awaitable[Any]]


def tool_nodes(graph: Any) -> list[str]:
    """The names of the graph's ``ToolNode`` nodes: the step after which operators'
    messages are handed to the model (their results come first)."""
    return [name for name, node in graph.nodes.items() if isinstance(node.bound, ToolNode)]


def channelled(graph: Any, ch: AgentChannel, **update: Any) -> Any:
    """A copy of ``graph`` whose tool nodes run each call as a region with its events and
    approval (``update``: more of the copy's attributes, its checkpointer)."""
    nodes: dict[str, Any] = dict(graph.nodes)
    for name, node in graph.nodes.items():
        if not isinstance(node.bound, ToolNode):
            continue
        bound: Any = node.bound
        # ToolNode's own interception seam, set on a copy (its constructor's awrap_tool_call;
        # the attributes are pinned with the supported range). A sync-only wrapper of the
        # author's is left as it is (its calls have no cards and no approval).
        theirs, sync = bound._awrap_tool_call, bound._wrap_tool_call  # pyright: ignore[reportPrivateUsage]
        if theirs is None and sync is not None:
            continue
        mine: Any = copy.copy(bound)
        mine._awrap_tool_call = _wrapper(ch, theirs)  # pyright: ignore[reportPrivateUsage]
        mine.func, mine.afunc = mine._func, mine._afunc  # pyright: ignore[reportPrivateUsage]
        nodes[name] = node.copy({"bound": mine})
    return graph.copy(update={"nodes": nodes, **update})


def _wrapper(ch: AgentChannel, theirs: Any) -> Any:
    async def awrap(request: Any, execute: Execute) -> Any:
        call = request.tool_call
        tc = ToolCall(id=str(call.get("id") or ""), name=call["name"], arguments=dict(call["args"]))
        observed = ch.observed
        described: BaseTool | None = request.tool
        try:
            with ch.region(tc.id) as region:
                if observed:  # from inside the region: a client seeing it can stop it
                    about = described.description if described is not None else ""
                    ch.publish(
                        ToolCallStarted(
                            tool_call_id=tc.id,
                            name=tc.name,
                            arguments=tc.arguments,
                            title=about.splitlines()[0] if about else None,
                            kind="think" if tc.name == ASKING else "other",
                        )
                    )
                approver = ch.approver  # read per call: a producer may route one meanwhile
                if tc.name != ASKING and approver is not None and not await approver(tc):
                    _finished(ch, tc, "failed", REJECTED, REJECTED)
                    return _cut(tc, REJECTED)
                result = await (theirs(request, execute) if theirs else execute(request))
        except BaseException as e:
            if observed:
                cancelled = isinstance(e, anyio.get_cancelled_exc_class())
                status = "cancelled" if cancelled else "failed"
                _finished(ch, tc, status, "", None if cancelled else f"{type(e).__name__}: {e}")
            raise
        if region.cancelled:  # stopped alone: the step goes on, the model reads why
            _finished(ch, tc, "cancelled", CANCELLED_ALONE, CANCELLED_ALONE)
            return _cut(tc, CANCELLED_ALONE)
        if observed:
            if isinstance(result, ToolMessage):
                error = result.text if result.status == "error" else None
                _finished(ch, tc, "failed" if error else "completed", result.text, error)
            else:  # a Command: its own updates say what it did
                _finished(ch, tc, "completed", "", None)
        return result

    return awrap


def _cut(tc: ToolCall, text: str) -> ToolMessage:
    return ToolMessage(content=text, tool_call_id=tc.id, name=tc.name, status="error")


def _finished(ch: AgentChannel, tc: ToolCall, status: Any, content: str, error: str | None) -> None:
    if ch.observed:
        ch.publish(
            ToolCallFinished(
                tool_call_id=tc.id, name=tc.name, status=status, content=content, error=error
            )
        )


@tool(ASKING)
async def ask_user(question: str, choices: list[str] | None = None) -> str:
    """Ask the person operating this run a question and wait for the answer. Use it for a
    decision or a fact only they have, never for what you can look up.

    Args:
        question: The question, complete and short.
        choices: The answers to choose from, when there are a few.
    """
    answer = await agent_channel.ask_user(question, tuple(choices or ()))
    return answer.for_model()
