"""Asking a tool approval of exactly one driver, moving on when it leaves (A20, S10).

Exists apart from the hub because the rule is a small loop of its own: wait until some
session can drive, ask it (after everything sent before, the model's narration and the
call's card), and when it leaves before answering, ask the next one.
"""

from __future__ import annotations

from acp.schema import AllowedOutcome, PermissionOption, ToolCallUpdate

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
