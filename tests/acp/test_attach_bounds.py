"""What a hub keeps per execution, whatever the number of tool calls (in process: a memory
bound is not visible on the wire; ``benchmarks/attach_backlog.py`` measures a client's)."""

from __future__ import annotations

import pytest
from agent_channel import ToolCallFinished, ToolCallStarted, open_channel
from agent_channel_acp import AttachServer
from agent_channel_acp._hub import CARDS_KEPT

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
        assert all(hub.cancel_tool_call(c) is False for c in newest)  # finished: nothing to stop
        await server.aclose()
