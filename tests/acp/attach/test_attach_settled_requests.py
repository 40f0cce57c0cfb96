"""Requests the client holds are closed when the server stops waiting for them (A20, Q4):
a ``session/request_permission`` the driver has not answered gets a ``$/cancel_request``
naming it when a cancel, a child's stop or an answer from elsewhere settles it, and its
card ends with what really happened.

SDK clients on a real attach server subprocess (``attach_server.py``); each driver holds
every permission request (never answers), so only the server can settle it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from attach_harness import Client, serving

pytestmark = pytest.mark.anyio


async def hold(request: dict[str, Any]) -> Any:
    await asyncio.Event().wait()  # a person who never clicks


def asked(c: Client) -> list[Any]:
    """The ids of the permission requests the client was sent."""
    return [f["id"] for f in c.rec.wire if f.get("method") == "session/request_permission"]


def closed(c: Client) -> list[Any]:
    """The request ids the server's ``$/cancel_request`` notifications named."""
    return [f["params"]["requestId"] for f in c.rec.wire if f.get("method") == "$/cancel_request"]


def statuses(c: Client, sid: str, tool_call_id: str) -> list[str]:
    return [
        u["status"]
        for u in c.rec.updates_of(sid)
        if u.get("toolCallId") == tool_call_id and "status" in u
    ]


async def test_s10_a_cancel_closes_the_drivers_pending_permission_request() -> None:
    async with serving("--approve", "--input", "quick task") as server:
        c = await server.connect()
        with c.rec.answering(hold):
            sid = await c.new()
            await c.until(lambda: asked(c))
            (request,) = [f for f in c.rec.wire if f.get("method") == "session/request_permission"]
            call_id = request["params"]["toolCall"]["toolCallId"]
            assert (await c.ext("cancel_turn", sessionId=sid))["cancelled"] is True
            await c.until(lambda: closed(c))
            assert closed(c) == asked(c)
            await c.until(lambda: statuses(c, sid, call_id)[-1:] == ["failed"])


async def test_k12_stopping_a_child_whose_approval_is_held_closes_the_drivers_request() -> None:
    async with serving(
        "--agent", "agents:orchestrator_agent", "--approve", "--input", "ask alpha"
    ) as server:
        c = await server.connect()
        with c.rec.answering(hold):
            sid = await c.new()
            await c.until(lambda: asked(c))
            (request,) = [f for f in c.rec.wire if f.get("method") == "session/request_permission"]
            call = request["params"]["toolCall"]
            alpha = call["_meta"]["agent_channel.child"]["id"]
            stopped = await c.ext("stop_child", sessionId=sid, childId=alpha)
            assert stopped == {"stopped": True, "status": "ended"}
            await c.until(lambda: closed(c))
            assert closed(c) == asked(c)
            await c.until(lambda: statuses(c, sid, call["toolCallId"])[-1:] == ["failed"])


async def test_q4_an_answer_from_elsewhere_closes_the_drivers_request_and_completes_its_card() -> (
    None
):
    async with serving("--agent", "question_agents:asking_agent", "--input", "choose") as server:
        (sid,) = server.ids
        driver = await server.connect()
        with driver.rec.answering(hold):
            await driver.new()
            await driver.until(lambda: asked(driver))
            (request,) = [
                f for f in driver.rec.wire if f.get("method") == "session/request_permission"
            ]
            card = request["params"]["toolCall"]["toolCallId"]
            operator = await server.connect()  # not bound: as the answer verb is
            done = await operator.ext("answer", sessionId=sid, text="blue")
            assert done["answered"] is True
            await driver.until(lambda: "answer: blue" in driver.rec.texts(sid))
            await driver.until(lambda: closed(driver))
            assert closed(driver) == asked(driver)
            # answered (from elsewhere), not failed
            await driver.until(lambda: statuses(driver, sid, card)[-1:] == ["completed"])
