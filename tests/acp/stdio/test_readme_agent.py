"""The core README's complete agent, served exactly as written, is visible over ACP.

The code block is read out of packages/channel-core/README.md, so the test breaks the
moment the README's agent stops working or stops being shown by a client.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import acp
import anyio
import pytest
from conftest import GUARD, HERE, spawn

pytestmark = pytest.mark.anyio

README = HERE.parents[1] / "packages" / "channel-core" / "README.md"


def readme_agent() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    (agent,) = [b for b in blocks if b.startswith('"""letters.py')]
    return agent


async def test_the_readme_agent_streams_its_text_shows_its_tool_and_stops(tmp_path: Path) -> None:
    (tmp_path / "letters.py").write_text(readme_agent())
    path = f"{tmp_path}{os.pathsep}{HERE}"
    async with spawn("--agent", "letters:factory", PYTHONPATH=path) as agent:
        sid = await agent.session()
        with anyio.fail_after(GUARD):
            r = await agent.conn.prompt(session_id=sid, prompt=[acp.text_block("count otter")])
        assert r.stop_reason == "end_turn"
        updates = agent.rec.updates[sid]
        text = "".join(
            u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
        )
        assert "Let me count the letters of 'otter'." in text
        assert "Done: 'otter' has 5 letters." in text
        (card,) = [u for u in updates if u["sessionUpdate"] == "tool_call"]
        assert (card["title"], card["kind"]) == ("Counting 'otter'", "think")
        assert card["status"] == "in_progress"
        done = [u for u in updates if u["sessionUpdate"] == "tool_call_update"]
        assert done[-1]["status"] == "completed"
        assert "'otter' has 5 letters" in str(done[-1]["content"])

        # Stop pressed while the tool runs: the card fails and the prompt answers cancelled.
        before = len(updates)
        pending = asyncio.ensure_future(
            agent.conn.prompt(session_id=sid, prompt=[acp.text_block("count badger")])
        )
        await agent.rec.wait_until(
            lambda: any(u["sessionUpdate"] == "tool_call" for u in updates[before:])
        )
        await agent.conn.cancel(session_id=sid)
        with anyio.fail_after(GUARD):
            assert (await pending).stop_reason == "cancelled"
        failed = [u for u in updates[before:] if u["sessionUpdate"] == "tool_call_update"]
        assert failed and failed[-1]["status"] == "failed"
