"""What a hub keeps per execution, whatever the number of tool calls (in process: a memory
bound is not visible on the wire; ``benchmarks/attach_backlog.py`` measures a client's), and
how many operator messages it holds unread (over a real socket)."""

from __future__ import annotations

import pytest
from acp import RequestError
from agent_channel import ToolCallFinished, ToolCallStarted, open_channel
from agent_channel_acp import AttachServer
from agent_channel_acp.stream._cards import CARDS_KEPT
from agent_channel_acp.stream._queue import QUEUE_LIMIT
from attach_harness import bound, parked, serving, user_chunks

pytestmark = pytest.mark.anyio

RUNNING = 3


async def test_hub_card_maps_hold_the_calls_in_flight_and_the_last_finished_ones() -> None:
    server = AttachServer()
    async with open_channel() as ch:
        execution = server.add(ch.ref(), title="many tools")
        hub = server.hub(execution)
        for i in range(3 * CARDS_KEPT):
            ch.publish(ToolCallStarted(tool_call_id=f"c{i}", name="t", arguments={}))
            if i < RUNNING:
                continue  # the first few never finish
            ch.publish(ToolCallFinished(tool_call_id=f"c{i}", name="t", status="completed"))
        assert len(hub.cards) == len(hub.card_seq) == CARDS_KEPT + RUNNING
        running = {f"c{i}" for i in range(RUNNING)}
        newest = {f"c{i}" for i in range(3 * CARDS_KEPT - CARDS_KEPT, 3 * CARDS_KEPT)}
        assert set(hub.cards) == running | newest  # the oldest finished ones went first
        assert [await hub.cancel_tool_call(c) for c in newest] == [False] * len(newest)  # finished
        await server.aclose()


async def test_a_prompt_past_the_queue_limit_is_refused_with_a_reason_and_loses_nothing() -> None:
    """Every queue update lists the whole queue, so an execution holds at most QUEUE_LIMIT
    operator messages unread: the next prompt gets a JSON-RPC error saying why, the queued
    ones all reach the agent, and prompts are taken again once it read them."""
    async with serving("--input", "gate=g1 start") as server:
        c, sid = await bound(server)  # the agent sits in a tool: nothing is read meanwhile
        other, _ = await bound(server)
        for i in range(QUEUE_LIMIT):
            assert (await c.prompt(sid, f"m{i}"))["stopReason"] == "end_turn"
        with pytest.raises(RequestError) as refused:
            await c.prompt(sid, "one too many")
        assert refused.value.code == -32600
        assert "256 operator messages already wait unread" in refused.value.data["reason"]
        assert len((await other.ext("queue", sessionId=sid))["messages"]) == QUEUE_LIMIT
        server.open("g1")
        await c.until(lambda: user_chunks(c, sid))
        (folded,) = user_chunks(c, sid)
        assert folded["content"]["text"] == "\n\n".join(f"m{i}" for i in range(QUEUE_LIMIT))
        await parked(c)
        assert (await c.prompt(sid, "say=again"))["stopReason"] == "end_turn"
        await c.until(lambda: "again" in c.rec.texts(sid))
