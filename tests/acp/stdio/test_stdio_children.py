"""Children in stdio mode (K11): the orchestrator's children show as cards in its session,
and ``_agent_channel/children`` reads the tree, as in attach mode."""

from __future__ import annotations

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
