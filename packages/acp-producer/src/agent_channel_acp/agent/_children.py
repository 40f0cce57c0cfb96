"""The children requests both modes answer (K11, K12): read the tree, steer or stop a child.

A child is reached only through its top-level execution's hub (K12: ACP never holds a
child's ref); attach mode finds the hub by the session a connection names, stdio by its
own session. Each request is a function of that hub and the params, so the two servers
answer the same requests with the same errors.
"""

from __future__ import annotations

from typing import Any

from ..stream._hub import Hub
from ..wire._errors import WireError
from ._handler import sdk_error

Params = dict[str, Any]
Result = dict[str, Any]


def string(params: Params, key: str) -> str:
    """The non-empty string ``params[key]``, else an invalid-params error naming it."""
    value = params.get(key)
    if not isinstance(value, str) or not value:
        raise sdk_error(WireError.invalid_params(f"{key} must be a non-empty string"))
    return value


def children(hub: Hub) -> Result:
    """K11: the tree below the execution (also pushed as ``_agent_channel/children``)."""
    return {"sessionId": hub.id, "children": hub.children()}


async def steer_child(hub: Hub, params: Params) -> Result:
    """K12: a steer from the operator, through the top-level ref; answers its outcome."""
    child_id, text = string(params, "childId"), string(params, "text")
    try:
        return dict(await hub.child_requests.steer(child_id, text))
    except WireError as e:
        raise sdk_error(e) from None


async def stop_child(hub: Hub, params: Params) -> Result:
    """K12: stop one child (its parent's model is told at its next boundary)."""
    child_id = string(params, "childId")
    reason = params.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise sdk_error(WireError.invalid_params("reason must be a string"))
    try:
        return dict(await hub.child_requests.stop(child_id, reason))
    except WireError as e:
        raise sdk_error(e) from None
