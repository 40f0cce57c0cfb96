"""What both ACP handlers (stdio's ``AcpServer`` and attach's per-connection handler) share.

Exists so the two modes answer alike without importing each other: the ``initialize``
answer (S1), the parameter names a ``_meta`` key must not replace, a prompt's text, and
the errors a request can get (see "Errors" in ``docs/acp-behaviour.md``).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

from acp import PROTOCOL_VERSION, RequestError
from acp.schema import (
    AcpMcpServer,
    AgentCapabilities,
    HttpMcpServer,
    Implementation,
    InitializeResponse,
    McpServerStdio,
    PromptCapabilities,
    SessionCapabilities,
    SessionCloseCapabilities,
    SseMcpServer,
)
from agent_channel import ChannelFull, Content

from .._version import __version__
from ..stream import _mapping as m

McpServer = HttpMcpServer | SseMcpServer | AcpMcpServer | McpServerStdio
"""An MCP server a client offers in ``session/new`` / ``session/load`` (we use none)."""

METHODS = {
    "initialize": "initialize",
    "session/new": "new_session",
    "session/load": "load_session",
    "session/prompt": "prompt",
    "session/cancel": "cancel",
    "session/close": "close_session",
}
"""The ACP methods both handlers implement, by the handler's attribute name."""


def shadowed_names(handler: object) -> dict[str, frozenset[str]]:
    """Per method, the handler's parameter names that a ``_meta`` key must not replace."""
    out: dict[str, frozenset[str]] = {}
    for method, attr in METHODS.items():
        params = inspect.signature(getattr(handler, attr)).parameters
        names = {n for n, p in params.items() if p.kind is not inspect.Parameter.VAR_KEYWORD}
        out[method] = frozenset(names | {"self"})
    return out


def initialize_response(protocol_version: int) -> InitializeResponse:
    """S1: what we implement, in both modes."""
    return InitializeResponse(
        protocol_version=min(protocol_version, PROTOCOL_VERSION)
        if protocol_version >= 1
        else PROTOCOL_VERSION,
        agent_capabilities=AgentCapabilities(
            load_session=True,
            prompt_capabilities=PromptCapabilities(image=True, audio=False, embedded_context=True),
            session_capabilities=SessionCapabilities(close=SessionCloseCapabilities()),
        ),
        agent_info=Implementation(
            name="agent-channel-acp", title="agent-channel", version=__version__
        ),
        auth_methods=[],
    )


def prompt_content(prompt: Sequence[m.PromptBlock]) -> str | tuple[Content, ...]:
    """A ``session/prompt``'s blocks as a user message's content (-32602 when empty)."""
    if not prompt:
        raise RequestError.invalid_params({"reason": "the prompt is empty"})
    return m.prompt_content(prompt)


def not_found(session_id: str, why: str) -> RequestError:
    """ACP's "resource not found" (-32002), which clients treat as "no such session"."""
    data = {"reason": f"session {session_id!r}: {why}", "sessionId": session_id}
    return RequestError(-32002, "Resource not found", data)


def queue_full(session_id: str, error: ChannelFull) -> RequestError:
    """A prompt the execution cannot take yet: too many wait unread (its own limit)."""
    reason = f"the agent has not read the messages already queued ({error}); send again later"
    return RequestError.invalid_request({"reason": reason, "sessionId": session_id})


def not_attachable(session_id: str) -> RequestError:
    return RequestError.invalid_request(
        {
            "reason": "the execution is not currently attachable: its loop has ended",
            "sessionId": session_id,
        }
    )
