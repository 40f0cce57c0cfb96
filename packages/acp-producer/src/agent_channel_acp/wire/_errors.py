"""Errors that travel on the wire: one class, one way to write them.

A :class:`WireError` is a JSON-RPC error answer: a code, the code's message, and ``data``
whose ``reason`` says in one line why (what a verb prints, see ``operator._connect``).
Modelled on the SDK's ``acp.RequestError``: a classmethod per JSON-RPC code, and one per
refusal the producer gives, so each refusal is worded once and both modes (stdio and
attach, before and after the listener's token check) say the same (see "Errors" in
``docs/acp-behaviour.md``). :meth:`WireError.frame` is the one place an error frame is
built; the transport, the listener and the verbs' client write what it returns. An error
answer read back (:mod:`._rpc`) is a :class:`WireError` too.

No ``acp`` import here (the verbs read errors without the SDK): the agent side raises the
SDK's own error built from one of these (``agent._handler.sdk_error``), since the SDK
answers only its own class.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from ._frames import ErrorBody, ErrorFrame, JsonObject, JsonValue

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
AUTH_REQUIRED = -32000
"""ACP's "authentication required"."""
RESOURCE_NOT_FOUND = -32002
"""ACP's "resource not found", which clients take as "no such session"."""
HOST_RESTARTED = -32010
"""Ours, in JSON-RPC's server-error range: a remote execution's host restarted (or broke
off) during the call, which may or may not have been done (see :meth:`WireError.host_restarted`)."""

_MESSAGES = {
    PARSE_ERROR: "Parse error",
    INVALID_REQUEST: "Invalid request",
    METHOD_NOT_FOUND: "Method not found",
    INVALID_PARAMS: "Invalid params",
    INTERNAL_ERROR: "Internal error",
    AUTH_REQUIRED: "Authentication required",
    RESOURCE_NOT_FOUND: "Resource not found",
    HOST_RESTARTED: "Host restarted",
}
"""Each code's message, worded as the SDK words it."""


