"""What both ACP handlers (stdio's ``AcpServer`` and attach's per-connection handler) share.

Exists so the two modes answer alike without importing each other: the ``initialize``
answer (S1), the parameter names a ``_meta`` key must not replace, a prompt's text, and
the errors a request can get (see "Errors" in ``docs/acp-behaviour.md``): each is a
``wire._errors.WireError``, raised to the SDK as its own error by :func:`sdk_error`, and a
prompt the core refuses is mapped to one by :func:`refused`, the same in both modes.
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
    SessionListCapabilities,
    SessionResumeCapabilities,
    SseMcpServer,
)
from agent_channel import ChannelClosed, ChannelFull, Content

from .._version import __version__
from ..stream import _mapping as m
from ..wire._errors import WireError

McpServer = HttpMcpServer | SseMcpServer | AcpMcpServer | McpServerStdio
"""An MCP server a client offers in ``session/new`` / ``session/load`` (we use none)."""

METHODS = {
    "initialize": "initialize",
    "session/new": "new_session",
    "session/load": "load_session",
    "session/prompt": "prompt",
    "session/cancel": "cancel",
    "session/close": "close_session",
    "session/list": "list_sessions",
    "session/resume": "resume_session",
}
"""The ACP methods both handlers implement, by the handler's attribute name (``session/close``
and ``session/resume`` are routed only with ``use_unstable_protocol=True``, as both modes
create their connections)."""


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
            # resume and close answer only because our connections route the SDK's
            # unstable methods (``use_unstable_protocol=True``); list is routed anyway (D5)
            session_capabilities=SessionCapabilities(
                close=SessionCloseCapabilities(),
                list=SessionListCapabilities(),
                resume=SessionResumeCapabilities(),
            ),
        ),
        agent_info=Implementation(
            name="agent-channel-acp", title="agent-channel", version=__version__
        ),
        auth_methods=[],
    )


def sdk_error(error: WireError) -> RequestError:
    """The SDK's error for a wire error: the one place the agent side converts (the SDK
    answers only its own class; anything else becomes -32603 and a logged traceback)."""
    return RequestError(error.code, error.message, error.data)


def refused(session_id: str, error: ChannelClosed | ChannelFull) -> RequestError:
    """A prompt the execution did not take (``ref.post`` raised), as both modes answer it:
    the execution has ended, or too many messages wait unread (the limit says which)."""
    if isinstance(error, ChannelFull):
        return sdk_error(WireError.queue_full(session_id, str(error)))
    return sdk_error(WireError.ended(session_id))


def prompt_content(prompt: Sequence[m.PromptBlock]) -> str | tuple[Content, ...]:
    """A ``session/prompt``'s blocks as a user message's content (-32602 when empty)."""
    if not prompt:
        raise sdk_error(WireError.empty_prompt())
    try:
        return m.prompt_content(prompt)
    except WireError as e:  # content we did not advertise (audio)
        raise sdk_error(e) from None
