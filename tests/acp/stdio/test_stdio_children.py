"""Children in stdio mode (K11): the orchestrator's children show as cards in its session,
and ``_agent_channel/children`` reads the tree, as in attach mode."""

from __future__ import annotations

import asyncio
from typing import Any

import acp
import pytest
from conftest import spawn

pytestmark = pytest.mark.anyio


async def test_k11_stdio_shows_a_card_per_child_and_answers_the_children_read() -> None:
    async with spawn("--agent", "agents:orchestrator_agent") as agent:
        sid = await agent.session()
        answer = await agent.conn.prompt(session_id=sid, prompt=[acp.text_block("spawn alpha")])
        assert answer.stop_reason == "end_turn"

        def alpha_card() -> list[dict[str, Any]]:
            return [
                u
                for u in agent.rec.updates[sid]
                if str(u.get("toolCallId", "")).startswith("child-")
            ]

        await agent.rec.wait_until(alpha_card)
        card = alpha_card()[0]
        # titled as a child agent on its task; its parent is the session's execution
        assert (card["title"], card["kind"]) == ("Child agent alpha: alpha", "other")
        assert card["rawInput"] == {"name": "alpha", "input": "alpha", "parentId": sid}
        listed = await agent.request("_agent_channel/children", {"sessionId": sid})
        assert listed["sessionId"] == sid
        assert [c["name"] for c in listed["children"]] == ["alpha"]
        with pytest.raises(acp.RequestError) as e:
            await agent.request("_agent_channel/children", {"sessionId": "nope"})
        assert e.value.code == -32002


async def test_k12_stdio_stops_a_child_whose_approval_is_held_and_closes_the_clients_request() -> (
    None
):
    """K12 over stdio, as attach mode: ``_agent_channel/stop_child`` stops the child the
    client's session names; the child's ``session/request_permission`` the client still
    holds is closed by ``$/cancel_request`` naming it, and the child's card ends. Bad
    params and an unknown child are precise errors; the session goes on."""
    async with spawn("--agent", "agents:orchestrator_agent", "--approve") as agent:
        never = asyncio.Event()

        async def hold(request: dict[str, Any]) -> Any:
            await never.wait()  # a person who never clicks

        def asked() -> list[dict[str, Any]]:
            wire = agent.rec.wire
            return [f for f in wire if f.get("method") == "session/request_permission"]

        def closed() -> list[Any]:
            wire = agent.rec.wire
            return [f["params"]["requestId"] for f in wire if f.get("method") == "$/cancel_request"]

        try:
            with agent.rec.answering(hold):
                sid = await agent.session()
                with pytest.raises(acp.RequestError) as e:  # no prompt yet: no child
                    await agent.request(
                        "_agent_channel/stop_child", {"sessionId": sid, "childId": "nope"}
                    )
                assert e.value.code == -32002  # not found, as for any unknown child
                answer = await agent.conn.prompt(
                    session_id=sid, prompt=[acp.text_block("ask alpha")]
                )
                assert answer.stop_reason == "end_turn"
                await agent.rec.wait_until(asked)
                (request,) = asked()
                call = request["params"]["toolCall"]
                alpha = call["_meta"]["agent_channel.child"]["id"]
                for bad in ({"sessionId": sid}, {"sessionId": sid, "childId": 7}):
                    with pytest.raises(acp.RequestError) as e:
                        await agent.request("_agent_channel/stop_child", bad)
                    assert e.value.code == -32602
                with pytest.raises(acp.RequestError) as e:
                    await agent.request(
                        "_agent_channel/stop_child", {"sessionId": sid, "childId": "nope"}
                    )
                assert e.value.code == -32002
                assert "nope" in str(e.value.data)
                stopped = await agent.request(
                    "_agent_channel/stop_child", {"sessionId": sid, "childId": alpha}
                )
                assert stopped == {"stopped": True, "status": "ended"}
                await agent.rec.wait_until(closed)
                assert closed() == [request["id"]]

                def statuses() -> list[str]:
                    return [
                        u["status"]
                        for u in agent.rec.updates[sid]
                        if u.get("toolCallId") == call["toolCallId"] and "status" in u
                    ]

                await agent.rec.wait_until(lambda: statuses()[-1:] == ["failed"])
        finally:
            never.set()