class WireError(Exception):
    """A JSON-RPC error answer (see the module docstring); ``str()`` is its message."""

    def __init__(self, code: int, message: str, data: JsonValue = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    @classmethod
    def of(cls, code: int, reason: str, **data: JsonValue) -> WireError:
        """An error of ``code`` with the code's message and ``data.reason``."""
        return cls(code, _MESSAGES[code], {"reason": reason, **data})

    @classmethod
    def read(cls, body: Mapping[str, object]) -> WireError:
        """An error answer read back: what a server sent, with defaults for what it left out."""
        code, message = body.get("code"), body.get("message")
        return cls(
            code if isinstance(code, int) and not isinstance(code, bool) else INTERNAL_ERROR,
            message if isinstance(message, str) else "Error",
            cast("JsonValue", body.get("data")),
        )

    @property
    def reason(self) -> str | None:
        """``data.reason``: why, in one line (None when the answer gives none)."""
        data = self.data
        reason = data.get("reason") if isinstance(data, dict) else None
        return reason if isinstance(reason, str) else None

    def body(self) -> ErrorBody:
        """The ``error`` member of an answer."""
        return {"code": self.code, "message": self.message, "data": self.data}

    def frame(self, msg_id: int | str | None) -> bytes:
        """The error answer to request ``msg_id`` (None: a frame with no usable id), encoded
        as every frame is written, newline included: the one place one is built."""
        frame: ErrorFrame = {"jsonrpc": "2.0", "id": msg_id, "error": self.body()}
        return json.dumps(frame, separators=(",", ":"), default=str).encode() + b"\n"

    # -- by JSON-RPC code (the SDK's constructors) -----------------------------------------

    @classmethod
    def parse_error(cls, details: str) -> WireError:
        """A line that is not JSON (``details``: the decoder's words)."""
        return cls.of(PARSE_ERROR, "not JSON", details=details)

    @classmethod
    def invalid_request(cls, reason: str, **data: JsonValue) -> WireError:
        return cls.of(INVALID_REQUEST, reason, **data)

    @classmethod
    def method_not_found(cls, method: str) -> WireError:
        """No handler for ``method`` (``data`` as the SDK gives it)."""
        return cls(METHOD_NOT_FOUND, _MESSAGES[METHOD_NOT_FOUND], {"method": method})

    @classmethod
    def invalid_params(cls, reason: str) -> WireError:
        return cls.of(INVALID_PARAMS, reason)

    @classmethod
    def internal_error(cls, reason: str, **data: JsonValue) -> WireError:
        return cls.of(INTERNAL_ERROR, reason, **data)

    @classmethod
    def not_authenticated(cls, reason: str) -> WireError:
        """The listener's refusal before (or instead of) serving a connection (A2)."""
        return cls.of(AUTH_REQUIRED, reason)

    # -- the frame and the connection ------------------------------------------------------

    @classmethod
    def not_an_object(cls) -> WireError:
        return cls.invalid_request("a frame must be a JSON object")

    @classmethod
    def frame_too_large(cls, size: int, limit: int) -> WireError:
        reason = f"the frame is {size} bytes, over the {limit >> 20} MiB limit ({limit} bytes)"
        return cls.invalid_request(reason, limit=limit, size=size)

    @classmethod
    def too_many_requests(cls, limit: int) -> WireError:
        """A request while ``limit`` of the same connection wait for their answer."""
        reason = (
            f"{limit} requests of this connection already wait for their answer "
            "(the limit); send again once some are answered"
        )
        return cls.internal_error(reason)

    @classmethod
    def too_many_connections(cls, limit: int) -> WireError:
        return cls.internal_error(f"too many connections: this server serves {limit} at once")

    @classmethod
    def too_many_sessions(cls, limit: int) -> WireError:
        """A ``session/new`` while ``limit`` sessions of the connection are open."""
        reason = (
            f"{limit} sessions of this connection are open (the limit): "
            "end one with session/close first"
        )
        return cls.internal_error(reason, limit=limit)

    # -- sessions and prompts (both modes) -------------------------------------------------

    @classmethod
    def unknown_session(cls, session_id: str) -> WireError:
        return _not_found(session_id, "unknown session: this server holds no such session")

    @classmethod
    def forgotten_session(cls, session_id: str) -> WireError:
        """A session (an execution) that ended or was closed, and is no longer kept."""
        return _not_found(session_id, "it ended and is no longer kept")

    @classmethod
    def not_bound(cls, session_id: str) -> WireError:
        """Attach: a known execution this connection has no session of."""
        return _not_found(session_id, "not bound on this connection (session/load binds it)")

    @classmethod
    def ended(cls, session_id: str) -> WireError:
        """A prompt for an execution whose loop has ended (A16's words, in both modes)."""
        reason = "the execution is not currently attachable: its loop has ended"
        return cls.invalid_request(reason, sessionId=session_id)

    @classmethod
    def host_restarted(cls, session_id: str) -> WireError:
        """A prompt whose post broke off as the execution's host restarted (a Ray node
        died; ``HostRestarted``): the message may or may not have been delivered, and the
        execution goes on under the same id. The client reads the conversation to see."""
        reason = (
            "the execution's host restarted during the prompt: the message may or may not "
            "have been delivered; read the conversation (session/load, the messages verb) "
            "before sending it again"
        )
        return cls.of(HOST_RESTARTED, reason, sessionId=session_id)

    @classmethod
    def queue_full(cls, session_id: str, why: str) -> WireError:
        """A prompt the execution cannot take yet: ``why`` says which limit was met."""
        reason = f"the agent has not read the messages already queued ({why}); send again later"
        return cls.invalid_request(reason, sessionId=session_id)

    @classmethod
    def held_elsewhere(cls, session_id: str, why: str) -> WireError:
        """A session of a shared store that another live server runs (``why``: the store's
        words): it can be loaded once that server ends it or exits."""
        return cls.invalid_request(why, sessionId=session_id)

    @classmethod
    def observer(cls, session_id: str) -> WireError:
        """Attach: a prompt on an observe-only session (A14)."""
        reason = "this session observes only: it cannot prompt"
        return cls.invalid_request(reason, sessionId=session_id)

    @classmethod
    def not_read(cls, session_id: str) -> WireError:
        """Stdio: a prompt still queued when its execution ended (S15)."""
        return cls.invalid_request(
            "the agent finished before reading this prompt", sessionId=session_id
        )

    @classmethod
    def not_ours_to_end(cls, session_id: str) -> WireError:
        """Attach: ``_agent_channel/end`` for an execution its own program runs."""
        reason = "this execution was not started by the server: its program ends it"
        return cls.invalid_request(reason, sessionId=session_id)

    @classmethod
    def unknown_child(cls, session_id: str, child_id: str) -> WireError:
        """K12: no child of this id anywhere below the execution."""
        data: JsonObject = {
            "reason": f"execution {session_id!r} has no child {child_id!r}",
            "sessionId": session_id,
            "childId": child_id,
        }
        return WireError(RESOURCE_NOT_FOUND, _MESSAGES[RESOURCE_NOT_FOUND], data)

    @classmethod
    def child_gone(cls, session_id: str, child_id: str) -> WireError:
        """K11: a child known to have been there, whose execution has ended since."""
        reason = f"child {child_id!r} ended with its execution: its conversation is not kept"
        return cls.invalid_request(reason, sessionId=session_id, childId=child_id)

    @classmethod
    def empty_prompt(cls) -> WireError:
        return cls.invalid_params("the prompt is empty")

    # -- the agent -------------------------------------------------------------------------

    @classmethod
    def agent_failed(cls, details: str) -> WireError:
        return cls.internal_error("the agent failed", details=details)

    @classmethod
    def factory_failed(cls, details: str) -> WireError:
        return cls.internal_error("the agent factory failed", details=details)

    @classmethod
    def not_runnable(cls, details: str) -> WireError:
        """The factory's body cannot run (``details``: what it was instead)."""
        return cls.internal_error(
            "the agent factory did not return a runnable body", details=details
        )


def _not_found(session_id: str, why: str) -> WireError:
    data: JsonObject = {"reason": f"session {session_id!r}: {why}", "sessionId": session_id}
    return WireError(RESOURCE_NOT_FOUND, _MESSAGES[RESOURCE_NOT_FOUND], data)
