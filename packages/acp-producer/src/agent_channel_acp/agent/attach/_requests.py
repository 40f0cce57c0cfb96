"""Attach mode's extension requests: list, messages, queue, withdraw, cancel_tool_call,
cancel_turn, end (A19, A22-A26), children, steer_child, stop_child (K11, K12), answer (Q4).

Exists apart from the connection handler so each request is one small function of the
params and of what it reads (the server's executions, this connection's sessions), and
the table of them is the one list of ``_agent_channel/…`` requests we answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from acp import RequestError
from agent_channel import ChatMessage, ChatMessageAssistant

from ...stream._hub import Hub
from ...wire._errors import WireError
from .._children import children, steer_child, stop_child, string
from .._handler import sdk_error

log = logging.getLogger("agent_channel_acp")

TAIL = 20
"""Messages ``_agent_channel/messages`` returns by default (A19)."""
SUMMARY_TEXT = 200
"""Characters of a message's text in a summary."""

Params = dict[str, Any]
Result = dict[str, Any]


class Asker(Protocol):
    """The connection a request comes from."""

    name: str

    def target(self, params: Params) -> Hub:
        """The execution ``params["sessionId"]`` names (-32002 when there is none)."""
        ...

    def known(self, session_id: str) -> bool:
        """Whether the id names an execution (live or forgotten) or a session here."""
        ...

    def executions(self) -> list[dict[str, Any]]: ...

    def about(self) -> dict[str, Any]:
        """The server itself (``ServerAbout``: pid, start, store)."""
        ...


async def _list(asker: Asker, params: Params) -> Result:
    return {"executions": asker.executions(), "server": asker.about()}


async def _messages(asker: Asker, params: Params) -> Result:
    hub = asker.target(params)
    every = params.get("all", False)
    full = params.get("full", False)
    tail = params.get("tail")
    if not isinstance(every, bool) or not isinstance(full, bool):
        raise sdk_error(WireError.invalid_params("all and full must be booleans"))
    if tail is not None and every:
        raise sdk_error(WireError.invalid_params("all and tail are mutually exclusive"))
    if tail is None:
        tail = TAIL
    if isinstance(tail, bool) or not isinstance(tail, int) or tail < 1:
        raise sdk_error(WireError.invalid_params("tail must be an integer of at least 1"))
    child_id = params.get("childId")
    if child_id is not None:
        if not isinstance(child_id, str) or not child_id:
            raise sdk_error(WireError.invalid_params("childId must be a non-empty string"))
        try:
            messages = hub.child_requests.messages(child_id, None)
        except WireError as e:
            raise sdk_error(e) from None
        status = next((c["status"] for c in hub.children() if c["id"] == child_id), "?")
        picked = messages if every else messages[-tail:]
        return {
            "as_of": datetime.now(UTC).isoformat(),
            "sessionId": hub.id,
            "childId": child_id,
            "status": status,
            "count": len(messages),
            "messages": [m.model_dump(mode="json") if full else _summary(m) for m in picked],
        }
    messages = hub.messages()
    picked = messages if every else messages[-tail:]
    return {
        "as_of": datetime.now(UTC).isoformat(),
        "sessionId": hub.id,
        "status": hub.status,
        "count": len(messages),
        "messages": [msg.model_dump(mode="json") if full else _summary(msg) for msg in picked],
    }


async def _queue(asker: Asker, params: Params) -> Result:
    hub = asker.target(params)
    return {"sessionId": hub.id, "messages": [q.as_json() for q in hub.queue.values()]}


async def _withdraw(asker: Asker, params: Params) -> Result:
    hub = asker.target(params)
    return {"withdrawn": await hub.withdraw(string(params, "messageId"))}


async def _cancel_tool_call(asker: Asker, params: Params) -> Result:
    session_id = string(params, "sessionId")
    tool_call_id = string(params, "toolCallId")
    if not asker.known(session_id):
        raise sdk_error(WireError.unknown_session(session_id))
    try:
        hub = asker.target(params)
    except RequestError:
        return {"cancelled": False, "reason": "gone"}
    if await hub.cancel_tool_call(tool_call_id):
        return {"cancelled": True}
    return {"cancelled": False, "reason": hub.tool_call_state(tool_call_id)}


async def _cancel_turn(asker: Asker, params: Params) -> Result:
    """What ``session/cancel`` does, for a client that must know whether a turn was
    running (the ``cancel`` verb): ``cancelled`` false, with the execution's status as
    the reason, when there was none to stop."""
    hub = asker.target(params)
    if await hub.interrupt():
        return {"cancelled": True}
    return {"cancelled": False, "reason": hub.status}


async def _end(asker: Asker, params: Params) -> Result:
    hub = asker.target(params)
    reason = params.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise sdk_error(WireError.invalid_params("reason must be a string"))
    if hub.running:
        if hub.ending is None:
            raise sdk_error(WireError.not_ours_to_end(hub.id))
        log.info("execution %s: ended by %s (%s)", hub.id, asker.name, reason or "no reason")
        hub.ending()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5.0):
                await hub.ended.wait()
    return {}


async def _children(asker: Asker, params: Params) -> Result:
    return children(asker.target(params))


async def _steer_child(asker: Asker, params: Params) -> Result:
    return await steer_child(asker.target(params), params)


async def _stop_child(asker: Asker, params: Params) -> Result:
    return await stop_child(asker.target(params), params)


async def _answer(asker: Asker, params: Params) -> Result:
    """Answer the execution's oldest pending question (Q4: the ``answer`` verb)."""
    hub = asker.target(params)
    question_id = hub.questions.answer(string(params, "text"))
    if question_id is None:
        return {"answered": False, "reason": "no question is waiting"}
    return {"answered": True, "questionId": question_id}


REQUESTS: dict[str, Callable[[Asker, Params], Awaitable[Result]]] = {
    "agent_channel/list": _list,
    "agent_channel/messages": _messages,
    "agent_channel/queue": _queue,
    "agent_channel/withdraw": _withdraw,
    "agent_channel/cancel_tool_call": _cancel_tool_call,
    "agent_channel/cancel_turn": _cancel_turn,
    "agent_channel/end": _end,
    "agent_channel/children": _children,
    "agent_channel/steer_child": _steer_child,
    "agent_channel/stop_child": _stop_child,
    "agent_channel/answer": _answer,
}
"""The extension requests attach mode answers, by the name the SDK hands over."""


def _summary(msg: ChatMessage) -> dict[str, Any]:
    text = msg.text
    out: dict[str, Any] = {
        "id": msg.id,
        "role": msg.role,
        "text": text if len(text) <= SUMMARY_TEXT else text[: SUMMARY_TEXT - 1] + "…",
    }
    if isinstance(msg, ChatMessageAssistant) and msg.tool_calls:
        out["toolCalls"] = [c.name for c in msg.tool_calls]
        out["toolCallIds"] = [c.id for c in msg.tool_calls]
    source = getattr(msg, "source", None)
    if source:
        out["source"] = source
    tool_call_id = getattr(msg, "tool_call_id", None)
    if tool_call_id:
        out["toolCallId"] = tool_call_id
    return out
