"""Asking a tool approval of exactly one driver, moving on when it leaves (A20, S10).

Exists apart from the hub because the rule is a small loop of its own: wait until some
session can drive, ask it (after everything sent before, the model's narration and the
call's card), and when it leaves before answering, ask the next one.
"""

from __future__ import annotations

from acp.schema import AllowedOutcome, PermissionOption, ToolCallUpdate
from agent_channel import ChildToolCall, ToolCall, thaw

from ._cards import ToolCards, child_meta
from ._fanout import Fanout

ALLOW = "allow_once"
REJECT = "reject_once"
OPTIONS = [
    PermissionOption(option_id=ALLOW, name="Allow", kind="allow_once"),
    PermissionOption(option_id=REJECT, name="Reject", kind="reject_once"),
]


async def ask_driver(fanout: Fanout, request: ToolCallUpdate) -> bool:
    """Whether a driver allowed ``request``; waits for one while there is none."""
    while True:
        driver = fanout.driver()
        if driver is None:  # nobody can answer yet: wait for a driver to bind
            fanout.drivers.clear()
            await fanout.drivers.wait()
            continue
        fanout.flush()  # the card (and the model's narration) reach the driver first
        outcome = await driver.ask_permission(request, OPTIONS)
        if outcome is None:  # that driver left: the request moves on
            continue
        return isinstance(outcome, AllowedOutcome) and outcome.option_id == ALLOW


async def ask_for(call: ToolCall, cards: ToolCards, fanout: Fanout) -> bool:
    """Ask a driver about ``call`` as a pending card; its card learns the answer."""
    title, kind = cards.asked(call)
    request = ToolCallUpdate(
        tool_call_id=call.id,
        title=title,
        kind=kind,
        status="pending",
        raw_input=thaw(call.arguments),
        field_meta=child_meta(call),
    )
    allowed: bool | None = None
    try:
        allowed = await ask_driver(fanout, request)
        if allowed:
            cards.allowed(call.id)
        return allowed
    finally:
        if isinstance(call, ChildToolCall):  # K9: its tool events stay in the child
            cards.answered_in_child(call, allowed)
