"""Attach mode, turns: prompts acknowledged at once and folded (A7), turn_state (A8), and
cancels during generation, during a tool, after a cancel and while parked (A9-A13)."""

from __future__ import annotations

import pytest
from attach_harness import bound, card_status, parked, serving, status, tool_ids, user_chunks

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("transport", "consumer")]


async def test_a7_prompt_answered_at_once_and_folded() -> None:
    async with serving("--input", "gate=g1 start") as server:
        c, sid = await bound(server)
        # the agent sits in a tool: both prompts are answered at once anyway
        assert (await c.prompt(sid, "say=one"))["stopReason"] == "end_turn"
        assert (await c.prompt(sid, "two"))["stopReason"] == "end_turn"
        assert user_chunks(c, sid) == []  # not folded in yet
        server.open("g1")
        await c.until(lambda: "one" in c.rec.texts(sid))
        echoed = user_chunks(c, sid)
        assert len(echoed) == 1  # folded into one message, echoed once
        assert echoed[0]["content"]["text"] == "say=one\n\ntwo"
        assert echoed[0]["_meta"]["agent_channel.source"] == "operator"


async def test_a8_turn_state_cancelled_then_started_and_final_state() -> None:
    async with serving("--input", "gate=g1 start") as server:
        c, sid = await bound(server)
        assert c.rec.states(sid) == ["started"]
        await c.cancel(sid)
        await c.until(lambda: c.rec.states(sid)[-1:] == ["cancelled"])
        # a client attaching now sees the last transition: cancelled
        late, lsid = await bound(server)
        assert late.rec.states(lsid) == ["cancelled"]
        await c.prompt(sid, "say=hi")
        await c.until(lambda: c.rec.states(sid)[-1:] == ["ended"])
        states = c.rec.states(sid)
        assert states == ["started", "cancelled", "started", "ended"]
        await c.ext("end", sessionId=sid)
        await c.until(lambda: c.rec.has(sid, "_agent_channel/session_ended"))
        frames = [f["method"] for f in c.rec.frames(sid)]
        end = frames.index("_agent_channel/session_ended")
        assert frames[end - 1] == "_agent_channel/turn_state"
        assert c.rec.states(sid)[-1] in ("ended", "cancelled")


async def test_a9_cancel_during_generation() -> None:
    async with serving() as server:
        c, sid = await bound(server)
        await c.prompt(sid, "hang")
        await c.until(lambda: "thinking about it" in c.rec.texts(sid))
        await c.cancel(sid)
        await c.until(lambda: c.rec.states(sid)[-1:] == ["cancelled"])
        updates = c.rec.updates_of(sid)
        marker = [
            i
            for i, u in enumerate(updates)
            if (u.get("_meta") or {}).get("agent_channel.modelCall", {}).get("status")
            == "cancelled"
        ]
        assert marker, "no completion marker for the cancelled model call"
        frames = c.rec.frames(sid)
        methods = [f["method"] for f in frames]
        marker_at = next(
            i
            for i, f in enumerate(frames)
            if (f["params"].get("update", {}).get("_meta") or {}).get("agent_channel.modelCall")
        )
        assert methods.index("_agent_channel/turn_state", marker_at) > marker_at
        conversation = (await c.ext("messages", sessionId=sid, all=True))["messages"]
        assert not any("thinking about it" in m["text"] for m in conversation)


async def test_a10_cancel_during_a_tool() -> None:
    async with serving("--input", "gates=a,b start") as server:
        c, sid = await bound(server)
        await c.until(lambda: tool_ids(c, sid))
        first = tool_ids(c, sid)[0]
        await c.cancel(sid)
        await c.until(lambda: card_status(c, sid, first) == "failed")
        await c.until(lambda: c.rec.states(sid)[-1:] == ["cancelled"])
        for tool_call_id in tool_ids(c, sid):
            assert card_status(c, sid, tool_call_id) == "failed"
        full = (await c.ext("messages", sessionId=sid, all=True, full=True))["messages"]
        calls = [t["id"] for m in full if m["role"] == "assistant" for t in m["tool_calls"]]
        results = {m["tool_call_id"]: m for m in full if m["role"] == "tool"}
        assert len(calls) == 2
        assert all(results[i]["error"] for i in calls)  # every call has a (cancelled) result


async def test_a11_no_model_call_after_cancel_until_a_message() -> None:
    async with serving("--input", "gate=g1 start") as server:
        c, sid = await bound(server)
        await c.cancel(sid)
        await c.until(lambda: c.rec.states(sid)[-1:] == ["cancelled"])
        s = await parked(c)
        before = c.rec.texts(sid)
        assert s["turnState"] == "cancelled"
        assert c.rec.texts(sid) == before  # nothing was generated meanwhile
        await c.prompt(sid, "say=hello")
        await c.until(lambda: c.rec.texts(sid).endswith("hello"))


@pytest.mark.parametrize("order", ["prompt-then-cancel", "cancel-then-prompt"])
async def test_a11_stop_then_redirect_in_either_order(order: str) -> None:
    async with serving("--input", "gate=g1 start") as server:
        c, sid = await bound(server)
        if order == "prompt-then-cancel":
            await c.prompt(sid, "say=redirected")
            await c.cancel(sid)
        else:
            await c.cancel(sid)
            await c.until(lambda: c.rec.states(sid)[-1:] == ["cancelled"])
            await c.prompt(sid, "say=redirected")
        await c.until(lambda: c.rec.texts(sid).endswith("redirected"))
        assert "cancelled" in c.rec.states(sid)


async def test_a12_cancel_while_parked_does_not_wake_it() -> None:
    async with serving("--input", "say=ready") as server:
        c, sid = await bound(server)
        await c.until(lambda: c.rec.states(sid)[-1:] == ["ended"])
        await parked(c)
        await c.cancel(sid)
        s = await status(c)  # the round trip follows the cancel's handling
        assert s["status"] == "waiting for operator" and s["turnState"] == "ended"
        await c.prompt(sid, "say=woken")
        await c.until(lambda: c.rec.texts(sid).endswith("woken"))
        assert "cancelled" not in c.rec.states(sid)


async def test_a13_cancel_with_no_turn_running_is_not_carried_over() -> None:
    async with serving("--input", "say=ready") as server:
        c, sid = await bound(server)
        await parked(c)
        for _ in range(3):
            await c.cancel(sid)
        await status(c)
        await c.prompt(sid, "gate=g2 work")
        await c.until(lambda: tool_ids(c, sid))
        server.open("g2")
        await c.until(lambda: c.rec.texts(sid).endswith("(None)"))
        assert card_status(c, sid, tool_ids(c, sid)[-1]) == "completed"
        assert "cancelled" not in c.rec.states(sid)
